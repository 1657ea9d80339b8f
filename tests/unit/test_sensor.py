"""Sensor.record and Sensor.record_summary: one Python implementation, called as Python calls it.

The sensor has no compiled twin (a few dozen calls per Produce request:
a compiled one saved under 0.3% of the producer's CPU per record), so the same methods run
with and without the C kernels, and every stat and parent is reached through
its own ``record``/``record_summary`` as Python looks them up: a method
overridden on an instance or in a subclass is honoured.
"""

from __future__ import annotations

import importlib
import inspect
import math
from typing import Any

import pytest

from aioproducer.telemetry.metrics import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Rate,
    Sensor,
    WindowedCount,
    WindowedSum,
)

CONFIG = MetricConfig(samples=3, window=10.0)

_KINDS: dict[str, Any] = {
    "sum": lambda: WindowedSum(CONFIG),
    "avg": lambda: Avg(CONFIG),
    "count": lambda: WindowedCount(CONFIG),
    "max": lambda: Max(CONFIG),
    "csum": CumulativeSum,
    "ccount": CumulativeCount,
}


class _Listener:
    """A parent that is not a Sensor: the sensor calls its methods."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.seen.append(("record", value, now, count))

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.seen.append(("summary", total, largest, count, now))


class _LoudSensor(Sensor):
    """A Sensor subclass as a parent: its own record methods are called."""

    __slots__ = ("calls",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls: list[str] = []

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.calls.append("record")
        super().record(value, now, count)

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.calls.append("summary")
        super().record_summary(total, largest, count, now)


def test_the_sensor_methods_are_the_python_ones_with_or_without_kernels() -> None:
    for method in (Sensor.record, Sensor.record_summary):
        assert inspect.isfunction(method), method
        assert method.__module__ == "aioproducer.telemetry.metrics"
    try:
        compiled = importlib.import_module("aioproducer._speedups._kernels")
    except ImportError:
        return
    assert not hasattr(compiled, "bind_sensor_kinds")


@pytest.mark.parametrize("kind", sorted(_KINDS))
@pytest.mark.parametrize("summary", [False, True], ids=["record", "summary"])
def test_a_record_method_set_on_a_stat_instance_is_called(kind: str, summary: bool) -> None:
    sensor = Sensor("s")
    stat = sensor.add(_KINDS[kind]())
    before = stat.measure(1.0)
    seen: list[tuple[Any, ...]] = []
    if summary:
        stat.record_summary = lambda *args: seen.append(args)  # type: ignore[method-assign]
        sensor.record_summary(7.0, 4.0, 2, 1.0)
        assert seen == [(7.0, 4.0, 2, 1.0)]
    else:
        stat.record = lambda *args: seen.append(args)  # type: ignore[method-assign]
        sensor.record(7.0, 1.0, 2)
        assert seen == [(7.0, 1.0, 2)]
    # The override replaced the built-in update: the stat itself is untouched.
    after = stat.measure(1.0)
    assert after == before or (math.isnan(after) and math.isnan(before))


def test_parents_that_override_or_are_not_sensors_are_called_in_order() -> None:
    listener = _Listener()
    loud = _LoudSensor("loud")
    loud_sum = loud.add(WindowedSum(CONFIG))
    root = Sensor("root", [loud, listener])  # type: ignore[list-item]
    root_max = root.add(Max(CONFIG))
    root.record(3.0, 1.0)
    root.record(value=4, now=2.0, count=2)
    root.record_summary(total=9.0, largest=5.0, count=3, now=3.0)
    root.record_summary(1.0, 1.0, 0, 4.0)  # no events: nothing anywhere
    assert loud.calls == ["record", "record", "summary"]
    assert listener.seen == [
        ("record", 3.0, 1.0, 1),
        ("record", 4, 2.0, 2),
        ("summary", 9.0, 5.0, 3, 3.0),
    ]
    assert loud_sum.measure(4.0) == 16.0
    assert root_max.measure(4.0) == 5.0


def test_a_rate_is_recorded_through_its_windowed_stat() -> None:
    sensor = Sensor("s")
    rate = sensor.add(Rate(CONFIG))
    assert isinstance(rate, Rate)
    sensor.record_summary(30.0, 20.0, 3, 0.0)
    assert rate.stat.measure(0.0) == 30.0


def test_wrong_arguments_and_errors_in_a_stat_raise() -> None:
    sensor = Sensor("s")
    sensor.add(WindowedSum(CONFIG))
    with pytest.raises(TypeError):
        sensor.record(1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        sensor.record(1.0, 2.0, count=3, value=2.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        sensor.record_summary(1.0, 1.0, 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        sensor.record("not a number", 1.0)  # type: ignore[arg-type]
