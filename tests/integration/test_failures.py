"""A stalled, killed or restarted broker: bounded waits, typed failures, recovery."""

from __future__ import annotations

import asyncio
import time

import pytest

from aioproducer import Producer, RecordMetadata, errors
from tests.support.aio import gather_within, read_back, until, within
from tests.support.kafka_broker import KafkaBroker

pytestmark = pytest.mark.asyncio

RECORD = 1000  # bytes per value


async def _fill_until_blocked(
    p: Producer, topic: str, max_block_ms: int, limit: int
) -> tuple[list[asyncio.Future[RecordMetadata]], list[bytes], float]:
    """Enqueue until buffer memory runs out; return futures, values and the blocked time."""
    futs: list[asyncio.Future[RecordMetadata]] = []
    values: list[bytes] = []
    for i in range(limit):
        value = f"{i:06d}".encode() + b"p" * (RECORD - 6)
        started = time.monotonic()
        try:
            fut = await within(p.enqueue(topic, value), max_block_ms / 1000 + 10, "enqueue")
        except errors.KafkaTimeoutError:
            return futs, values, time.monotonic() - started
        futs.append(fut)
        values.append(value)
    raise AssertionError(f"{limit} records were accepted although buffer memory is bounded")


@pytest.mark.parametrize(
    "request_timeout_ms",
    [
        # Longer than the stall: requests wait for the broker, nothing is resent.
        10_000,
        # Shorter than the stall: requests time out, connections are dropped and
        # the batches are retried until the broker answers again.
        1_000,
    ],
    ids=["stall-shorter-than-request-timeout", "stall-longer-than-request-timeout"],
)
async def test_stalled_broker_applies_backpressure_then_delivers(
    private_broker: KafkaBroker, topic_factory, request_timeout_ms: int
) -> None:
    bs = private_broker.bootstrap_servers
    topic = topic_factory(1, bootstrap=bs)
    buffer_memory = 64 * 1024
    max_block_ms = 1000
    p = Producer(
        bs,
        buffer_memory=buffer_memory,
        max_block_ms=max_block_ms,
        request_timeout_ms=request_timeout_ms,
        delivery_timeout_ms=60_000,
        linger_ms=5,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=500,
    )
    await within(p.start(), 15, "start")
    try:
        # Connections and metadata exist before the stall.
        await within(p.send(topic, b"warm-up"), 15, "warm-up send")
        private_broker.pause()
        assert private_broker.pid is not None
        stalled_at = time.monotonic()
        futs, values, blocked = await _fill_until_blocked(
            p, topic, max_block_ms, limit=2 * buffer_memory // RECORD
        )
        # The enqueue that failed really waited for memory, and only max_block_ms
        # (plus room for a slow machine; the stall itself lasts until resume()).
        assert max_block_ms / 1000 * 0.9 <= blocked < max_block_ms / 1000 + 5
        assert 0 < len(futs) * RECORD <= buffer_memory
        assert not any(f.done() for f in futs), "a record completed on a stopped broker"
        if request_timeout_ms < 10_000:
            # Outlast a few request timeouts so that resending is exercised.
            await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - stalled_at)))
            assert not any(f.done() for f in futs)
        private_broker.resume()

        results = await gather_within(futs, 45, "records accepted during the stall")
        assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
        # Memory came back: the producer accepts records again.
        await within(p.send(topic, b"after"), 15, "send after resume")
    finally:
        if private_broker.is_paused:
            private_broker.resume()
        await within(p.close(), 30, "close")

    got = await read_back(bs, topic, expected=len(values) + 2, timeout=30)
    got_values = [r.value for r in got]
    # Idempotence is on by default: even when timed-out requests are resent
    # and the broker later applies the first copies, each record is there once,
    # in order (one partition).
    assert got_values == [b"warm-up", *values, b"after"]


async def test_killed_broker_fails_pending_records_within_delivery_timeout(
    private_broker: KafkaBroker, topic_factory
) -> None:
    bs = private_broker.bootstrap_servers
    topic = topic_factory(2, bootstrap=bs)
    delivery_timeout_ms = 3000
    p = Producer(
        bs,
        request_timeout_ms=1000,
        delivery_timeout_ms=delivery_timeout_ms,
        linger_ms=0,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=300,
    )
    await within(p.start(), 15, "start")
    try:
        await within(p.send(topic, b"warm-up"), 15, "warm-up send")
        # Some records are written just before the broker dies, some after.
        before = [await p.enqueue(topic, f"before-{i}".encode()) for i in range(50)]
        private_broker.kill()
        started = time.monotonic()
        after = [await p.enqueue(topic, f"after-{i}".encode()) for i in range(50)]
        results = await gather_within(
            before + after, delivery_timeout_ms / 1000 + 10, "futures after the kill"
        )
        elapsed = time.monotonic() - started
        assert elapsed < delivery_timeout_ms / 1000 + 5
        # Those before the kill may have made it; everything else failed, typed.
        assert all(isinstance(r, errors.KafkaError) for r in results[len(before) :]), results
        assert all(isinstance(r, (errors.KafkaError, RecordMetadata)) for r in results)
    finally:
        started = time.monotonic()
        await within(p.close(), 10, "close with the broker dead")
    assert time.monotonic() - started < 10


async def test_close_with_timeout_fails_what_a_dead_broker_cannot_take(
    private_broker: KafkaBroker, topic_factory
) -> None:
    bs = private_broker.bootstrap_servers
    topic = topic_factory(1, bootstrap=bs)
    p = Producer(bs, request_timeout_ms=1000, delivery_timeout_ms=60_000, linger_ms=0)
    await within(p.start(), 15, "start")
    await within(p.send(topic, b"warm-up"), 15, "warm-up send")
    private_broker.kill()
    futs = [await p.enqueue(topic, f"r{i}".encode()) for i in range(20)]
    started = time.monotonic()
    await within(p.close(timeout=0.5), 10, "close(timeout=0.5)")
    assert time.monotonic() - started < 5  # the timeout, not the 60 s delivery timeout
    results = await gather_within(futs, 5, "futures after close")
    assert all(isinstance(r, errors.KafkaError) for r in results), results
    assert any(isinstance(r, errors.KafkaTimeoutError) for r in results), results


async def test_restarted_broker_reconnects_and_nothing_hangs(
    private_broker: KafkaBroker, topic_factory
) -> None:
    bs = private_broker.bootstrap_servers
    topic = topic_factory(4, bootstrap=bs)
    delivery_timeout_ms = 20_000
    p = Producer(
        bs,
        request_timeout_ms=2000,
        delivery_timeout_ms=delivery_timeout_ms,
        linger_ms=5,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=500,
    )
    await within(p.start(), 15, "start")
    during: list[asyncio.Future[RecordMetadata]] = []
    stop = asyncio.Event()

    async def keep_sending() -> None:
        i = 0
        while not stop.is_set():
            during.append(await p.enqueue(topic, f"during-{i}".encode()))
            i += 1
            await asyncio.sleep(0.01)

    try:
        await within(p.send(topic, b"warm-up"), 15, "warm-up send")
        sender = asyncio.create_task(keep_sending())
        await until(lambda: len(during) > 10, 30, "records sent before the restart")
        await within(asyncio.to_thread(private_broker.restart), 90, "broker restart")
        # Kafka keeps its log across the restart: the producer reconnects and
        # what it sent before, during and after is all there, once.
        await until(lambda: len(during) > 40, 60, "records sent after the restart")
        stop.set()
        await within(sender, 10, "background sender")
        after = await within(p.send(topic, b"after-restart"), 30, "send after restart")
        assert isinstance(after, RecordMetadata)

        results = await gather_within(
            during, delivery_timeout_ms / 1000 + 10, "records sent during the restart"
        )
        assert all(isinstance(r, (RecordMetadata, errors.KafkaError)) for r in results), [
            r for r in results if not isinstance(r, (RecordMetadata, errors.KafkaError))
        ][:3]
        acked = {(r.partition, r.offset) for r in results if isinstance(r, RecordMetadata)}
        assert len(acked) > 10
        got = await read_back(bs, topic, expected=len(acked) + 2, timeout=60)
        values = [r.value for r in got]
        assert len(values) == len(set(values)), "a record was written twice"
        held = {(r.partition, r.offset): r.value for r in got}
        assert held.get((after.partition, after.offset)) == b"after-restart"
        for i, r in enumerate(results):
            if isinstance(r, RecordMetadata):
                assert held.get((r.partition, r.offset)) == f"during-{i}".encode()
    finally:
        stop.set()
        await within(p.close(), 30, "close")
        # Retrieve every outcome, also when an assertion above failed first.
        await gather_within(during, 5, "records sent during the restart")
