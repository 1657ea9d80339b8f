"""A producing task shares the event loop, and buffer memory counts what records hold.

Fairness is checked by counting how often a ticker task gets to run, never by
timing: the machine running the tests may be slow or busy.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

import pytest

from aioproducer import BulkResult, Producer
from aioproducer.bulk import appender as bulk
from aioproducer.bulk.appender import BULK_RECORD_OVERHEAD
from aioproducer.engine.batch import RECORD_HANDLE_OVERHEAD
from aioproducer.engine.record_handle import WAKE_SLICE
from aioproducer.producer import facade
from aioproducer.protocol.records import MAX_RECORD_OVERHEAD
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio
T = TypeVar("T")


class Ticker:
    """Counts its turns on the event loop."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = False
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop:
            self.ticks += 1
            await asyncio.sleep(0)

    async def stop(self) -> None:
        self._stop = True
        await self._task


def one_big_batch(cluster: MockCluster) -> Producer:
    """A producer whose records all fit one batch that never lingers out."""
    return Producer(
        cluster.bootstrap_servers, batch_size=8 << 20, linger_ms=10_000, max_request_size=16 << 20
    )


@asynccontextmanager
async def warmed_up(topic: str) -> AsyncIterator[Producer]:
    """A started :func:`one_big_batch` producer that has written to ``topic`` once."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic(topic, partitions=1)
        async with one_big_batch(cluster) as p:
            await p.enqueue(topic, b"warm-up")
            await p.flush()
            yield p
            await p.flush()


async def ticks_during(work: Awaitable[T]) -> tuple[T, int]:
    """Run ``work``; return its result and how often a ticker task ran meanwhile."""
    ticker = Ticker()
    await asyncio.sleep(0)
    start = ticker.ticks
    result = await work
    during = ticker.ticks - start
    await ticker.stop()
    return result, during


async def test_a_tight_enqueue_loop_inside_one_batch_lets_other_tasks_run() -> None:
    records = 20 * facade.YIELD_EVERY_RECORDS

    async def produce(p: Producer) -> None:
        for _ in range(records):
            await p.enqueue("fair", b"x" * 100)

    # One huge batch: the loop never opens a new one, the old yield point.
    async with warmed_up("fair") as p:
        _, during = await ticks_during(produce(p))
    assert during >= records // facade.YIELD_EVERY_RECORDS - 1


async def test_a_batch_opened_while_the_sender_sleeps_costs_no_yield() -> None:
    # Each record opens a batch on its own partition, and each batch lingers:
    # the sender has nothing to do before its timer, so enqueue does not yield.
    partitions = 40
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("spread", partitions=partitions)
        async with one_big_batch(cluster) as p:
            await p.enqueue("spread", b"warm-up", partition=0)
            await p.flush()

            async def produce() -> None:
                for i in range(1, partitions):
                    await p.enqueue("spread", b"x", partition=i)

            _, during = await ticks_during(produce())
            await p.flush()
    # At most the one yield the warm-up's own batch may have left due.
    assert during <= 1


async def test_a_batch_opened_behind_a_full_one_yields_to_the_sender() -> None:
    # A batch holds two records: every other record opens one behind a full
    # batch, which the sender can send at once; the next enqueue yields to it.
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("full", partitions=1)
        async with Producer(cluster.bootstrap_servers, batch_size=250, linger_ms=10_000) as p:
            await p.enqueue("full", b"warm-up")
            await p.flush()

            async def produce() -> list[asyncio.Future[object]]:
                return [await p.enqueue("full", b"x" * 100) for _ in range(40)]

            futures, during = await ticks_during(produce())
            await p.flush()
            assert [f.result().offset for f in futures] == list(range(1, 41))  # type: ignore[attr-defined]
    assert during >= 40 // 3


async def test_a_long_bulk_call_yields_between_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "YIELD_INTERVAL", 0.0)  # yield after every slice
    slices = 30
    async with warmed_up("fair-bulk") as p:
        fut, during = await ticks_during(
            p.enqueue_many("fair-bulk", [b"x" * 10] * (slices * bulk.SLICE_RECORDS))
        )
        await p.flush()
        assert len(fut.result()) == slices * bulk.SLICE_RECORDS
    assert during >= slices - 1


async def test_a_tight_loop_of_short_bulk_calls_lets_other_tasks_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each call is one slice: the yield between slices never comes, so the
    # time spent is counted across calls and the yield falls before a slice.
    monkeypatch.setattr(bulk, "YIELD_INTERVAL", 0.0)
    calls = 30

    async def produce(p: Producer) -> list[asyncio.Future[BulkResult]]:
        return [await p.enqueue_many("fair-calls", [b"x" * 10] * 100) for _ in range(calls)]

    async with warmed_up("fair-calls") as p:
        futures, during = await ticks_during(produce(p))
        await p.flush()
        assert [len(f.result()) for f in futures] == [100] * calls
    assert during >= calls - 1


async def test_a_bulk_call_cancelled_at_its_first_yield_buffers_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bulk, "YIELD_INTERVAL", 0.0)
    async with warmed_up("fair-cancel") as p:
        pool = p._pool
        call = asyncio.create_task(p.enqueue_many("fair-cancel", [b"x" * 10] * 100))
        await asyncio.sleep(0)  # the call checked its columns and yields before its first slice
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert pool.available == pool.total
        after = await p.enqueue("fair-cancel", b"after")
        await p.flush()
    assert after.result().offset == 1  # the cancelled call's records never reached the broker


async def test_a_large_batch_wakes_its_awaited_records_in_slices() -> None:
    """A batch decides all its records at once; the callbacks of those someone
    waits on are scheduled a slice at a time, so other tasks run in between."""
    records = 10 * WAKE_SLICE
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("slices", partitions=1)
        async with one_big_batch(cluster) as p:
            handles = [await p.enqueue("slices", b"x" * 10) for _ in range(records)]
            seen: list[int] = []
            ticker = Ticker()
            for handle in handles:
                handle.add_done_callback(lambda _h: seen.append(ticker.ticks))
            await p.flush()
            assert all(h.done() for h in handles)  # decided at once
            while len(seen) < records:
                await asyncio.sleep(0)
            await ticker.stop()
    assert [h.result().offset for h in handles] == list(range(records))
    assert seen[-1] - seen[0] >= records // WAKE_SLICE - 2


async def test_buffer_memory_counts_each_records_bookkeeping() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("acct", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=10_000) as p:
            pool = p._pool
            await p.enqueue("acct", b"warm-up")
            await p.flush()
            assert pool.available == pool.total
            fut = await p.enqueue("acct", b"v" * 100)
            # encoded bound (fixed fields and 5-byte lengths at their widest,
            # null key -1, the value, an empty header count) plus the future
            # and its bookkeeping
            bound = MAX_RECORD_OVERHEAD + 12 - 1 + 100 + 1
            single = bound + RECORD_HANDLE_OVERHEAD
            assert pool.total - pool.available == single
            # ... which covers at least the future itself.
            assert single - bound >= sys.getsizeof(fut)
            many = await p.enqueue_many("acct", [b"v" * 100] * 10)
            per_bulk_record = bound + BULK_RECORD_OVERHEAD
            assert pool.total - pool.available == single + 10 * per_bulk_record
            await p.flush()
            assert pool.available == pool.total
            assert (await fut).offset == 1 and len(many.result()) == 10


async def test_a_stalled_broker_bounds_records_held_by_buffer_memory_with_overhead() -> None:
    buffer_memory = 256 * 1024
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("stall", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, buffer_memory=buffer_memory, max_block_ms=200, linger_ms=1
        ) as p:
            await p.send("stall", b"warm-up")
            cluster.stall_broker(cluster.broker_ids[0])
            held = []
            with pytest.raises(Exception) as info:
                while True:
                    held.append(await p.enqueue("stall", b"v" * 100))
            assert type(info.value).__name__ == "KafkaTimeoutError"
            cluster.resume_broker(cluster.broker_ids[0])
            await p.flush()
    # Without the bookkeeping in the count, ~1,970 records of 133 B would fit.
    assert len(held) <= buffer_memory // (MAX_RECORD_OVERHEAD + 12 + 100 + sys.getsizeof(held[0]))
