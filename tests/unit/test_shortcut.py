"""The compiled step 1 of enqueue (EnqueueShortcut) decides and does what its pure twin does.

Two identical shortcuts, each with scripted lanes that remember their calls and
answer a future or None, take the same random record in the same random state:
a loop mark of this thread, another thread, a loop not running, or one whose
``_thread_id`` raises; a countdown at, below or above zero (an int past 64
bits too); ``plain`` true or false; a partition, timestamp or headers given or
not; bytes or other values and keys; a topic checked or not; no keyed lane.
Both must answer alike (the same future or None, or the same exception),
call the same lane with the same arguments, and count down alike (from the
count read before the append, even when the lane's code changes it). Lanes of
exactly the bound classes are called directly by the compiled step; the mock
tests (tests/mock/test_unkeyed_fast_path.py, test_keyed_fast_path.py) run
those through a real producer.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine.shortcut import EnqueueShortcut, EnqueueShortcutPy
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def steps() -> tuple[type[Any], type[Any]]:
    """The pure step and the compiled one (both, whichever the package chose)."""
    return EnqueueShortcutPy, required(K).EnqueueShortcut


class _Mark:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    @property
    def _thread_id(self) -> int | None:
        if self.kind == "here":
            return threading.get_ident()
        if self.kind == "elsewhere":
            return threading.get_ident() + 1
        if self.kind == "stopped":
            return None
        raise RuntimeError("mark unreadable")


class _Lane:
    """A lane that answers what the test says and remembers its calls."""

    def __init__(self, name: str, calls: list[tuple[Any, ...]], answer: Any) -> None:
        self.name = name
        self.calls = calls
        self.answer = answer
        self.shortcut: EnqueueShortcut | None = None

    def append(self, *args: Any) -> Any:
        self.calls.append((self.name, *args))
        if self.shortcut is not None:  # a lane that runs code changing the countdown
            self.shortcut.countdown = 50
        return self.answer


FUTURE = object()
_VALUES = st.sampled_from([b"v", b"", bytearray(b"v"), "v", None, memoryview(b"v")])
_KEYS = st.sampled_from([None, b"k", bytearray(b"k"), "k"])


def _shortcut(
    cls: type[Any], state: dict[str, Any], calls: list[tuple[Any, ...]]
) -> EnqueueShortcut:
    shortcut = cls(_Mark(state["mark"]), state["countdown"], set(state["seen"]))
    shortcut.plain = state["plain"]
    shortcut.lane = _Lane("unkeyed", calls, FUTURE if state["unkeyed_takes"] else None)  # type: ignore[assignment]
    if state["keyed"]:
        shortcut.keyed_lane = _Lane("keyed", calls, FUTURE if state["keyed_takes"] else None)  # type: ignore[assignment]
    if state["meddling"]:
        for lane in (shortcut.lane, shortcut.keyed_lane):
            if lane is not None:
                lane.shortcut = shortcut  # type: ignore[attr-defined]
    return shortcut


def _run(take: Any, shortcut: EnqueueShortcut, record: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "answer", take(shortcut, *record)
    except Exception as exc:  # compared by type and message
        return "raised", (type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(
    state=st.fixed_dictionaries(
        {
            "mark": st.sampled_from(["here", "here", "here", "elsewhere", "stopped", "broken"]),
            "countdown": st.one_of(st.integers(-2, 3), st.just(2**70), st.just(-(2**70))),
            "plain": st.sampled_from([True, True, False, 1, 0]),
            "seen": st.sampled_from([(), ("t",), ("t", "u")]),
            "keyed": st.booleans(),
            "unkeyed_takes": st.booleans(),
            "keyed_takes": st.booleans(),
            "meddling": st.booleans(),
        }
    ),
    topic=st.sampled_from(["t", "u", "v", {"t"}]),  # a set: ``in`` looks it up as a frozenset
    value=_VALUES,
    key=_KEYS,
    partition=st.sampled_from([None, None, 0]),
    timestamp_ms=st.sampled_from([None, None, 5]),
    headers=st.sampled_from([None, None, []]),
)
def test_compiled_take_equals_the_pure_step(
    steps: tuple[type[Any], type[Any]],
    state: dict[str, Any],
    topic: str,
    value: Any,
    key: Any,
    partition: Any,
    timestamp_ms: Any,
    headers: Any,
) -> None:
    record = (topic, value, key, partition, timestamp_ms, headers)
    pure_calls: list[tuple[Any, ...]] = []
    compiled_calls: list[tuple[Any, ...]] = []
    pure, compiled = (
        _shortcut(steps[0], state, pure_calls),
        _shortcut(steps[1], state, compiled_calls),
    )
    expected = _run(steps[0].take, pure, record)
    got = _run(steps[1].take, compiled, record)
    assert got == expected
    assert compiled_calls == pure_calls
    assert compiled.countdown == pure.countdown


def test_the_pure_step_takes_only_what_a_lane_can(steps: tuple[type[Any], type[Any]]) -> None:
    # The reference itself, on the cases that decide (the comparison above
    # would pass for two steps wrong alike).
    for cls in steps:
        take = cls.take
        calls: list[tuple[Any, ...]] = []
        state = {
            "mark": "here",
            "countdown": 2,
            "plain": True,
            "seen": ("t",),
            "keyed": True,
            "unkeyed_takes": True,
            "keyed_takes": True,
            "meddling": False,
        }
        shortcut = _shortcut(cls, state, calls)
        assert take(shortcut, "t", b"v", None, None, None, None) is FUTURE
        assert take(shortcut, "t", b"v", b"k", None, None, None) is FUTURE
        assert calls == [("unkeyed", "t", b"v"), ("keyed", "t", b"k", b"v")]
        assert shortcut.countdown == 0
        assert take(shortcut, "t", b"v", None, None, None, None) is None  # a yield is due
        shortcut.countdown = 5
        assert take(shortcut, "u", b"v", b"k", None, None, None) is None  # topic not checked
        assert take(shortcut, "t", b"v", None, 0, None, None) is None  # a partition
        assert take(shortcut, "t", "v", None, None, None, None) is None  # not bytes
        shortcut.plain = False
        assert take(shortcut, "t", b"v", None, None, None, None) is None
        shortcut.plain = True
        shortcut.loop_mark = _Mark("elsewhere")
        assert take(shortcut, "t", b"v", None, None, None, None) is None
        assert len(calls) == 2 and shortcut.countdown == 5
        shortcut.loop_mark = _Mark("broken")
        with pytest.raises(RuntimeError, match="mark unreadable"):
            take(shortcut, "t", b"v", None, None, None, None)


def test_take_refuses_other_objects_and_arity(steps: tuple[type[Any], type[Any]]) -> None:
    compiled_take = steps[1].take
    shortcut = _shortcut(
        steps[1],
        {
            "mark": "here",
            "countdown": 1,
            "plain": True,
            "seen": (),
            "keyed": False,
            "unkeyed_takes": True,
            "keyed_takes": False,
            "meddling": False,
        },
        [],
    )
    with pytest.raises(TypeError, match="take"):
        compiled_take(shortcut, "t", b"v")
    with pytest.raises(TypeError, match="EnqueueShortcut"):
        compiled_take(object(), "t", b"v", None, None, None, None)


class _Odd:
    """A value whose ``==`` raises and whose ``!=`` answers: Python's ``!=`` calls ``__ne__``."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("== is not for me")

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


# Python's own text for an unset slot after the type's name, which Python 3.13 spells with its
# module ("'aioproducer.engine.shortcut.EnqueueShortcut' object ...") and earlier versions without.
_NO_SLOT = "object has no attribute '{}'"
_TYPE_THEN_NO_SLOT = re.compile(r"^'[\w.]+' (object has no attribute '\w+')$")


def _contract(outcome: Any) -> Any:
    """``outcome`` with an AttributeError's message cut to what both steps promise on every Python.

    The type and the slot named; not how the version spells the shortcut's type.
    """
    if isinstance(outcome, tuple) and outcome[0] == "raised" and outcome[1][0] is AttributeError:
        match = _TYPE_THEN_NO_SLOT.match(outcome[1][1])
        if match:
            return ("raised", (AttributeError, match.group(1)))
    return outcome


def test_odd_states_are_read_when_and_as_the_pure_step_reads_them(
    steps: tuple[type[Any], type[Any]],
) -> None:
    def world(cls: type[Any]) -> tuple[EnqueueShortcut, list[tuple[Any, ...]]]:
        calls: list[tuple[Any, ...]] = []
        shortcut = _shortcut(
            cls,
            {
                "mark": "here",
                "countdown": 5,
                "plain": True,
                "seen": ("t",),
                "keyed": True,
                "unkeyed_takes": True,
                "keyed_takes": True,
                "meddling": False,
            },
            calls,
        )
        return shortcut, calls

    outcomes = []
    for cls in steps:
        take = cls.take
        seen: list[Any] = []
        # A slot the record does not need is not read: no topic set for an unkeyed record.
        shortcut, calls = world(cls)
        del shortcut.topics_seen
        seen.append(_run(take, shortcut, ("t", b"v", None, None, None, None)))
        seen.append(_run(take, shortcut, ("t", b"v", b"k", None, None, None)))  # here it is
        # The countdown is read again after ``plain`` (whose truth test may change it).
        shortcut, calls = world(cls)

        class Meddling:
            def __bool__(self) -> bool:
                shortcut.countdown = 100
                return True

        shortcut.plain = Meddling()  # type: ignore[assignment]
        seen.append(_run(take, shortcut, ("t", b"v", None, None, None, None)))
        seen.append(shortcut.countdown)
        # The thread check is ``!=``, as in the pure step.
        shortcut, calls = world(cls)

        class OddMark:
            _thread_id = _Odd()

        shortcut.loop_mark = OddMark()
        seen.append(_run(take, shortcut, ("t", b"v", None, None, None, None)))
        outcomes.append(seen)
    assert [_contract(o) for o in outcomes[1]] == [_contract(o) for o in outcomes[0]]
    assert _contract(outcomes[0][1]) == ("raised", (AttributeError, _NO_SLOT.format("topics_seen")))
    assert outcomes[0][0] == ("answer", FUTURE)
    assert outcomes[0][3] == 99 and outcomes[0][4] == ("answer", FUTURE)


def test_the_package_chose_one_step() -> None:
    k = required(K)
    assert EnqueueShortcut is (
        k.EnqueueShortcut if batch_module.kernels is not None else EnqueueShortcutPy
    )
