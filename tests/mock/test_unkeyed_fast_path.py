"""enqueue's shortcut for unkeyed records never outlives what it caches.

An unkeyed bytes record goes straight to the open batch of its topic's sticky
partition. These tests change what that choice depended on (the batch left
its queue, the sticky partition moved, the metadata changed) and check that
the next record follows the rules of the full path.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.engine.batch import RECORD_HANDLE_OVERHEAD
from aioproducer.engine.unkeyed_lane import UNKEYED_RECORD_BOUND
from aioproducer.testing import MockCluster
from tests.support.aio import until
from tests.support.producers import DEFAULTS, make_producer

METADATA = 3
# What buffer memory enqueue reserves for an unkeyed record besides its value.
RECORD_BOUND = UNKEYED_RECORD_BOUND + RECORD_HANDLE_OVERHEAD
# Generous bounds for waits that end in well under a second on a working producer.
SETTLE = 15


def _filling(producer: Producer, topic: str) -> Any:
    filling = producer._sticky.filling.get(topic)
    return None if filling is None else filling[0]()


@pytest.mark.asyncio
async def test_a_record_after_its_open_batch_expired_starts_a_new_batch() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(
            cluster,
            DEFAULTS,
            linger_ms=0,
            request_timeout_ms=500,
            delivery_timeout_ms=1000,
            max_in_flight_requests_per_connection=1,
            retry_backoff_ms=50,
        ) as producer:
            await producer.send("t", b"warm")
            cluster.stall_broker(0)
            in_flight = await producer.enqueue("t", b"r1")
            await until(lambda: producer._acc.open_batch(("t", 0)) is None, SETTLE, "r1 sent")
            queued = [await producer.enqueue("t", b"r2"), await producer.enqueue("t", b"r3")]
            batch = _filling(producer, "t")
            assert batch is not None and batch.record_count == 2  # r3 took the shortcut
            # The queued batch expires while its broker stalls: failed and out of its queue.
            for fut in queued:
                with pytest.raises(errors.KafkaTimeoutError):
                    await asyncio.wait_for(fut, SETTLE)
            late = await producer.enqueue("t", b"r4")
            assert batch.record_count == 2  # not appended to the failed batch
            cluster.resume_broker(0)
            metadata = await asyncio.wait_for(late, SETTLE)
            assert metadata.partition == 0
            await asyncio.gather(in_flight, return_exceptions=True)
        assert b"r4" in [r.value for r in cluster.records("t")]


@pytest.mark.asyncio
async def test_a_switch_made_by_a_bulk_call_moves_single_records_too() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=8)
        async with make_producer(cluster, DEFAULTS, linger_ms=60_000, batch_size=16384) as producer:
            # ~11 KiB of single records, then a bulk call whose 1 KiB records
            # fill the batch and move the sticky partition on (KIP-794).
            singles = [await producer.enqueue("t", b"a" * 100) for _ in range(100)]
            old = _filling(producer, "t")
            assert old is not None
            before = producer._sticky.current["t"]
            bulk = await producer.enqueue_many("t", [b"c" * 1000] * 10)
            expected = producer._sticky.current["t"]
            if expected == before:
                # The switch drew the same partition (1 in 8): the bulk call
                # queued a new batch behind the old one, which took no more.
                assert old.sealed
            else:
                # The old batch has room for a small record, but its partition
                # is no longer the sticky one.
                assert not old.sealed and old.builder.size_in_bytes + 50 <= 16384
            count = old.record_count
            small = await producer.enqueue("t", b"d")
            assert old.record_count == count
            await producer.flush(SETTLE)
            assert {(await f).partition for f in singles} == {before}
            assert (await small).partition == expected
            assert (await bulk).errors == {}


@pytest.mark.asyncio
async def test_a_record_after_the_topic_shrank_goes_to_a_partition_it_still_has() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        producer = make_producer(
            cluster, DEFAULTS, linger_ms=60_000, request_timeout_ms=1000, delivery_timeout_ms=61_000
        )
        await producer.start()
        try:
            await producer.partitions_for("t")
            producer._sticky.current["t"] = 1  # the partition about to disappear
            stranded = await producer.enqueue("t", b"r1")
            batch = _filling(producer, "t")
            assert batch is not None and batch.partition == 1
            cluster.delete_topic("t")
            cluster.create_topic("t", partitions=1)
            client = producer._running.client
            assert client is not None
            client.request_update()
            await until(
                lambda: len(client.snapshot.topics["t"].partitions) == 1, SETTLE, "one partition"
            )
            assert not batch.sealed  # still open: only the metadata tells r2 to go elsewhere
            moved = await producer.enqueue("t", b"r2")
            flushing = asyncio.create_task(producer.flush())
            try:
                assert (await asyncio.wait_for(moved, SETTLE)).partition == 0
            finally:
                flushing.cancel()
        finally:
            await producer.close(timeout=0.5)  # r1's partition is gone: do not wait for it
        assert isinstance(stranded.exception(), errors.KafkaTimeoutError)


@pytest.mark.asyncio
@pytest.mark.parametrize("value_size", [1000, 20_000])
async def test_a_topic_forgotten_while_a_record_waits_for_memory_takes_its_records(
    value_size: int,
) -> None:
    """The idle topic is forgotten (metadata_max_idle_ms) while its record waits
    for buffer memory: that record and the next ones are still buffered and
    delivered, and enqueue raises nothing. A 20 kB record is over batch_size,
    so the waiting one moves the sticky partition on at once (KIP-794); with
    1 kB records the move comes from the 16th, on the shortcut."""
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("idle", partitions=1)
        cluster.create_topic("busy", partitions=2)
        stalled = 1 - cluster.leader("idle", 0)
        busy = next(p for p in (0, 1) if cluster.leader("busy", p) == stalled)
        async with make_producer(
            cluster,
            DEFAULTS,
            linger_ms=0,
            batch_size=16384,
            buffer_memory=200_000,
            metadata_max_idle_ms=300,
            max_block_ms=30_000,
            request_timeout_ms=30_000,
            delivery_timeout_ms=60_000,
        ) as producer:
            client = producer._running.client
            assert client is not None
            await producer.send("idle", b"once")
            await producer.send("busy", b"warm", partition=busy)
            cluster.stall_broker(stalled)
            # Records to the stalled broker hold the buffer: too little is left for one more.
            pool = producer._pool
            held = []
            while pool.available >= value_size + RECORD_BOUND:
                size = min(10_000, pool.available - RECORD_BOUND)
                held.append(await producer.enqueue("busy", b"b" * size, partition=busy))
            waiting = asyncio.create_task(producer.enqueue("idle", b"w" * value_size))
            await until(lambda: pool.waiting == 1, SETTLE, "the wait for memory")
            await until(lambda: "idle" not in client.snapshot.topics, SETTLE, "forgetting 'idle'")
            # Slow metadata: the records below are all enqueued before "idle" is back.
            cluster.delay_responses(1.0, api_key=METADATA)
            cluster.resume_broker(stalled)
            first = await asyncio.wait_for(waiting, SETTLE)
            later = [await producer.enqueue("idle", b"v" * value_size) for _ in range(300)]
            cluster.clear_faults()
            await producer.flush(SETTLE)
            assert [(await f).partition for f in [first, *later]] == [0] * 301
            assert {(await f).partition for f in held} == {busy}
        assert len(cluster.records("idle")) == 302
