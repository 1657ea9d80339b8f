"""Timestamps outside int64 are refused at the call; records already buffered are not harmed.

A record batch stores timestamps as int64 milliseconds. A larger one used to be
accepted and then fail the whole batch when it was encoded, taking the good
records buffered beside it down with it.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio

TIMEOUT = 10.0
MAX = 2**63 - 1


async def test_out_of_range_timestamps_are_refused_and_the_batch_beside_them_arrives() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("ts", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=60_000) as p:
            first = await p.enqueue("ts", b"before", partition=0, timestamp_ms=1)
            for bad in (2**63, 2**64, -1):
                with pytest.raises(ValueError, match=r"2\*\*63-1"):
                    await p.enqueue("ts", b"bad", partition=0, timestamp_ms=bad)
            with pytest.raises(ValueError, match="timestamp_ms\\[1\\]"):
                await p.enqueue_many("ts", [b"a", b"b"], partition=0, timestamp_ms=[1, 2**63])
            last = await p.enqueue("ts", b"largest", partition=0, timestamp_ms=MAX)
            await asyncio.wait_for(p.flush(), TIMEOUT)
            assert first.result().offset == 0
            assert last.result().offset == 1
        records = cluster.records("ts")
        assert [(r.value, r.timestamp_ms) for r in records] == [(b"before", 1), (b"largest", MAX)]
