"""Pending metric events: recorded as rows, folded into the stats in groups.

The producer appends a row per event to ``Metrics.pending`` and folds them
later; what is measured must be what recording each event at once leaves,
window for window, whenever the folds happen.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.telemetry.metrics import (
    FOLD_AT,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Metrics,
    Rate,
    Sensor,
    WindowedCount,
)
from aioproducer.telemetry.producer_metrics import ProducerMetrics
from aioproducer.types import MetricName

CFG = MetricConfig(samples=2, window=10.0)


def _registry() -> tuple[Metrics, list[Sensor]]:
    """A registry with a parent sensor and two children, each stat kind exposed."""
    reg = Metrics(CFG)
    parent, _ = reg.sensor("all")
    children = [reg.sensor(f"child-{i}", (parent,))[0] for i in range(2)]
    for sensor in (parent, *children):
        for kind, stat in (
            ("rate", Rate(CFG)),
            ("count-rate", Rate(CFG, WindowedCount(CFG))),
            ("avg", Avg(CFG)),
            ("max", Max(CFG)),
            ("sum", CumulativeSum()),
            ("count", CumulativeCount()),
        ):
            reg.add(MetricName(kind, sensor.name, (), ""), sensor.add(stat))
    return reg, [parent, *children]


def _same(a: dict[Any, float], b: dict[Any, float]) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        if math.isnan(value):
            assert math.isnan(b[name]), name
        else:
            assert value == pytest.approx(b[name], rel=1e-9, abs=1e-6), name


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(
            st.integers(0, 2),  # which sensor: the parent or a child
            st.floats(0, 1e6, allow_nan=False),  # value
            st.integers(0, 5),  # count: 0 records nothing, folded or not
            st.floats(0.0, 7.0, allow_nan=False),  # seconds since the previous event
            st.booleans(),  # fold after this event
        ),
        max_size=60,
    )
)
def test_folded_rows_measure_as_events_recorded_at_once(events: list[Any]) -> None:
    """Windows that end among the pending rows end where they would have."""
    direct, direct_sensors = _registry()
    deferred, deferred_sensors = _registry()
    now = 100.0
    for which, value, count, step, fold in events:
        now += step
        # The largest: half the total, or NaN now and then (never a maximum).
        largest = math.nan if value % 7 < 1 else value / 2
        direct_sensors[which].record_summary(value, largest, count, now)
        deferred.pending.append((deferred_sensors[which], value, largest, count, now))
        if fold:
            deferred.fold()
    for later in (0.0, 4.0, 12.0, 30.0):
        _same(direct.measure(now + later), deferred.measure(now + later))
    assert deferred.pending == []


def test_measure_folds_what_is_pending() -> None:
    reg, (_parent, child, _) = _registry()
    reg.pending.append((child, 5.0, 5.0, 1, 1.0))
    reg.pending.append((child, 7.0, 7.0, 1, 2.0))
    values = {name.name + "/" + name.group: v for name, v in reg.measure(3.0).items()}
    assert reg.pending == []
    assert values["sum/child-0"] == 12.0 and values["sum/all"] == 12.0
    assert values["max/child-0"] == 7.0 and values["count/all"] == 2


class CountingSensor(Sensor):
    """A sensor that keeps the summaries it records."""

    __slots__ = ("calls",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls: list[tuple[float, float, int, float]] = []

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.calls.append((total, largest, count, now))
        super().record_summary(total, largest, count, now)


def test_events_within_the_current_samples_fold_into_one_summary() -> None:
    reg = Metrics(CFG)
    sensor = CountingSensor("s")
    avg = sensor.add(Avg(CFG))
    reg.pending.append((sensor, 1.0, 1.0, 1, 0.0))
    reg.fold()  # opens the sample at 0 s
    assert sensor.calls == [(1.0, 1.0, 1, 0.0)]
    sensor.calls.clear()
    reg.pending += [
        (sensor, 2.0, 2.0, 1, 1.0),
        (sensor, 3.0, 3.0, 2, 2.0),
        (sensor, 4.0, 4.0, 1, 3.0),
    ]
    reg.fold()
    assert sensor.calls == [(9.0, 4.0, 4, 3.0)]
    sensor.calls.clear()
    # The second past the sample's 10 s: each on its own, in its own window.
    reg.pending += [(sensor, 2.0, 2.0, 1, 9.0), (sensor, 3.0, 3.0, 1, 11.0)]
    reg.fold()
    assert sensor.calls == [(2.0, 2.0, 1, 9.0), (3.0, 3.0, 1, 11.0)]
    assert avg.measure(11.0) == pytest.approx((1 + 9 + 2 + 3) / 7)


def test_the_producer_folds_once_enough_events_are_pending() -> None:
    metrics = ProducerMetrics("p", CFG)
    traffic = metrics.node_traffic(1)
    for i in range(FOLD_AT):
        traffic.request_sent(100, 1.0 + i / 1000)
    assert len(metrics.registry.pending) < FOLD_AT  # memory stays bounded
    values = {(n.name, n.group): v for n, v in metrics.measure(2.0).items()}
    assert values[("request-total", "producer-metrics")] == FOLD_AT
    assert values[("outgoing-byte-total", "producer-node-metrics")] == 100 * FOLD_AT


def test_measuring_from_another_thread_loses_and_repeats_nothing() -> None:
    """An exporter's thread measures (and folds) while the loop's thread records."""
    metrics = ProducerMetrics("p", CFG)
    traffic = metrics.node_traffic(1)
    events = 50_000
    done = threading.Event()

    def measure() -> None:
        while not done.is_set():
            metrics.measure(1.0)

    reader = threading.Thread(target=measure)
    reader.start()
    try:
        for _ in range(events):
            traffic.response_received(3, 1.0)
    finally:
        done.set()
        reader.join(60)
    values = {(n.name, n.group): v for n, v in metrics.measure(1.0).items()}
    assert values[("response-total", "producer-metrics")] == events
    assert values[("incoming-byte-total", "producer-metrics")] == 3 * events


def test_sensors_added_while_another_thread_measures() -> None:
    """A new topic's or node's sensors are added on the loop's thread while an
    exporter's thread measures."""
    metrics = ProducerMetrics("p", CFG)
    done = threading.Event()
    errors: list[BaseException] = []

    def measure() -> None:
        while not done.is_set():
            try:
                metrics.measure(1.0)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    reader = threading.Thread(target=measure)
    reader.start()
    try:
        for node in range(300):
            metrics.node_traffic(node).request_sent(10, 1.0)
            metrics.retried(f"topic-{node}", 1, 1.0)
    finally:
        done.set()
        reader.join(60)
    assert errors == []
    values = {(n.name, n.group): v for n, v in metrics.measure(1.0).items()}
    assert values[("request-total", "producer-metrics")] == 300
