"""start/close/flush: what is pending gets delivered, and a closed producer says so."""

from __future__ import annotations

import pytest

from aioproducer import Producer, RecordMetadata, errors
from tests.support.aio import count_back, gather_within, within

pytestmark = pytest.mark.asyncio

LONG_LINGER_MS = 20_000


async def test_close_delivers_everything_pending(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(4)
    n = 2000
    p = Producer(kafka_bootstrap, linger_ms=LONG_LINGER_MS, batch_size=1 << 20)
    await within(p.start(), 15, "start")
    futs = [await p.enqueue(topic, f"pending-{i}".encode()) for i in range(n)]
    # Nothing is full and the linger is long: without close everything would wait.
    assert not any(f.done() for f in futs)
    # close() must not wait out the linger; the bound is well below it.
    await within(p.close(), LONG_LINGER_MS / 1000 / 2, "close")
    results = await gather_within(futs, 1, "futures after close")
    assert all(isinstance(r, RecordMetadata) and r.offset >= 0 for r in results), results[:3]
    assert await count_back(kafka_bootstrap, topic, expected=n) == n

    # A second close is a no-op, and the closed producer refuses further use.
    await within(p.close(), 5, "second close")
    with pytest.raises(errors.ProducerClosedError):
        await p.send(topic, b"late")
    with pytest.raises(errors.ProducerClosedError):
        await p.enqueue(topic, b"late")
    with pytest.raises(errors.ProducerClosedError):
        await p.flush()
    with pytest.raises(errors.ProducerClosedError):
        await p.partitions_for(topic)
    with pytest.raises(errors.ProducerClosedError):
        await p.start()
    assert await count_back(kafka_bootstrap, topic, expected=n, grace=0.5) == n


async def test_flush_sends_lingering_records_and_producer_stays_usable(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(2)
    async with Producer(kafka_bootstrap, linger_ms=LONG_LINGER_MS) as p:
        first = [await p.enqueue(topic, f"a{i}".encode()) for i in range(50)]
        await within(p.flush(), LONG_LINGER_MS / 1000 / 2, "flush")
        assert all(f.done() and f.result().offset >= 0 for f in first)
        await within(p.flush(), 5, "flush with nothing pending")
        second = [await p.enqueue(topic, f"b{i}".encode()) for i in range(50)]
        await within(p.flush(timeout=10), 12, "second flush")
        assert all(f.done() and f.result().offset >= 0 for f in second)
    assert await count_back(kafka_bootstrap, topic, expected=100) == 100


async def test_close_of_never_started_producer_and_start_twice(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(1)
    never = Producer(kafka_bootstrap)
    await within(never.close(), 5, "close before start")
    with pytest.raises(errors.ProducerClosedError):
        await never.start()

    p = Producer(kafka_bootstrap)
    await within(p.start(), 15, "start")
    await within(p.start(), 5, "second start")  # no-op
    md = await within(p.send(topic, b"once"), 15, "send")
    await within(p.close(), 15, "close")
    assert md.offset == 0
    assert await count_back(kafka_bootstrap, topic, expected=1) == 1
