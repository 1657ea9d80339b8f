"""The uniform sticky partitioner (KIP-794) on a real (mock) cluster."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from aioproducer.testing import MockCluster
from tests.support.producers import make_producer

PRODUCE = 0


SETTINGS: dict[str, Any] = {"linger_ms": 2, "retry_backoff_ms": 50}


async def _share_on_slow_broker(adaptive: bool) -> tuple[float, int]:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=6)
        slow = {p for p in range(6) if cluster.leader("t", p) == 2}
        async with make_producer(
            cluster,
            SETTINGS,
            batch_size=2000,
            partitioner_adaptive_partitioning=adaptive,
        ) as producer:
            await producer.send("t", b"warm", partition=0)
            cluster.delay_responses(0.1, broker=2, api_key=PRODUCE)
            futures = [await producer.enqueue("t", b"v" * 200) for _ in range(3000)]
            await asyncio.gather(*futures)
        counts = collections.Counter(r.partition for r in cluster.records("t"))
        total = sum(counts.values()) - 1
        return sum(counts[p] for p in slow) / total, total


@pytest.mark.asyncio
async def test_adaptive_partitioning_sends_fewer_records_to_a_slow_broker() -> None:
    adaptive, total = await _share_on_slow_broker(True)
    uniform, _ = await _share_on_slow_broker(False)
    assert total == 3000
    # Without load information each broker gets about a third; with it, the
    # slow broker's growing queues make its partitions unlikely choices.
    assert uniform > 0.25, uniform
    assert adaptive < uniform * 0.7, (adaptive, uniform)


@pytest.mark.asyncio
async def test_unkeyed_records_switch_partition_every_batch_size_bytes() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=8)
        async with make_producer(cluster, SETTINGS, batch_size=1000, linger_ms=50) as producer:
            futures = [await producer.enqueue("t", b"v" * 90) for _ in range(200)]
            await asyncio.gather(*futures)
        counts = collections.Counter(r.partition for r in cluster.records("t"))
        # ~1000 bytes (about 8 records of ~120 bytes) per stay: spread over several
        # partitions, none holding more than a few stays' worth.
        assert len(counts) >= 4, counts
        assert max(counts.values()) < 120, counts


@pytest.mark.asyncio
async def test_ignore_keys_spreads_keyed_records_like_unkeyed_ones() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=8)
        for ignore in (False, True):
            async with make_producer(
                cluster, SETTINGS, batch_size=1000, partitioner_ignore_keys=ignore
            ) as producer:
                futures = [await producer.enqueue("t", b"v" * 90, key=b"same") for _ in range(200)]
                partitions = {(await f).partition for f in futures}
            assert len(partitions) == 1 if not ignore else len(partitions) >= 4, partitions


@pytest.mark.asyncio
async def test_partitions_of_a_broker_undrained_past_the_availability_timeout_get_nothing() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=6)
        stalled = {p for p in range(6) if cluster.leader("t", p) == 2}
        async with make_producer(
            cluster,
            SETTINGS,
            batch_size=500,
            max_in_flight_requests_per_connection=1,
            partitioner_availability_timeout_ms=200,
            request_timeout_ms=10000,
        ) as producer:
            for p in range(6):
                await producer.send("t", b"warm", partition=p)
            cluster.stall_broker(2)
            # Records enqueued back to back, before the timeout could run out:
            # the stalled broker's partitions are chosen like the others.
            early = [await producer.enqueue("t", b"v" * 100) for _ in range(200)]
            # Traffic until the producer has seen broker 2 undrained for longer
            # than the timeout (waiting for that, not for a fixed time, keeps the
            # test right on a slow machine), then two stays' worth of records so
            # that the sticky partition moves on.
            acc = producer._acc
            unavailable = asyncio.get_running_loop().time() + 10
            while 2 not in acc.unavailable_nodes(0.2):
                assert asyncio.get_running_loop().time() < unavailable, "broker 2 stayed available"
                await producer.enqueue("t", b"v" * 100)
                await asyncio.sleep(0.002)
            for _ in range(10):
                await producer.enqueue("t", b"v" * 100)
            late = []
            for _ in range(100):
                late.append(await producer.enqueue("t", b"v" * 100))
                await asyncio.sleep(0.002)
            cluster.resume_broker(2)
            early_parts = {(await f).partition for f in early}
            late_parts = {(await f).partition for f in late}
        assert early_parts & stalled  # chosen before the timeout ran out
        assert late and not late_parts & stalled, late_parts
