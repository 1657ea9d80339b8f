"""What buffered records leave for the cyclic garbage collector to walk.

A full collection walks every tracked object in the process, and it runs on
the event loop: its pause grows with what pending records hold. A record of
the per-record path holds one tracked object, the handle it hands out (a
failed batch's error can close a cycle through it); records of a bulk call
hold none; and everything a record used dies by
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
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer._speedups import kernels
from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.record_handle import WAKE_SLICE
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


@asynccontextmanager
async def pending(topic: str) -> AsyncIterator[Producer]:
    """A started producer whose records stay buffered (one large batch that does
    not linger out during the test) until it is flushed."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic(topic, partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            batch_size=8 << 20,
            linger_ms=60_000,
            max_request_size=16 << 20,
        ) as p:
            # Metadata, connection and producer id in place before counting.
            await p.enqueue(topic, b"warm-up")
            await p.flush()
            yield p


@pytest.mark.asyncio
async def test_a_pending_record_holds_one_tracked_object_its_handle() -> None:
    records = 2000
    per_record = 1
    async with pending("gc") as p:
        with collector_off():
            before = len(gc.get_objects())
            futures = [await p.enqueue("gc", b"x" * 100) for _ in range(records)]
            added = len(gc.get_objects()) - before
            await p.flush()
            assert [f.result().offset for f in futures] == list(range(1, records + 1))
    assert per_record * records - SLACK <= added <= per_record * records + SLACK


@pytest.mark.asyncio
async def test_a_handle_nobody_holds_dies_at_once_and_its_record_is_sent() -> None:
    """The batch keeps no handle: one its caller drops is freed by reference
    counting there and then (no cycle), while its record goes out."""
    records = 2000
    async with pending("gc-done") as p:
        with collector_off():
            refs = [weakref.ref(await p.enqueue("gc-done", b"x" * 100)) for _ in range(records)]
            assert [r for r in refs if r() is not None] == []
            last = await p.enqueue("gc-done", b"last")
            await p.flush()
    assert last.result().offset == records + 1  # after the warm-up record and the dropped ones


@pytest.mark.asyncio
async def test_a_delivered_records_metadata_is_not_walked() -> None:
    """With the C kernels, a delivered record's metadata (a str and ints) is
    not in the collector's lists; its handle is, as a Future would be."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("gc-kept", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, retries=0) as p:
            delivered = [await p.enqueue("gc-kept", b"x" * 100) for _ in range(3 * WAKE_SLICE)]
            await p.flush()
            cluster.fail_produce("gc-kept", 0, errors.InvalidRecordError.code)
            failed = await p.enqueue("gc-kept", b"refused")
            with pytest.raises(errors.InvalidRecordError):
                await failed
    assert [f.result().offset for f in delivered] == list(range(len(delivered)))
    assert {gc.is_tracked(f.result()) for f in delivered} == {kernels is None}
    assert {gc.is_tracked(f) for f in delivered} == {True}
    assert gc.is_tracked(failed)


@pytest.mark.asyncio
async def test_a_handle_takes_no_attributes_to_close_a_cycle_with() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("gc-cycle", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            handle = await p.enqueue("gc-cycle", b"x")
            await p.flush()
    with pytest.raises(AttributeError):
        handle.holder = object()  # type: ignore[attr-defined]


def test_a_cycle_through_a_done_callback_is_freed_once_the_loop_has_run_it() -> None:
    """A callback that keeps the future it was added to closes a cycle through
    the loop (future, loop, the callback's handle, the future) until it runs;
    once it ran, nothing of it is left, untracked future or not."""

    async def main() -> weakref.ref[Any]:
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
                if (
                    isinstance(table, (list, dict, set, tuple))
                    and len(table) > 1000
                    and gc.is_tracked(table)
                ):
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
