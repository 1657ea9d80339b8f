"""What buffered records leave for the cyclic garbage collector to walk.

A full collection walks every tracked object in the process, and it runs on
the event loop: its pause grows with what pending records hold. A record of
the per-record path holds exactly one tracked object, the future it hands out;
records of a bulk call hold none; and everything a record used dies by
reference counting once it is done, with no cycle left for the collector.
Counted with the collector off, so that nothing is collected behind the test.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest

from aioproducer import Producer, errors
from aioproducer._speedups import kernels
from aioproducer.engine.batch import RESOLVE_SLICE, ProducerBatch, RecordMetadata
from aioproducer.testing import MockCluster

# A new batch, the list the test keeps the futures in, a metadata refresh the
# loop may run meanwhile: a few dozen objects, far below one per record.
SLACK = 100


@contextmanager
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def futures_alive() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is asyncio.Future)


@asynccontextmanager
async def pending(topic: str) -> AsyncIterator[Producer]:
    """A started producer whose records stay buffered (one large batch that does
    not linger out during the test) until it is flushed."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic(topic, partitions=1)
        async with Producer(cluster.bootstrap_servers, batch_size=8 << 20, linger_ms=60_000,
                            max_request_size=16 << 20) as p:
            # Metadata, connection and producer id in place before counting.
            await p.enqueue(topic, b"warm-up")
            await p.flush()
            yield p


@pytest.mark.asyncio
async def test_a_pending_record_holds_one_tracked_object_its_future() -> None:
    records = 2000
    async with pending("gc") as p:
        with collector_off():
            before = len(gc.get_objects())
            futures = [await p.enqueue("gc", b"x" * 100) for _ in range(records)]
            added = len(gc.get_objects()) - before
            await p.flush()
            assert [f.result().offset for f in futures] == list(range(1, records + 1))
    assert records - SLACK <= added <= records + SLACK


@pytest.mark.asyncio
async def test_done_records_die_by_reference_counting() -> None:
    records = 2000
    async with pending("gc-done") as p:
        with collector_off():
            # Weak references, not gc.get_objects(): a delivered record's
            # future leaves the collector's lists (see the next test) before it dies.
            refs = [weakref.ref(await p.enqueue("gc-done", b"x" * 100)) for _ in range(records)]
            # The batch holds them.
            assert sum(1 for r in refs if r() is not None) == records
            await p.flush()
            await asyncio.sleep(0)
            # Freed without a collection: nothing they were part of formed a cycle.
            assert [r for r in refs if r() is not None] == []


@pytest.mark.asyncio
async def test_a_delivered_records_metadata_is_not_walked_but_its_future_is() -> None:
    """A delivered record's metadata (a str and ints) leaves the collector's
    lists with the C kernels; its future stays in them, on either path: a
    done future can still be given attributes or callbacks that close a
    cycle, which the collector must be able to free (the next test)."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("gc-kept", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, retries=0) as p:
            delivered = [await p.enqueue("gc-kept", b"x" * 100) for _ in range(3 * RESOLVE_SLICE)]
            await p.flush()
            cluster.fail_produce("gc-kept", 0, errors.InvalidRecordError.code)
            failed = await p.enqueue("gc-kept", b"refused")
            with pytest.raises(errors.InvalidRecordError):
                await failed
    assert [f.result().offset for f in delivered] == list(range(len(delivered)))
    assert {gc.is_tracked(f.result()) for f in delivered} == {kernels is None}
    assert all(gc.is_tracked(f) for f in delivered)
    assert gc.is_tracked(failed)


@pytest.mark.asyncio
async def test_a_cycle_through_a_delivered_records_future_is_collected() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("gc-cycle", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            fut = await p.enqueue("gc-cycle", b"x")
            await p.flush()

    class Holder:
        pass

    holder = Holder()
    holder.future = fut  # type: ignore[attr-defined]
    fut.holder = holder  # type: ignore[attr-defined]  # a done future takes attributes
    ref = weakref.ref(holder)
    del holder, fut
    gc.collect()
    assert ref() is None


def test_a_cycle_through_a_done_callback_is_freed_once_the_loop_has_run_it() -> None:
    """A callback that keeps the future it was added to closes a cycle through
    the loop (future, loop, the callback's handle, the future) until it runs;
    once it ran, nothing of it is left, untracked future or not."""

    async def main() -> weakref.ref[asyncio.Future[RecordMetadata]]:
        async with MockCluster(brokers=1) as cluster:
            cluster.create_topic("gc-callback", partitions=1)
            async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
                fut = await p.enqueue("gc-callback", b"x")
                await p.flush()
                seen: list[int] = []
                fut.add_done_callback(lambda f: seen.append(fut.result().offset))
                await asyncio.sleep(0)
                assert seen == [0]
                return weakref.ref(fut)

    gc.collect()
    gc.disable()
    try:
        ref = asyncio.run(main())
        assert ref() is None  # freed by reference counting alone
    finally:
        gc.enable()


@pytest.mark.asyncio
async def test_a_completing_batch_lets_go_of_each_slice_of_futures_once_resolved() -> None:
    """Futures nobody else holds die slice by slice, not with the whole batch:
    their deaths then offset new allocations in the collector's count."""
    records = 3 * RESOLVE_SLICE
    async with pending("gc-slices") as p:
        with collector_off():
            refs = [weakref.ref(await p.enqueue("gc-slices", b"x" * 10)) for _ in range(records - 1)]
            last = await p.enqueue("gc-slices", b"x" * 10)
            seen: list[tuple[bool, bool]] = []  # (first future freed, batch done)

            async def watch() -> None:
                while not last.done():
                    seen.append((refs[0]() is None, last.done()))
                    await asyncio.sleep(0)

            watcher = asyncio.create_task(watch())
            await p.flush()
            await watcher
    assert (True, False) in seen
    assert last.result().offset == records


@pytest.mark.asyncio
async def test_a_bulk_call_holds_no_tracked_object_per_record() -> None:
    records = 5000
    values = [b"x" * 100] * records
    async with pending("gc-bulk") as p:
        with collector_off():
            before = len(gc.get_objects())
            result = await p.enqueue_many("gc-bulk", values)
            added = len(gc.get_objects()) - before
            await p.flush()
            assert len(result.result()) == records
    assert added < SLACK


@pytest.mark.asyncio
async def test_large_module_level_tables_are_not_walked_by_the_collector() -> None:
    """A table of bytes kept as a tuple is untracked after one collection;
    as a list, every full collection would walk all of its entries. The
    encoders' caches count too, so the bulk path runs first to fill them."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("gc-tables", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            await p.send_many("gc-tables", [b"x" * 100] * 5000)
    gc.collect()
    walked = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("aioproducer"):
            continue
        for attr, value in list(vars(module).items()):
            inner = list(value.values()) if isinstance(value, dict) else []
            for table in [value, *inner]:
                if isinstance(table, (list, dict, set, tuple)) and len(table) > 1000 and gc.is_tracked(table):
                    walked.append(f"{name}.{attr} ({len(table)} entries)")
    assert walked == []


@pytest.mark.asyncio
async def test_delivered_batches_die_with_their_records() -> None:
    """A topic's last batch is not kept once delivered, whatever its topic does
    next: its bytes are no longer counted in buffer_memory, so keeping it for
    each idle topic would hold memory beyond that bound."""
    topics = [f"gc-kept-{i}" for i in range(20)]
    async with MockCluster(brokers=1) as cluster:
        for topic in topics:
            cluster.create_topic(topic, partitions=1)
        async with Producer(cluster.bootstrap_servers, batch_size=64 << 10, linger_ms=60_000) as p:
            for topic in topics:
                for _ in range(100):  # a third of a batch: the partition stays sticky
                    await p.enqueue(topic, b"x" * 200)
            await p.flush()
            await asyncio.sleep(0)
            with collector_off():
                alive = [o for o in gc.get_objects() if type(o) is ProducerBatch]
            assert alive == []
