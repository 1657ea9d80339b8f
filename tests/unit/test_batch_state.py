"""A batch's one state and its transitions, and that only the batch module changes a batch."""

from __future__ import annotations

import ast
import asyncio
import functools
from pathlib import Path

import pytest

import aioproducer
from aioproducer.engine.batch import BatchState, ProducerBatch, pack_sizes
from aioproducer.engine.record_handle import WAKE_SLICE, RecordHandle
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches

# The package under test, installed or the checkout's (never a path beside tests/: the tests
# may run from a copy, against an installed wheel).
PACKAGE = Path(aioproducer.__file__).resolve().parent


def _filled(
    records: int = 3, loop: asyncio.AbstractEventLoop | None = None
) -> tuple[ProducerBatch, list[RecordHandle]]:
    """A batch of ``records`` records, each holding 100 bytes, and their handles (on ``loop`` if given)."""
    batch = ProducerBatch(
        "t", 0, codec=Codec.NONE, batch_size=16384, now=0.0, delivery_timeout=60, loop=loop
    )
    handles = []
    for i in range(records):
        handle = batch.try_append(1000 + i, None, b"v%d" % i, None, pack_sizes(-1, 2), 100, 40)
        assert handle is not None
        handles.append(handle)
    return batch, handles


def _batch(records: int = 3, loop: asyncio.AbstractEventLoop | None = None) -> ProducerBatch:
    """A batch of ``records`` records, each holding 100 bytes."""
    return _filled(records, loop)[0]


def test_a_retried_batch_goes_back_to_sealed_and_only_an_open_batch_takes_records() -> None:
    batch = _batch()
    assert batch.state is BatchState.OPEN and batch.reserved == 300
    batch.seal()
    assert batch.state is BatchState.SEALED
    assert batch.try_append(2000, None, b"late", None, 0, 100, 40) is None
    assert batch.append_run(2000, [b"late"], 0, 1) == 0
    assert batch.record_count == 3 and batch.reserved == 300
    batch.start_attempt()
    assert batch.in_flight
    batch.answered(maybe_written=True)  # e.g. the request timed out
    assert batch.state is BatchState.SEALED and batch.maybe_written
    batch.requeue(now=5.0, backoff=0.25)
    assert (batch.attempts, batch.retry_at) == (1, 5.25)
    batch.start_attempt()
    batch.answered()  # an answer that says nothing about the append keeps what was known
    assert batch.maybe_written
    with pytest.raises(AssertionError):
        batch.seal()
        batch.start_attempt()
        batch.start_attempt()  # twice in flight: a bug


def test_completion_decides_every_record_at_once_and_wakes_awaiters_in_slices() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        count = WAKE_SLICE + 100  # more than one slice of awaited records
        batch = ProducerBatch(
            "t", 0, codec=Codec.NONE, batch_size=1 << 20, now=0.0, delivery_timeout=60, loop=loop
        )
        handles = []
        for _ in range(count):
            handle = batch.try_append(1000, None, b"v", None, pack_sizes(-1, 1))
            assert handle is not None
            handles.append(handle)
        woken: list[object] = []
        last_woken = loop.create_future()

        def woke(i: int, _: object) -> None:
            woken.append(i)
            if i == count - 1:
                last_woken.set_result(None)

        for i, handle in enumerate(handles):
            handle.add_done_callback(functools.partial(woke, i))
        batch.seal()
        batch.start_attempt()
        batch.answered()
        waiter = batch.done_waiter()
        batch.complete(base_offset=40)
        # The callbacks scheduled by complete() itself run before this mark;
        # those after it were scheduled on a later turn of the loop.
        loop.call_soon(woken.append, "turn")
        # Decided in one step: every record has its answer before any callback runs.
        assert batch.state is BatchState.DONE and batch.decided and batch.done and waiter.done()
        assert all(h.done() for h in handles) and woken == []
        batch.fail(RuntimeError("too late"))  # decided already: ignored
        assert [h.result().offset for h in handles] == list(range(40, 40 + count))
        assert all(h.exception() is None for h in handles)
        await asyncio.wait_for(last_woken, 5)
        assert woken == [*range(WAKE_SLICE), "turn", *range(WAKE_SLICE, count)]

    asyncio.run(run())


def test_a_batch_failed_in_flight_stays_done_when_its_answer_comes() -> None:
    async def run() -> None:
        batch = ProducerBatch(
            "t",
            0,
            codec=Codec.NONE,
            batch_size=1000,
            now=0.0,
            delivery_timeout=60,
            loop=asyncio.get_running_loop(),
        )
        handle = batch.try_append(1, None, b"v", None, pack_sizes(-1, 1), 100, 40)
        assert handle is not None
        batch.seal()
        batch.start_attempt()
        batch.fail(TimeoutError("expired"))
        assert batch.done and not batch.in_flight and handle.done()
        batch.answered(maybe_written=True)
        assert batch.state is BatchState.DONE and batch.maybe_written
        batch.complete(7)
        with pytest.raises(TimeoutError):
            await handle
        assert isinstance(handle.exception(), TimeoutError)
        assert batch.release_reserved() == 100 and batch.reserved == 0

    asyncio.run(run())


def test_a_split_hands_its_memory_waiters_and_records_to_sealed_parts() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        batch, handles = _filled(records=4, loop=loop)
        batch.seal()
        waiter = batch.done_waiter()
        parts = [_batch(records=1, loop=loop), _batch(records=3, loop=loop)]
        for part in parts:
            part.release_reserved()
        batch.replace_by(parts)
        assert batch.done and batch.reserved == 0
        assert [p.reserved for p in parts] == [100, 300] and all(p.sealed for p in parts)
        assert not any(h.done() for h in handles)  # the records are not decided: they moved
        for part, base_offset in zip(parts, (10, 20), strict=True):
            part.start_attempt()
            part.answered()
            assert not waiter.done()
            part.complete(base_offset)
        # Each record's handle answers from the part it went to, at its offset there.
        assert [h.result()[2:] for h in handles] == [
            (10, 1000, -1, 2),
            (20, 1001, -1, 2),
            (21, 1002, -1, 2),
            (22, 1003, -1, 2),
        ]
        await asyncio.wait_for(waiter, 5)

    asyncio.run(run())


def test_stamping_a_built_batch_rewrites_its_producer_state() -> None:
    batch = _batch()
    batch.stamp(7, 1, 10)
    first = batch.build()
    assert batch.build() is first  # built once, kept across retries
    batch.stamp(9, 0, 0)
    (parsed,) = parse_record_batches(batch.build())
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (9, 0, 0)


# Its identity (topic, partition) is set once, and other classes share the names.
_BATCH_FIELDS = set(ProducerBatch.__slots__) - {"__weakref__", "topic", "partition"}
_MUTATORS = {"append", "extend", "insert", "pop", "clear", "remove"}
# Objects of other classes with a field named like a batch's (the bulk and
# Spark column sets have ``timestamps``).
_NOT_BATCHES = {"self", "cols", "columns"}


def _field_written(target: ast.expr) -> str | None:
    """The batch field ``target`` (``x.field`` or ``x.field[i]``) writes, if any."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if (
        isinstance(target, ast.Attribute)
        and target.attr in _BATCH_FIELDS
        and not (isinstance(target.value, ast.Name) and target.value.id in _NOT_BATCHES)
    ):
        return target.attr
    return None


def _writes(tree: ast.AST) -> list[str]:
    """``x.field = ...``, ``x.field += ...`` and ``x.field.append(...)`` on a ProducerBatch field name."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                targets.extend(target.elts if isinstance(target, ast.Tuple) else [target])
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            targets = [node.func.value]
        for target in targets:
            field = _field_written(target)
            if field is not None:
                found.append(f"line {target.lineno}: .{field}")
    return found


def test_only_the_batch_module_changes_a_batch() -> None:
    # Every state change of a batch is a method of aioproducer.engine.batch.
    # Names shared with other classes (a mock broker's transaction has a
    # producer_id) are told apart by whose attribute it is: only ``self``'s
    # own are allowed outside, which a batch never is there.
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "batch.py" and path.parent.name == "engine":
            continue
        if "testing" in path.relative_to(PACKAGE).parts:
            continue  # the mock broker's own records and transactions
        writes = _writes(ast.parse(path.read_text(), str(path)))
        if writes:
            offenders[str(path.relative_to(PACKAGE))] = writes
    assert offenders == {}
