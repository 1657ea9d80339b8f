"""How a decided batch runs its records' done callbacks, pure and compiled alike.

An ``asyncio.Future`` makes one loop callback per done callback. A batch's
outcome runs the done callbacks of all its awaited records from one loop
callback, each in its own context, with what ``asyncio.Handle`` does for each:
an exception goes to the loop's exception handler and the others still run;
SystemExit and KeyboardInterrupt propagate and the rest run on a later turn. In
debug mode every callback gets its own loop callback again.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer._speedups import kernels
from aioproducer.engine.batch import RecordMetadata
from aioproducer.engine.record_handle import WAKE_SLICE, BatchOutcomePy

OUTCOMES = [pytest.param(BatchOutcomePy, id="pure")]
if kernels is not None:
    OUTCOMES.append(pytest.param(kernels.BatchOutcome, id="compiled"))

pytestmark = pytest.mark.parametrize("Outcome", OUTCOMES)


class CountingLoop(asyncio.SelectorEventLoop):
    """A loop that counts its ``call_soon`` calls."""

    call_soons = 0

    def call_soon(self, *args: Any, **kwargs: Any) -> Any:
        self.call_soons += 1
        return super().call_soon(*args, **kwargs)


@pytest.fixture
def loop() -> Iterator[CountingLoop]:
    loop = CountingLoop()
    yield loop
    loop.close()


def _outcome(Outcome: Any, loop: Any) -> Any:
    return Outcome(loop, "t", 0, RecordMetadata)


def _turn(loop: asyncio.AbstractEventLoop) -> None:
    loop.run_until_complete(asyncio.sleep(0))


def test_a_batch_runs_all_its_done_callbacks_from_one_loop_callback(
    Outcome: Any, loop: CountingLoop
) -> None:
    outcome = _outcome(Outcome, loop)
    var: contextvars.ContextVar[int] = contextvars.ContextVar("var")
    seen: list[tuple[int, int]] = []
    handles = [outcome.handle(i, 0, 1) for i in range(100)]
    for i, h in enumerate(handles):
        ctx = contextvars.copy_context()
        ctx.run(var.set, i)
        h.add_done_callback(lambda h, i=i: seen.append((i, var.get())), context=ctx)
    loop.call_soons = 0
    outcome.complete(7)
    assert loop.call_soons == 1  # one loop callback, not one per record
    assert seen == []  # never called synchronously
    _turn(loop)
    assert seen == [(i, i) for i in range(100)]  # in order, each in its own context
    assert handles[99].result().offset == 106


def test_in_debug_mode_each_done_callback_is_its_own_loop_callback(
    Outcome: Any, loop: CountingLoop
) -> None:
    loop.set_debug(True)
    outcome = _outcome(Outcome, loop)
    seen: list[int] = []
    for i in range(10):
        outcome.handle(i, 0, 1).add_done_callback(lambda h, i=i: seen.append(i))
    loop.call_soons = 0
    outcome.fail(ValueError("x"))
    assert loop.call_soons == 10
    _turn(loop)
    assert seen == list(range(10))


def test_a_raising_callback_is_reported_and_the_others_still_run(
    Outcome: Any, loop: CountingLoop
) -> None:
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    outcome = _outcome(Outcome, loop)
    seen: list[int] = []
    handles = [outcome.handle(i, 0, 1) for i in range(3)]

    def boom(_h: Any) -> None:
        raise ValueError("boom")

    handles[0].add_done_callback(lambda h: seen.append(0))
    handles[1].add_done_callback(boom)
    handles[2].add_done_callback(lambda h: seen.append(2))
    outcome.complete(0)
    _turn(loop)
    assert seen == [0, 2]
    assert len(reported) == 1
    assert isinstance(reported[0]["exception"], ValueError)
    assert reported[0]["handle"] is handles[1]
    assert reported[0]["message"].startswith("Exception in callback ")


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_from_a_callback_propagates_and_the_rest_run_later(
    Outcome: Any, loop: CountingLoop, exc_type: type[BaseException]
) -> None:
    outcome = _outcome(Outcome, loop)
    seen: list[int] = []
    handles = [outcome.handle(i, 0, 1) for i in range(4)]

    def interrupt(_h: Any) -> None:
        raise exc_type()

    handles[0].add_done_callback(lambda h: seen.append(0))
    handles[1].add_done_callback(interrupt)
    handles[1].add_done_callback(lambda h: seen.append(1))
    handles[3].add_done_callback(lambda h: seen.append(3))
    outcome.complete(0)
    with pytest.raises(exc_type):
        loop.run_forever()
    assert seen == [0]
    _turn(loop)  # no callback is lost: the rest run on a later turn
    assert seen == [0, 1, 3]


def test_callbacks_are_taken_when_the_batch_is_decided(Outcome: Any, loop: CountingLoop) -> None:
    """As with a future: once done, removing a callback no longer stops it."""
    outcome = _outcome(Outcome, loop)
    seen: list[str] = []

    def record(_h: Any) -> None:
        seen.append("called")

    h = outcome.handle(0, 0, 1)
    h.add_done_callback(record)
    outcome.complete(0)
    assert h.remove_done_callback(record) == 0
    _turn(loop)
    assert seen == ["called"]


def test_a_batch_of_many_awaited_records_runs_a_slice_per_turn(
    Outcome: Any, loop: CountingLoop
) -> None:
    outcome = _outcome(Outcome, loop)
    ticks = 0

    def tick() -> None:  # one per turn of the loop
        nonlocal ticks
        ticks += 1
        loop.call_soon(tick)

    seen: list[int] = []
    records = 3 * WAKE_SLICE + 5
    for i in range(records):
        outcome.handle(i, 0, 1).add_done_callback(lambda h: seen.append(ticks))
    outcome.complete(0)
    loop.call_soon(tick)
    for _ in range(10):
        _turn(loop)
    assert len(seen) == records
    # Other callbacks ran between the slices: four turns, WAKE_SLICE a turn.
    assert sorted(set(seen)) == [seen[0] + i for i in range(4)]
    assert [seen.count(t) for t in sorted(set(seen))] == [WAKE_SLICE] * 3 + [5]


def test_run_callbacks_refuses_what_it_did_not_make(Outcome: Any, loop: CountingLoop) -> None:
    outcome = _outcome(Outcome, loop)
    h = outcome.handle(0, 0, 1)
    ctx = contextvars.copy_context()
    for entries, start in (
        ((h, print, ctx), 0),  # a tuple, not a list
        ([h, print], 0),  # not triples
        ([h, print, ctx], 1),  # not at a triple's start
        ([h, print, ctx], -3),
        ([h, print, ctx], 6),
        ([h, print, ctx], 2**70),
        ([h, print, ctx], True),
    ):
        with pytest.raises(ValueError, match="triples"):
            outcome._run_callbacks(entries, start)
    for entries in ([object(), print, ctx], [h, print, {}]):
        with pytest.raises(TypeError, match="record handles and contexts"):
            outcome._run_callbacks(entries, 0)


def test_a_callback_that_empties_the_list_it_runs_from_stops_it(
    Outcome: Any, loop: CountingLoop
) -> None:
    outcome = _outcome(Outcome, loop)
    h = outcome.handle(0, 0, 1)
    outcome.complete(0)
    ctx = contextvars.copy_context()
    seen: list[str] = []
    entries: list[Any] = []

    def clear(_h: Any) -> None:
        seen.append("clear")
        entries.clear()

    entries += [h, clear, ctx, h, seen.append, ctx, h, seen.append, ctx]
    outcome._run_callbacks(entries, 0)
    assert seen == ["clear"]
    _turn(loop)
    assert seen == ["clear"]


def test_the_exception_handler_sees_the_exception_as_being_handled(
    Outcome: Any, loop: CountingLoop
) -> None:
    """As from Handle._run's except block: logging.exception() in a handler works."""
    seen: list[Any] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(sys.exc_info()[1]))
    outcome = _outcome(Outcome, loop)
    outcome.handle(0, 0, 1).add_done_callback(lambda h: 1 / 0)
    outcome.complete(0)
    _turn(loop)
    assert len(seen) == 1 and isinstance(seen[0], ZeroDivisionError)
    assert sys.exc_info() == (None, None, None)  # put back afterwards


def test_run_callbacks_takes_exactly_two_positional_arguments(
    Outcome: Any, loop: CountingLoop
) -> None:
    outcome = _outcome(Outcome, loop)
    for args in ((), ([],), ([], 0, 0)):
        with pytest.raises(TypeError):
            outcome._run_callbacks(*args)
    with pytest.raises(TypeError):
        outcome._run_callbacks(entries=[], start=0)


GC_DURING_WAKE = """
import asyncio, gc, sys
from aioproducer._speedups import kernels
from aioproducer.engine.batch import RecordMetadata
from aioproducer.engine.record_handle import BatchOutcomePy

Outcome = BatchOutcomePy if sys.argv[1] == "pure" else kernels.BatchOutcome
loop = asyncio.new_event_loop()
outcome = Outcome(loop, "t", 0, RecordMetadata)
h = outcome.handle(0, 0, 0)
ran = []
h.add_done_callback(lambda _h: ran.append("a"))
def b(_h):
    ran.append("b")
h.add_done_callback(b)
removed = []
def hook(phase, info):  # Python code the collector runs while the batch is woken
    if phase == "start" and outcome.decided and not removed:
        removed.append(h.remove_done_callback(b))
gc.callbacks.append(hook)
nested = []
gc.collect()
gc.set_threshold(1)
for _ in range(int(sys.argv[2])):
    nested = [nested]
outcome.complete(5)
gc.set_threshold(700)
gc.callbacks.remove(hook)
loop.run_until_complete(asyncio.sleep(0))
assert ran in (["a"], ["a", "b"]), ran
print("ok", removed, ran)
"""


@pytest.mark.parametrize("garbage", range(6))
def test_a_collection_while_a_batch_is_woken_loses_no_callback(Outcome: Any, garbage: int) -> None:
    """On 3.10 and 3.11 allocating a container may run the collector, whose hooks
    may remove a waiting handle's callback while the batch takes them."""
    twin = "pure" if Outcome is BatchOutcomePy else "compiled"
    done = subprocess.run(
        [sys.executable, "-c", GC_DURING_WAKE, twin, str(garbage)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok"), done.stdout


GC_DURING_CALLBACKS = """
import asyncio, gc, sys
from aioproducer._speedups import kernels
from aioproducer.engine.batch import RecordMetadata
from aioproducer.engine.record_handle import BatchOutcomePy

Outcome = BatchOutcomePy if sys.argv[1] == "pure" else kernels.BatchOutcome
scenario, k = sys.argv[2], int(sys.argv[3])
loop = asyncio.new_event_loop()
outcome = Outcome(loop, "t", 0, RecordMetadata)
h = outcome.handle(0, 0, 0)
ran = []
SENTINEL = object()

def cb(name):
    return lambda _h: ran.append(name)

class Gone:  # equal to SENTINEL only: the hook's remove_done_callback takes it
    def __call__(self, _h):
        ran.append("gone")
    def __eq__(self, other):
        return other is SENTINEL
    __hash__ = object.__hash__

if scenario == "add":  # a callback added while the first one is being added
    action = lambda: h.add_done_callback(cb("b"))
    call = lambda: h.add_done_callback(cb("a"))
else:  # the callbacks change while remove_done_callback copies and compares them
    h.add_done_callback(Gone() if scenario == "remove" else cb("a"))
    h.add_done_callback(cb("b"))
    action = {
        "cancel": h.cancel,
        "complete": lambda: outcome.complete(1),
        "remove": lambda: h.remove_done_callback(SENTINEL),
    }[scenario]
    call = lambda: h.remove_done_callback(print)
armed, fired, collections = [False], [], [0]
def hook(phase, info):  # Python code the collector runs, as a finalizer would
    if phase == "start":
        collections[0] += 1
        if armed[0]:
            armed[0] = False
            fired.append(action())
gc.callbacks.append(hook)
# Empty the free lists of lists and pairs, so that making one allocates (and may collect).
drained = [[] for _ in range(200)], [(i, -i) for i in range(3000)]
class X:
    pass
junk, keep, T = [], [None] * 16, 10
gc.collect()
gc.set_threshold(T)
while True:  # allocate until the collector runs: its count of allocations is 0 then
    seen = collections[0]
    junk.append(X())
    if collections[0] != seen:
        break
for i in range(T - k + 1):  # the k-th tracked allocation from here collects
    keep[i] = X()
armed[0] = True
call()
armed[0] = False
gc.set_threshold(700)
gc.callbacks.remove(hook)
if not outcome.decided:
    outcome.complete(5)
for _ in range(3):
    loop.run_until_complete(asyncio.sleep(0))
# Each callback runs once; one removed may come back only as the reference lets it
# (remove_done_callback's kept ones replace all, as a list assignment would).
added = scenario != "add" or bool(fired)  # b, unless the call made fewer collections
assert ran.count("b") == added and ran.count("a") == (scenario != "remove"), ran
assert ran.count("gone") <= 1, ran
print("ok", bool(fired), ran)
"""


@pytest.mark.parametrize("scenario", ["add", "cancel", "complete", "remove"])
@pytest.mark.parametrize("k", range(1, 5))
def test_a_collection_while_callbacks_change_runs_each_once(
    Outcome: Any, scenario: str, k: int
) -> None:
    """On 3.10 and 3.11 allocating a container may run the collector, whose hooks
    (or finalizers) may add or remove a callback, cancel the handle or decide its
    batch in the middle of add_done_callback or remove_done_callback. Nothing freed
    is used (the debug allocator poisons freed memory) and each callback runs once."""
    twin = "pure" if Outcome is BatchOutcomePy else "compiled"
    done = subprocess.run(
        [sys.executable, "-c", GC_DURING_CALLBACKS, twin, scenario, str(k)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONMALLOC": "debug"},
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("ok"), done.stdout
