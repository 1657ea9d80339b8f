"""The compiled Sensor.record and Sensor.record_summary leave what the pure ones leave.

Two identical sensor trees (a sensor, its parents, a parent's parent) hold
random stats of every built-in kind, a Rate, a stat subclass that overrides
its record (which the kernel must call, not inline) and a parent that is not
a Sensor at all. The same random events (values, counts, summaries, clock
steps across windows) go through the pure methods in one tree and the
compiled ones in the other; every sample, total and measure must match.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.metrics import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Rate,
    SampledStat,
    Sensor,
    Stat,
    WindowedCount,
    WindowedSum,
)
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()
CONFIG = MetricConfig(samples=3, window=10.0)


@pytest.fixture(scope="module")
def compiled() -> tuple[Any, Any]:
    required(K)
    # Bound here too: with AIOPRODUCER_NO_EXTENSIONS=1 the package keeps the pure methods.
    record, summary = K.bind_sensor_kinds(
        Sensor, WindowedSum, Avg, WindowedCount, Max, CumulativeSum, CumulativeCount
    )
    return record, summary


class _PureSensor(Sensor):
    __slots__ = ()
    record = Sensor._record_pure
    record_summary = Sensor._record_summary_pure


class _Doubling(WindowedSum):
    """A subclass with its own record: the kernel must call it."""

    def record(self, value: float, now: float, count: int = 1) -> None:
        super().record(value * 2, now, count)

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        super().record_summary(total * 2, largest, count, now)


class _Listener:
    """A parent that is not a Sensor: it is called."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.seen.append(("record", value, now, count))

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.seen.append(("summary", total, largest, count, now))


_KINDS: dict[str, Any] = {
    "sum": lambda: WindowedSum(CONFIG),
    "avg": lambda: Avg(CONFIG),
    "count": lambda: WindowedCount(CONFIG),
    "max": lambda: Max(CONFIG),
    "csum": CumulativeSum,
    "ccount": CumulativeCount,
    "rate": lambda: Rate(CONFIG),
    "doubling": lambda: _Doubling(CONFIG),
}


def _state(stat: Stat) -> Any:
    if isinstance(stat, Rate):
        stat = stat.stat
    if isinstance(stat, SampledStat):
        return (stat._current, [(s.start, s.count, s.value) for s in stat._samples])
    assert isinstance(stat, CumulativeSum)
    return stat.total


class _LoudSensor(Sensor):
    """A Sensor subclass overriding record: as a parent, its methods are called."""

    __slots__ = ()
    calls: ClassVar[list[str]] = []

    def record(self, value: float, now: float, count: int = 1) -> None:
        _LoudSensor.calls.append("record")
        Sensor._record_pure(self, value, now, count)

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        _LoudSensor.calls.append("summary")
        Sensor._record_summary_pure(self, total, largest, count, now)


def _typed(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _tree(cls: type[Sensor], kinds: list[list[str]]) -> tuple[Sensor, list[Stat], _Listener]:
    listener = _Listener()
    grandparent = _LoudSensor("grandparent")
    parent = cls("parent", [grandparent, listener])  # type: ignore[list-item]
    root = cls("root", [parent])
    stats: list[Stat] = []
    for sensor, names in zip((root, parent, grandparent), kinds):
        for name in names:
            stat = _KINDS[name]()
            sensor.add(stat)
            stats.append(stat)
    return root, stats, listener


_NUMBERS = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.integers(-1000, 1000))
# Clock steps: whole windows (the boundary itself), fractions, ints (an int clock
# compares exactly) and floats.
_STEPS = st.one_of(st.sampled_from([0, 10, 10.0, 20, 5, 9.999999, 10.000001]),
                   st.floats(0.0, 25.0, allow_nan=False), st.integers(0, 25))


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(st.lists(st.sampled_from(sorted(_KINDS)), max_size=4), min_size=3, max_size=3),
    start=st.sampled_from([100, 100.0, 2**60]),
    events=st.lists(
        st.tuples(
            _NUMBERS,  # value (the total of a summary)
            _NUMBERS,  # the largest value of a summary
            _STEPS,  # seconds since the previous event
            st.integers(0, 5),  # count
            st.booleans(),  # a summary instead of a record
        ),
        max_size=30,
    ),
)
def test_the_compiled_sensor_records_what_the_pure_sensor_records(
    compiled: tuple[Any, Any], kinds: list[list[str]], start: float, events: list[Any]
) -> None:
    record, record_summary = compiled
    pure_root, pure_stats, pure_listener = _tree(_PureSensor, kinds)
    root, stats, listener = _tree(Sensor, kinds)
    now = start
    for value, largest, step, count, summary in events:
        now += step
        _LoudSensor.calls = []
        if summary:
            pure_root.record_summary(value, largest, count, now)
            pure_calls = _LoudSensor.calls
            _LoudSensor.calls = []
            record_summary(root, value, largest, count, now)
        else:
            pure_root.record(value, now, count)
            pure_calls = _LoudSensor.calls
            _LoudSensor.calls = []
            record(root, value, now, count)
        # Compared with their types: 1 == 1.0 would hide an int where a float belongs.
        assert _typed([_state(s) for s in stats]) == _typed([_state(s) for s in pure_stats])
        assert listener.seen == pure_listener.seen
        assert _LoudSensor.calls == pure_calls
    for later in (0.0, 5.0, 15.0, 40.0):
        for a_stat, b_stat in zip(stats, pure_stats):
            a, b = a_stat.measure(now + later), b_stat.measure(now + later)
            assert a == b or (math.isnan(a) and math.isnan(b))


def test_keywords_and_the_default_count_work_as_in_the_pure_sensor(compiled: tuple[Any, Any]) -> None:
    record, record_summary = compiled
    pure_root, pure_stats, _ = _tree(_PureSensor, [["sum", "max"], ["count"], ["csum"]])
    root, stats, _ = _tree(Sensor, [["sum", "max"], ["count"], ["csum"]])
    pure_root.record(3.0, 1.0)
    record(root, 3.0, 1.0)
    pure_root.record(value=4, now=2.0, count=2)
    record(root, value=4, now=2.0, count=2)
    pure_root.record_summary(total=9.0, largest=5.0, count=3, now=3.0)
    record_summary(root, 9.0, largest=5.0, count=3, now=3.0)
    assert [_state(s) for s in stats] == [_state(s) for s in pure_stats]
    with pytest.raises(TypeError):
        record(root, 1.0)
    with pytest.raises(TypeError):
        record(root, 1.0, 2.0, count=3, value=2.0)
    with pytest.raises(TypeError):
        record_summary(root, 1.0, 1.0, 1)


def test_an_error_in_a_stat_propagates(compiled: tuple[Any, Any]) -> None:
    record, _ = compiled
    root = Sensor("root")
    root.add(WindowedSum(CONFIG))
    with pytest.raises(TypeError):
        record(root, "not a number", 1.0)
