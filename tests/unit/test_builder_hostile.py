"""Differential fuzz of the record batch builder's twins when the caller's code runs mid-read.

Objects whose ``__getitem__``, ``__index__``, ``__iter__``, ``__bytes__`` or (on
3.12+) ``__buffer__`` append to the builder, build it, or empty the containers
being read: the compiled RecordBatchBuilder and RecordBatchBuilderPy must answer
alike and hold the same state after each call (the random-call fuzz is in
test_builder_differential.py). .ci/sanitize runs this module under
AddressSanitizer and UBSan.
"""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.protocol.record_parsing import parse_record_batches
from tests.support.builders import FUZZ, PURE, outcome, require_compiled, state

# -- hostile calls: the caller's code runs while the builder reads --------------------


class Hostile:
    """What a hostile object does when its code runs: to the builder or the containers."""

    def __init__(self, builder: Any, action: str, target: list | None = None) -> None:
        self.builder, self.action, self.target, self.runs = builder, action, target, 0

    def __call__(self) -> None:
        self.runs += 1
        if self.action == "append":
            self.builder.append(5, b"k", b"inner")
        elif self.action == "build" and self.builder.record_count:
            self.builder.build()
        elif self.action == "clear" and self.target is not None:
            self.target.clear()
        elif self.action == "raise":
            raise KeyError("hostile")


class HostileList(list):
    def __init__(self, items: list, hook: Hostile, at: int) -> None:
        super().__init__(items)
        self.hook, self.at = hook, at

    def __getitem__(self, i: Any) -> Any:
        if i == self.at or (isinstance(i, slice) and self.at < 0):
            self.hook()
        return super().__getitem__(i)


class HostileIndex:
    def __init__(self, value: int, hook: Hostile) -> None:
        self.value, self.hook = value, hook

    def __index__(self) -> int:
        self.hook()
        return self.value

    def __str__(self) -> str:
        return f"HostileIndex({self.value})"


class HostilePair:
    def __init__(self, pair: tuple, hook: Hostile) -> None:
        self.pair, self.hook = pair, hook

    def __iter__(self) -> Any:
        self.hook()
        return iter(self.pair)


class HostileBuffer:
    def __init__(self, raw: bytes, hook: Hostile) -> None:
        self.raw, self.hook = raw, hook

    def __buffer__(self, flags: int) -> memoryview:
        self.hook()
        return memoryview(self.raw)


_ACTIONS = st.sampled_from(["append", "build", "clear", "raise", "none"])
_PLACES = ["values", "keys", "order-slice", "order-index", "start", "headers-pair"]
if sys.version_info >= (3, 12):
    _PLACES += ["value-buffer", "header-buffer"]


def hostile_call(builder: Any, place: str, action: str, at: int, n: int) -> tuple:
    """A run (or an append) with one hostile object at ``place``; fresh per twin."""
    values = [b"v%d" % i for i in range(n)]
    keys: list | None = None
    order: Any = None
    start: Any = 0
    hdrs: Any = [("h", b"1")]
    hook = Hostile(builder, action)
    if place == "values":
        hook.target = values = HostileList(values, hook, at)
    elif place == "keys":
        keys = HostileList([b"k%d" % i for i in range(n)], hook, at)
        hook.target = keys
    elif place == "order-slice":
        order = HostileList(list(range(n))[::-1], hook, -1)
        hook.target = order
    elif place == "order-index":
        order = [HostileIndex(i, hook) if i == at else i for i in range(n)]
        hook.target = values
    elif place == "start":
        start = HostileIndex(0, hook)
        hook.target = values
    elif place == "headers-pair":
        hdrs = []
        hdrs += [("a", b"1"), HostilePair(("b", b"2"), hook), ("c", None)]
        hook.target = hdrs
    elif place == "value-buffer":
        if n:
            values[at % n] = HostileBuffer(b"buffered", hook)
        hook.target = values
    elif place == "header-buffer":
        hdrs = []
        hdrs += [("a", HostileBuffer(b"1", hook)), ("b", b"2")]
        hook.target = hdrs
    return outcome(builder.append_run, 9, values, start, n, keys, hdrs, order)


@settings(FUZZ, max_examples=300)
@given(
    place=st.sampled_from(_PLACES),
    action=_ACTIONS,
    at=st.integers(0, 6),
    n=st.integers(0, 7),
    before=st.integers(0, 2),
    then_append=st.booleans(),
)
def test_the_twins_agree_when_the_callers_code_runs_mid_read(
    place: str,
    action: str,
    at: int,
    n: int,
    before: int,
    then_append: bool,
) -> None:
    twins = [PURE(batch_size=1 << 16), require_compiled()(batch_size=1 << 16)]
    answers = []
    for builder in twins:
        for i in range(before):
            builder.append(1 + i, None, b"before")
        answer = hostile_call(builder, place, action, at, n)
        later = outcome(builder.append, 20, b"k", b"after", [("z", None)]) if then_append else None
        answers.append((answer, later, state(builder)))
    assert answers[1] == answers[0]
    built = [outcome(b.build) for b in twins] if twins[0].record_count else [None, None]
    assert built[1] == built[0]
    if built[0] is not None and built[0][0] == "ok":
        (batch,) = parse_record_batches(built[0][1])
        assert len(batch.records) == twins[0].record_count


@settings(FUZZ, max_examples=150)
@given(place=st.sampled_from(["name", "value", "key", "pair"]), action=_ACTIONS)
def test_the_twins_agree_when_a_record_of_append_runs_code(place: str, action: str) -> None:
    answers = []
    for cls in (PURE, require_compiled()):
        builder = cls()
        builder.append(1, None, b"first")
        hook = Hostile(builder, action)
        hdrs: list[Any] = [("a", b"1"), ("b", None)]
        hook.target = hdrs
        key: Any = b"key"
        if place == "pair":
            hdrs.insert(1, HostilePair(("p", b"2"), hook))
        elif sys.version_info >= (3, 12):
            buffered = HostileBuffer(b"buffered", hook)
            if place == "name":
                hdrs.insert(0, (buffered, b"v"))
            elif place == "value":
                hdrs.insert(0, ("n", buffered))
            else:
                key = buffered
        answers.append(
            (
                outcome(builder.append, 2, key, b"value", hdrs),
                state(builder),
                outcome(builder.build) if builder.record_count else None,
            )
        )
    assert answers[1] == answers[0]


def test_records_that_fill_the_batch_exactly_fit_in_both() -> None:
    # Every batch size over a span: some land exactly on a record's end, where
    # ``size > room`` (fits) and ``size >= room`` (would not) differ.
    values = [bytes([i]) * (i * 7 % 90) for i in range(40)]
    keys = [None if i % 3 else b"key-%d" % i for i in range(40)]
    for batch_size in range(62, 1500, 3):
        runs, singles = [], []
        for cls in (PURE, require_compiled()):
            builder = cls(batch_size=batch_size)
            runs.append(
                (builder.append_run(5, values, 0, 40, keys), state(builder), bytes(builder.build()))
            )
            builder = cls(batch_size=batch_size)
            taken = [builder.append(5 + i, keys[i], values[i], None) for i in range(40)]
            singles.append((taken, state(builder), bytes(builder.build())))
        assert runs[1] == runs[0], batch_size
        assert singles[1] == singles[0], batch_size
