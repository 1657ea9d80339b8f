"""Many concurrent senders against a small buffer: all delivered, wake-ups grow linearly.

1,000 tasks each ``await producer.send(...)`` with ``buffer_memory`` small
enough that most of them queue for memory. Every record must be delivered, and
the work the event loop does must grow linearly with the number of tasks: a
pool that woke every waiter on each release (or a sender that polled per
waiter) would do quadratic work. Work is counted as callbacks the event loop
runs (task steps and future callbacks), never as wall time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer.engine.buffer_pool import BufferPool
from tests.reliability.harness import within

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=3, default_partitions=4, auto_create_topics=True),
]

PARTITIONS = 4
VALUE = b"x" * 200
# About 60 of these records fit in 16 KiB: the rest of the tasks wait for memory.
CONFIG: dict[str, Any] = {
    "buffer_memory": 16 * 1024,
    "batch_size": 4096,
    "linger_ms": 1,
    "max_block_ms": 30_000,
    "request_timeout_ms": 5_000,
    "delivery_timeout_ms": 30_000,
}


@dataclass
class Work:
    tasks: int
    callbacks: int  # callbacks the event loop ran while the tasks were sending
    waited: int  # tasks that had to wait for buffer memory
    grants: int  # BufferPool._grant calls

    @property
    def per_task(self) -> float:
        return self.callbacks / self.tasks


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Count event-loop callbacks, memory waits and grants while the block runs."""
    counts: Counter[str] = Counter()
    handle_run = asyncio.events.Handle._run
    reserve = BufferPool.reserve
    grant = BufferPool._grant

    def run(handle: asyncio.Handle) -> None:
        counts["callbacks"] += 1
        handle_run(handle)

    async def counted_reserve(pool: BufferPool, size: int, timeout: float) -> None:
        counts["waited"] += 1
        await reserve(pool, size, timeout)

    def counted_grant(pool: BufferPool) -> None:
        counts["grants"] += 1
        grant(pool)

    with monkeypatch.context() as m:
        m.setattr(asyncio.events.Handle, "_run", run)
        m.setattr(BufferPool, "reserve", counted_reserve)
        m.setattr(BufferPool, "_grant", counted_grant)
        yield counts


async def send_concurrently(
    cluster: Any, make_producer: Callable[..., Any], tasks: int, monkeypatch: pytest.MonkeyPatch
) -> Work:
    topic = f"scale-{tasks}"
    cluster.create_topic(topic, partitions=PARTITIONS)
    p = await make_producer(**CONFIG)
    await p.partitions_for(topic)
    await p.send(topic, b"warm-up")  # producer id and connections in place

    async def one(i: int) -> Any:
        return await p.send(topic, b"%06d:" % i + VALUE, key=b"k%d" % (i % 50))

    with counting(monkeypatch) as counts:
        results = await within(
            asyncio.gather(*(one(i) for i in range(tasks))), 60, f"{tasks} concurrent sends"
        )
    await p.close()

    assert len(results) == tasks
    values = Counter(r.value for r in cluster.records(topic))
    sent = {b"%06d:" % i + VALUE for i in range(tasks)}
    assert set(values) - {b"warm-up"} == sent, "records missing or unexpected"
    assert max(values.values()) == 1, "records stored twice"
    return Work(tasks, counts["callbacks"], counts["waited"], counts["grants"])


async def test_concurrent_senders_all_delivered_with_linear_wakeups(
    kafka_cluster: Any,
    producer: Any,
    scenario: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = await send_concurrently(kafka_cluster, producer, 1000, monkeypatch)
    large = await send_concurrently(kafka_cluster, producer, 2000, monkeypatch)

    # Most tasks really queued for memory, or the test would prove nothing.
    assert small.waited > small.tasks // 2, small
    assert large.waited > large.tasks // 2, large
    ratio = large.callbacks / small.callbacks
    scenario(
        f"concurrent sends: {small.tasks} tasks -> {small.callbacks} loop callbacks "
        f"({small.per_task:.1f}/task, {small.waited} waited for memory, {small.grants} grants); "
        f"{large.tasks} tasks -> {large.callbacks} ({large.per_task:.1f}/task); ratio {ratio:.2f}"
    )
    # Doubling the tasks doubles the work (quadratic work would quadruple it).
    assert ratio < 2.8, (small, large)
    # And the work per task stays small in absolute terms: every task takes a
    # handful of steps, not one per other waiter.
    # (about 5 per task here; a pool waking every waiter on each release needs
    # over 20 per task at 2,000 tasks, and more the more tasks wait).
    assert large.per_task < 12, large
