"""RecordHandle and BatchOutcome: a record's future as a view on its batch, pure and compiled alike.

Every test runs on the pure reference (``BatchOutcomePy``) and, when the
kernels are built, on the compiled twin: the same answers, errors and
asyncio behaviour (await, gather, wait, wait_for, shield, as_completed,
cancellation, done callbacks with their context), including across a split
batch (KIP-126) and a closed loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import time
import weakref
from collections import namedtuple
from typing import Any

import pytest

from aioproducer._speedups import kernels
from aioproducer.engine.batch import RecordMetadata, pack_sizes
from aioproducer.engine.record_handle import BatchOutcomePy, register_record_metadata_py

OUTCOMES = [pytest.param(BatchOutcomePy, id="pure")]
if kernels is not None:
    OUTCOMES.append(pytest.param(kernels.BatchOutcome, id="compiled"))

REGISTERS = [pytest.param(register_record_metadata_py, id="pure")]
if kernels is not None:
    REGISTERS.append(pytest.param(kernels.register_record_metadata, id="compiled"))

pytestmark = pytest.mark.parametrize("Outcome", OUTCOMES)
_async = pytest.mark.asyncio


def _outcome(Outcome: Any, loop: Any, topic: str = "t", partition: int = 3) -> Any:
    return Outcome(loop, topic, partition, RecordMetadata)


async def _turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@_async
async def test_a_completed_batch_answers_every_record_with_its_own_metadata(Outcome: Any) -> None:
    outcome = _outcome(Outcome, asyncio.get_running_loop())
    handles = [outcome.handle(i, 1_000 + i, pack_sizes(-1 if i == 0 else i, 100)) for i in range(4)]
    assert not any(h.done() for h in handles)
    outcome.complete(500)
    assert [h.result() for h in handles] == [
        RecordMetadata("t", 3, 500 + i, 1_000 + i, -1 if i == 0 else i, 100) for i in range(4)
    ]
    assert all(h.done() and not h.cancelled() and h.exception() is None for h in handles)
    assert type(handles[0].result()) is RecordMetadata


@_async
async def test_log_append_time_and_acks_zero(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    appended = _outcome(Outcome, loop)
    h = appended.handle(2, 7, pack_sizes(3, -1))
    appended.complete(10, 99)
    assert h.result() == RecordMetadata("t", 3, 12, 99, 3, -1)
    unacknowledged = _outcome(Outcome, loop)
    h = unacknowledged.handle(5, 7, pack_sizes(1, 1))
    unacknowledged.complete(-1)
    assert h.result().offset == -1


@_async
async def test_a_failed_batch_gives_every_record_its_error(Outcome: Any) -> None:
    outcome = _outcome(Outcome, asyncio.get_running_loop())
    handles = [outcome.handle(i, 0, 1) for i in range(3)]
    error = TimeoutError("delivery timeout")
    outcome.fail(error)
    outcome.complete(1)  # decided once: ignored
    for h in handles:
        assert h.done() and h.exception() is error
        with pytest.raises(TimeoutError) as raised:
            h.result()
        assert raised.value is error
    with pytest.raises(TypeError, match="exception instance"):
        _outcome(Outcome, asyncio.get_running_loop()).fail("not an exception")


@_async
async def test_a_pending_handle_says_so(Outcome: Any) -> None:
    h = _outcome(Outcome, asyncio.get_running_loop()).handle(0, 0, 1)
    with pytest.raises(asyncio.InvalidStateError, match="Result is not set."):
        h.result()
    with pytest.raises(asyncio.InvalidStateError, match="Exception is not set."):
        h.exception()
    assert asyncio.isfuture(h) and h.get_loop() is asyncio.get_running_loop()
    assert repr(h) == "<RecordHandle pending>"


@_async
async def test_cancelling_a_handle_stops_the_wait_not_the_record(Outcome: Any) -> None:
    outcome = _outcome(Outcome, asyncio.get_running_loop())
    h, other = outcome.handle(0, 0, 1), outcome.handle(1, 0, 1)
    seen: list[Any] = []
    h.add_done_callback(seen.append)
    assert h.cancel("no longer needed") is True
    assert h.cancel() is False and h.cancelled() and h.done()
    await _turns()
    assert seen == [h]
    with pytest.raises(asyncio.CancelledError, match="no longer needed"):
        h.result()
    with pytest.raises(asyncio.CancelledError):
        h.exception()
    outcome.complete(40)
    assert h.cancelled() and other.result().offset == 41
    assert other.cancel() is False


@_async
async def test_awaiting_handles_in_tasks_gather_wait_and_as_completed(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    handles = [outcome.handle(i, 0, 1) for i in range(6)]

    async def waiter(h: Any) -> Any:
        return await h

    task = asyncio.ensure_future(waiter(handles[0]))
    gathered = asyncio.gather(*handles[1:3])
    waited = asyncio.ensure_future(asyncio.wait(handles[3:5]))
    assert asyncio.ensure_future(handles[5]) is handles[5]
    await _turns()
    assert not task.done() and not gathered.done() and not waited.done()
    loop.call_soon(outcome.complete, 0)
    assert (await task).offset == 0
    assert [m.offset for m in await gathered] == [1, 2]
    done, pending = await waited
    assert done == set(handles[3:5]) and not pending
    offsets = [(await h).offset for h in asyncio.as_completed(handles)]
    assert sorted(offsets) == list(range(6))


@_async
async def test_cancelling_the_awaiting_task_cancels_only_the_handle(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    h, other = outcome.handle(0, 0, 1), outcome.handle(1, 0, 1)
    task = asyncio.ensure_future(asyncio.shield(other))
    waiting = asyncio.ensure_future(_await(h))
    await _turns()
    waiting.cancel()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with pytest.raises(asyncio.CancelledError):
        await task
    assert h.cancelled() and not other.done()  # shield kept the inner one
    outcome.complete(7)
    assert other.result().offset == 8


async def _await(h: Any) -> Any:
    return await h


@_async
async def test_wait_for_times_out_and_succeeds(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    slow = outcome.handle(0, 0, 1)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(slow, 0.001)  # never decided: the timeout is the only way out
    assert slow.cancelled()
    later = _outcome(Outcome, loop)
    h = later.handle(1, 0, 1)
    loop.call_soon(later.complete, 3)
    assert (await asyncio.wait_for(h, 60)).offset == 4


@_async
async def test_done_callbacks_run_on_the_loop_with_their_context(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    h = outcome.handle(0, 0, 1)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[str, Any]] = []

    def record(handle: Any) -> None:
        seen.append((var.get(), handle))

    var.set("copied")
    h.add_done_callback(record)  # the current context, copied
    ctx = contextvars.copy_context()
    ctx.run(var.set, "given")
    h.add_done_callback(record, context=ctx)
    h.add_done_callback(record)
    assert h.remove_done_callback(record) == 3
    h.add_done_callback(record, context=ctx)
    var.set("later")
    outcome.complete(0)
    assert seen == []  # never called synchronously
    await _turns()
    assert seen == [("given", h)]
    h.add_done_callback(record)  # already done: scheduled at once
    await _turns()
    assert seen[-1] == ("later", h)


@_async
async def test_done_callbacks_keep_their_order_and_run_once_after_removals(Outcome: Any) -> None:
    """The first callback is kept apart from the others (compiled): removing it, or
    all of them, and adding more keeps the order they were added in, and a handle
    left without callbacks and given new ones still runs each once."""
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    seen: list[str] = []

    def cb(name: str) -> Any:
        return lambda _h, name=name: seen.append(name)

    a, b, c, d = (cb(n) for n in "abcd")
    first = outcome.handle(0, 0, 1)
    first.add_done_callback(a)
    first.add_done_callback(b)
    first.add_done_callback(c)
    assert first.remove_done_callback(a) == 1
    first.add_done_callback(d)
    emptied = outcome.handle(1, 0, 1)
    emptied.add_done_callback(a)
    assert emptied.remove_done_callback(a) == 1
    assert emptied.remove_done_callback(a) == 0
    emptied.add_done_callback(b)  # its only callback now, after none
    emptied.add_done_callback(c)
    moved = outcome.handle(2, 0, 1)
    moved.add_done_callback(a)
    assert moved.remove_done_callback(a) == 1
    moved.add_done_callback(d)
    part = _outcome(Outcome, loop)
    outcome.move_to([0], [part])  # every waiting handle goes to the part, once
    part.complete(7)
    await _turns()
    assert seen == ["b", "c", "d", "b", "c", "d"]
    assert [h.result().offset for h in (first, emptied, moved)] == [7, 8, 9]


@_async
async def test_a_split_batch_moves_each_record_to_its_part(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    handles = [outcome.handle(i, 100 + i, 1) for i in range(6)]
    seen: list[int] = []
    for i in (1, 4):
        handles[i].add_done_callback(lambda h, i=i: seen.append(i))
    first, second = _outcome(Outcome, loop), _outcome(Outcome, loop)
    outcome.move_to([0, 3], [first, second])
    outcome.complete(0)  # moved: decided no more
    second.complete(50)
    await _turns()
    assert seen == [4]
    assert [h.done() for h in handles] == [False] * 3 + [True] * 3
    assert [h.result().offset for h in handles[3:]] == [50, 51, 52]
    # The first part splits again.
    a, b = _outcome(Outcome, loop), _outcome(Outcome, loop)
    first.move_to([0, 2], [a, b])
    b.complete(20)
    a.fail(ValueError("too large"))
    await _turns()
    assert sorted(seen) == [1, 4]
    assert isinstance(handles[0].exception(), ValueError)
    assert handles[2].result() == RecordMetadata("t", 3, 20, 102, -1, 0)
    with pytest.raises(ValueError, match="first starting at record 0"):
        _outcome(Outcome, loop).move_to([1], [a])
    with pytest.raises(ValueError, match="first starting at record 0"):
        _outcome(Outcome, loop).move_to([0, 0], [a, b])
    with pytest.raises(ValueError, match="first starting at record 0"):
        _outcome(Outcome, loop).move_to([], [])


def test_an_outcome_decided_after_its_loop_closed_still_answers(Outcome: Any) -> None:
    loop = asyncio.new_event_loop()
    outcome = _outcome(Outcome, loop)
    h = outcome.handle(0, 5, 1)
    h.add_done_callback(lambda _: None)
    loop.close()
    outcome.complete(9)  # the callback cannot be scheduled: no error
    assert h.result().offset == 9


@_async
async def test_int64_edges_agree(Outcome: Any) -> None:
    loop = asyncio.get_running_loop()
    outcome = _outcome(Outcome, loop)
    top = outcome.handle(1, 2**63 - 1, 2**64 - 1)
    outcome.complete(2**63 - 1)
    with pytest.raises(OverflowError):
        top.result()
    with pytest.raises(OverflowError):
        outcome.handle(2**63, 0, 1)
    with pytest.raises(OverflowError):
        outcome.handle(0, 0, -1)
    with pytest.raises(OverflowError):
        _outcome(Outcome, loop).complete(2**63)
    edge = _outcome(Outcome, loop)
    h = edge.handle(0, -(2**63), 2**64 - 1)
    edge.complete(2**63 - 1)
    assert h.result()[2:] == (2**63 - 1, -(2**63), 2**32 - 2, 2**32 - 2)


@_async
async def test_any_metadata_class_is_called_as_a_class(Outcome: Any) -> None:
    calls: list[tuple[Any, ...]] = []

    class Meta:
        def __init__(self, *fields: Any) -> None:
            calls.append(fields)

    outcome = Outcome(asyncio.get_running_loop(), "t", 0, Meta)
    h = outcome.handle(1, 2, pack_sizes(3, 4))
    outcome.complete(10)
    assert isinstance(h.result(), Meta) and h.result() is h.result()
    assert calls == [("t", 0, 11, 2, 3, 4)]
    # time.struct_time is a tuple subclass with its own layout: called, never
    # built as a plain tuple.
    odd = Outcome(asyncio.get_running_loop(), 1, 2, lambda *a: time.struct_time(a + (0, 0, 0)))
    h = odd.handle(0, 0, 1)
    odd.complete(0)
    assert tuple(h.result())[:6] == (1, 2, 0, 0, -1, 0)


@_async
async def test_callbacks_that_change_the_callbacks_while_compared(Outcome: Any) -> None:
    outcome = _outcome(Outcome, asyncio.get_running_loop())
    h = outcome.handle(0, 0, 1)

    class Sneaky:
        def __eq__(self, other: object) -> bool:
            h.add_done_callback(print)  # changes the list being searched
            return True

        __hash__ = object.__hash__

        def __call__(self, _: Any) -> None:
            pass

    h.add_done_callback(Sneaky())
    h.add_done_callback(Sneaky())
    assert h.remove_done_callback(Sneaky()) == 2  # each comparison added a callback: it ends
    outcome.complete(0)
    await _turns()
    assert h.result().offset == 0


@_async
async def test_a_cycle_through_a_callback_is_collected(Outcome: Any) -> None:
    outcome = _outcome(Outcome, asyncio.get_running_loop())
    h = outcome.handle(0, 0, 1)
    h.add_done_callback(lambda _, h=h: h)  # handle -> callback -> handle, and outcome -> handle
    gone = weakref.ref(h)
    del h, outcome
    gc.collect()
    assert gone() is None


def test_a_failed_batch_whose_error_holds_the_frame_of_its_handles_is_collected(
    Outcome: Any,
) -> None:
    """Awaiting one handle of a failed batch raises the batch's error into the
    awaiting coroutine: the error's traceback holds that frame, whose locals
    hold the other handles of the batch, which hold the outcome, which holds
    the error. Every handle is tracked, so the collector frees the cycle."""
    loop = asyncio.new_event_loop()
    try:
        outcome = _outcome(Outcome, loop)
        quiet, awaited = outcome.handle(0, 0, 1), outcome.handle(1, 0, 1)
        outcome.fail(ValueError("refused"))

        async def wait() -> None:
            held = quiet  # a local of the frame the error's traceback keeps
            try:
                await awaited
            except ValueError:
                pass
            assert held.done()

        loop.run_until_complete(wait())
        gone = [weakref.ref(quiet), weakref.ref(awaited)]
        del quiet, awaited, outcome, wait
        gc.collect()
        assert [r() for r in gone] == [None, None]
    finally:
        loop.close()


@pytest.mark.parametrize("register", REGISTERS)
def test_register_record_metadata_takes_only_a_plain_named_tuple(
    Outcome: Any, register: Any
) -> None:
    register(RecordMetadata)
    for wrong in (
        time.struct_time,
        tuple,
        namedtuple("Five", "a b c d e"),
        int,
        RecordMetadata("t", 0, 0, 0, 0, 0),
    ):
        with pytest.raises(TypeError, match="NamedTuple class of six fields"):
            register(wrong)
