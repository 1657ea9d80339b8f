"""Two-phase commit on MockCluster (v1 and v2 transactions), through real sockets.

The Apache Kafka versions of these scenarios are in
tests/integration/test_two_phase_commit.py; here they also run on the pure path.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import PreparedTransaction, Producer, errors
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0
END_TXN = 26


async def _prepare(cluster: MockCluster, tid: str, values: list[bytes]) -> PreparedTransaction:
    async with Producer(cluster.bootstrap_servers, transactional_id=tid, max_block_ms=5000) as p:
        await asyncio.wait_for(p.init_transactions(), TIMEOUT)
        await p.begin_transaction()
        for i, value in enumerate(values):
            await p.enqueue("tx", value, partition=i % 2)
        prepared = await asyncio.wait_for(p.prepare_transaction(), TIMEOUT)
        with pytest.raises(errors.IllegalStateError, match="prepared"):
            await p.enqueue("tx", b"after prepare")
        with pytest.raises(errors.IllegalStateError, match="prepared"):
            await p.begin_transaction()
    return prepared


@pytest.mark.parametrize("version", [1, 2])
async def test_prepare_close_then_commit_and_abort_from_another_producer(version: int) -> None:
    async with MockCluster(brokers=2, transaction_version=version) as cluster:
        cluster.create_topic("tx", partitions=2)
        kept = await _prepare(cluster, "kept", [b"k%d" % i for i in range(6)])
        dropped = await _prepare(cluster, "dropped", [b"d%d" % i for i in range(4)])
        assert (kept.transaction_version, dropped.transaction_version) == (version, version)
        assert cluster.request_count(END_TXN) == 0  # closing did not end them
        assert cluster.records("tx") == []  # open: nothing visible yet
        async with Producer(cluster.bootstrap_servers, max_block_ms=5000) as courier:
            await asyncio.wait_for(courier.complete_transaction(kept, commit=True), TIMEOUT)
            await asyncio.wait_for(courier.complete_transaction(dropped, commit=False), TIMEOUT)
        assert sorted(r.value for r in cluster.records("tx")) == [b"k%d" % i for i in range(6)]


@pytest.mark.parametrize("version", [1, 2])
async def test_a_fenced_prepared_transaction_is_not_completed(version: int) -> None:
    async with MockCluster(brokers=1, transaction_version=version) as cluster:
        cluster.create_topic("tx", partitions=2)
        prepared = await _prepare(cluster, "t", [b"z%d" % i for i in range(3)])
        async with Producer(
            cluster.bootstrap_servers, transactional_id="t", max_block_ms=5000
        ) as newer:
            await asyncio.wait_for(newer.init_transactions(), TIMEOUT)
        async with Producer(cluster.bootstrap_servers, max_block_ms=5000) as courier:
            with pytest.raises(errors.TransactionNotCompletedError, match="'t'"):
                await asyncio.wait_for(courier.complete_transaction(prepared, commit=True), TIMEOUT)
        assert cluster.records("tx") == []


async def test_prepare_needs_an_open_transaction_and_complete_a_started_producer() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="t", max_block_ms=5000
        ) as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            with pytest.raises(errors.IllegalStateError, match="no transaction was begun"):
                await p.prepare_transaction()
        prepared = PreparedTransaction("t", 1, 0, 1)
        with pytest.raises(errors.IllegalStateError, match="start"):
            await Producer(cluster.bootstrap_servers).complete_transaction(prepared, commit=True)
