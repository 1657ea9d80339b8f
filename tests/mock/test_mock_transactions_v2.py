"""Transactions v2 (KIP-890 part 2) on MockCluster(transaction_version=2), through real sockets."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, INIT_PID = 24, 25, 26, 22


def _identity(p: Producer) -> tuple[int, int]:
    assert p._running.txn is not None
    return p._running.txn.producer_identity


@pytest.mark.parametrize("version", [1, 2])
async def test_v1_and_v2_on_the_mock(version: int) -> None:
    async with MockCluster(brokers=2, transaction_version=version) as cluster:
        cluster.create_topic("tx", partitions=3)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="w", linger_ms=0, max_block_ms=5000
        ) as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            pid, epoch = _identity(p)
            async with p.transaction():
                for i in range(9):
                    await p.enqueue("tx", b"c%d" % i, partition=i % 3)
                await p.send_offsets_to_transaction({("in", 0): 3}, "grp")
            await p.begin_transaction()
            await p.send("tx", b"aborted", partition=1)
            await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            async with p.transaction():
                await p.send("tx", b"last", partition=2)
            bumps = 3 if version == 2 else 0
            assert _identity(p) == (pid, epoch + bumps)
        visible = sorted(r.value for r in cluster.records("tx"))
        assert visible == sorted([b"c%d" % i for i in range(9)] + [b"last"])
        assert cluster.coordinator.committed_offsets == {"grp": {("in", 0): 3}}
        if version == 2:
            assert cluster.request_count(ADD_PARTITIONS) == 0
            assert cluster.request_count(ADD_OFFSETS) == 0
        else:
            assert cluster.request_count(ADD_PARTITIONS) >= 3
            assert cluster.request_count(ADD_OFFSETS) == 1
        assert cluster.request_count(INIT_PID) == 1  # no client-side epoch bump


async def test_epoch_overflow_gives_a_new_producer_id() -> None:
    async with MockCluster(brokers=1, transaction_version=2) as cluster:
        cluster.create_topic("tx", partitions=1)
        # The id has lived long: its epoch is one bump from the last one.
        coordinator = cluster.coordinator
        _, old_pid, _ = coordinator.init_producer_id("long-lived", 60_000, -1, -1, 4)
        coordinator.epochs[old_pid] = 32765
        coordinator.by_id["long-lived"].producer_epoch = 32765
        async with Producer(
            cluster.bootstrap_servers, transactional_id="long-lived", max_block_ms=5000
        ) as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            assert _identity(p) == (old_pid, 32766)
            async with p.transaction():
                await p.send("tx", b"one")
                await p.send("tx", b"two")
            new_pid, epoch = _identity(p)
            assert new_pid != old_pid and epoch == 0
            # Sequences start again at 0 under the new id: the broker takes them.
            async with p.transaction():
                await p.send("tx", b"three")
            assert _identity(p) == (new_pid, 1)
        records = cluster.records("tx")
        assert [r.value for r in records] == [b"one", b"two", b"three"]


async def test_v2_stale_epoch_is_fenced() -> None:
    async with MockCluster(brokers=1, transaction_version=2) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="z", max_block_ms=5000
        ) as first:
            await asyncio.wait_for(first.init_transactions(), TIMEOUT)
            async with Producer(
                cluster.bootstrap_servers, transactional_id="z", max_block_ms=5000
            ) as second:
                await asyncio.wait_for(second.init_transactions(), TIMEOUT)
                await first.begin_transaction()
                # The partition leader sees a stale epoch: abortable (KIP-588), and
                # the abort's EndTxn is where the coordinator says "fenced".
                with pytest.raises(errors.InvalidProducerEpochError):
                    await asyncio.wait_for(first.send("tx", b"zombie"), TIMEOUT)
                with pytest.raises(errors.ProducerFencedError):
                    await asyncio.wait_for(first.abort_transaction(), TIMEOUT)
                with pytest.raises(errors.ProducerFencedError):
                    await first.begin_transaction()
                async with second.transaction():
                    await second.send("tx", b"second")
        assert [r.value for r in cluster.records("tx")] == [b"second"]


async def test_cluster_upgraded_to_v2_between_transactions() -> None:
    """Java's clientSideEpochBumpRequired: the transaction under way ends on v1,
    a fresh epoch is taken (InitProducerId), and the next one runs v2."""
    async with MockCluster(brokers=1, transaction_version=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="up", max_block_ms=5000
        ) as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            pid, epoch = _identity(p)
            async with p.transaction():
                await p.send("tx", b"v1")
            cluster.transaction_version = 2
            cluster.drop_connections()  # the next ApiVersions finalizes v2
            async with p.transaction():
                await asyncio.wait_for(p.send("tx", b"still v1"), TIMEOUT)
            added = cluster.request_count(ADD_PARTITIONS)
            assert added == 2
            assert _identity(p) == (pid, epoch + 1)  # the bump before the first v2 transaction
            assert cluster.request_count(INIT_PID) == 2
            async with p.transaction():
                await p.send("tx", b"v2")
            assert cluster.request_count(ADD_PARTITIONS) == added
            assert _identity(p) == (pid, epoch + 2)  # EndTxn v5
        assert [r.value for r in cluster.records("tx")] == [b"v1", b"still v1", b"v2"]
