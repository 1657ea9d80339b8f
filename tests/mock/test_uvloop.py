"""aioproducer on uvloop: the same round trips as on asyncio's loop, against the mock cluster.

Each test runs its own uvloop loop (``uvloop.run``) and checks that it really
ran on it, so a silent fall back to the default loop cannot pass.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer
from aioproducer.engine.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from tests.support.extras import require

uvloop = require("uvloop", extra="test")

TIMEOUT = 30.0


def test_idempotent_round_trip_on_uvloop() -> None:
    async def scenario() -> None:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        async with MockCluster(brokers=3) as cluster:
            cluster.create_topic("uv", partitions=3)
            async with Producer(cluster.bootstrap_servers, linger_ms=2) as producer:
                futures = [
                    await producer.enqueue(
                        "uv", b"v%d" % i, key=b"k%d" % (i % 7), headers=[("i", b"%d" % i)]
                    )
                    for i in range(500)
                ]
                await asyncio.wait_for(producer.flush(), TIMEOUT)
                metadata = [f.result() for f in futures]
            records = cluster.records("uv")
        assert len(records) == 500
        stored = {(r.partition, r.offset): r for r in records}
        for i, md in enumerate(metadata):
            record = stored[(md.partition, md.offset)]
            assert (record.key, record.value, record.headers) == (
                b"k%d" % (i % 7),
                b"v%d" % i,
                [("i", b"%d" % i)],
            )
            assert md.partition == partition_for_key(b"k%d" % (i % 7), 3)
        # Idempotence is on by default: one producer id, gap-free sequences per partition.
        assert len({r.producer_id for r in records}) == 1
        for p in range(3):
            seqs = [r.sequence for r in records if r.partition == p]
            assert seqs == list(range(len(seqs)))

    uvloop.run(scenario())


def test_transaction_commit_and_abort_on_uvloop() -> None:
    async def scenario() -> None:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        async with MockCluster(brokers=3) as cluster:
            cluster.create_topic("uvtx", partitions=2)
            async with Producer(cluster.bootstrap_servers, transactional_id="uv-txn") as producer:
                await asyncio.wait_for(producer.init_transactions(), TIMEOUT)
                async with producer.transaction():
                    for i in range(10):
                        await producer.enqueue("uvtx", b"kept-%d" % i)
                await producer.begin_transaction()
                await producer.send("uvtx", b"dropped")
                await asyncio.wait_for(producer.abort_transaction(), TIMEOUT)
            committed = sorted(r.value for r in cluster.records("uvtx"))
        assert committed == sorted(b"kept-%d" % i for i in range(10))

    uvloop.run(scenario())
