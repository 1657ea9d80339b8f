"""TRANSACTION_ABORTABLE (KIP-890 part 1) and per-partition TxnOffsetCommit retries, on MockCluster."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import errors
from aioproducer.testing import MockCluster
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0
ABORTABLE = errors.TransactionAbortableError.code


async def test_produce_transaction_abortable_then_abort_and_go_on() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        cluster.fail_produce("t", 0, ABORTABLE)
        async with make_producer(cluster, transactional_id="abortable") as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            await p.begin_transaction()
            with pytest.raises(errors.TransactionAbortableError):
                await asyncio.wait_for(p.send("t", b"refused"), TIMEOUT)
            with pytest.raises(errors.IllegalStateError, match="abort"):
                await p.commit_transaction()
            await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"next"), TIMEOUT)
        assert [r.value for r in cluster.records("t")] == [b"next"]


async def test_end_txn_transaction_abortable_forbids_a_second_commit() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(cluster, transactional_id="abortable") as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            await p.begin_transaction()
            await asyncio.wait_for(p.send("t", b"in-txn"), TIMEOUT)
            cluster.fail_api(26, ABORTABLE)
            with pytest.raises(errors.TransactionAbortableError):
                await asyncio.wait_for(p.commit_transaction(), TIMEOUT)
            # The coordinator said abort: committing again must not be tried.
            with pytest.raises(errors.IllegalStateError, match="abort"):
                await p.commit_transaction()
            ends = cluster.request_count(26)
            await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            assert cluster.request_count(26) == ends + 1
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"next"), TIMEOUT)
