"""The metrics registry: Java's SampledStat windows, driven by a fake clock."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.telemetry.logs import RateLimiter
from aioproducer.telemetry.metrics import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Rate,
    SampledStat,
    Sensor,
    WindowedCount,
    WindowedSum,
)
from aioproducer.telemetry.producer_metrics import ProducerMetrics

CFG = MetricConfig(samples=2, window=30.0)


def test_rate_of_a_young_window_counts_samples_minus_one_full_windows() -> None:
    rate = Rate(CFG)
    rate.record(60, now=100.0)
    # 10 s elapsed, fewer than samples-1 = 1 full window: divided by 10 + 30 s.
    assert rate.measure(110.0) == pytest.approx(60 / 40)
    rate.record(60, now=125.0)
    assert rate.measure(129.0) == pytest.approx(120 / (29 + 30))
    # At 30 s one full window has passed: no more padding (as in Java).
    assert rate.measure(130.0) == pytest.approx(120 / 30)


def test_rate_over_full_windows_uses_the_elapsed_time() -> None:
    rate = Rate(CFG)
    rate.record(30, now=0.0)
    rate.record(30, now=31.0)  # second sample, window started at 31
    # elapsed = 45 s >= one full window: no padding.
    assert rate.measure(45.0) == pytest.approx(60 / 45)


def test_a_third_window_overwrites_the_oldest_sample() -> None:
    rate = Rate(CFG)
    rate.record(100, now=0.0)
    rate.record(10, now=31.0)
    rate.record(10, now=62.0)  # reuses sample 0: the 100 is gone
    assert rate.measure(70.0) == pytest.approx(20 / (70 - 31))


def test_samples_older_than_the_retained_span_are_purged() -> None:
    rate, avg, mx = Rate(CFG), Avg(CFG), Max(CFG)
    for stat in (rate, avg, mx):
        stat.record(5, now=0.0)
    assert rate.measure(59.0) > 0 and avg.measure(59.0) == 5 and mx.measure(59.0) == 5
    assert rate.measure(61.0) == 0.0
    assert math.isnan(avg.measure(61.0)) and math.isnan(mx.measure(61.0))


def test_avg_and_max_are_nan_before_any_event_and_avg_weights_batches() -> None:
    avg, mx = Avg(CFG), Max(CFG)
    assert math.isnan(avg.measure(0.0)) and math.isnan(mx.measure(0.0))
    avg.record(300, now=1.0, count=3)  # three records of 100 bytes in one call
    avg.record(50, now=2.0)
    mx.record(-4, now=1.0)
    assert avg.measure(3.0) == pytest.approx(350 / 4)
    assert mx.measure(3.0) == -4.0


def test_rate_without_events_is_zero_and_counts_can_be_windowed() -> None:
    assert Rate(CFG).measure(10.0) == 0.0
    counted = Rate(CFG, WindowedCount(CFG))
    counted.record(1000, now=0.0)
    counted.record(5000, now=1.0)
    assert counted.measure(1.0) == pytest.approx(2 / 31)


def test_cumulative_stats_never_forget() -> None:
    total, count = CumulativeSum(), CumulativeCount()
    for t in (0.0, 100.0, 1000.0):
        total.record(2.5, t)
        count.record(2.5, t)
    assert total.measure(10_000.0) == 7.5 and count.measure(10_000.0) == 3


def test_sensor_records_into_its_stats_and_its_parents() -> None:
    metrics = Metrics(CFG)
    parent, _ = metrics.sensor("all")
    child, created = metrics.sensor("node-1", parents=[parent])
    assert created and metrics.sensor("node-1") == (child, False)
    name_all = MetricName("x-total", "g", (("client-id", "c"),))
    name_node = MetricName("x-total", "g", (("client-id", "c"), ("node-id", "node-1")))
    metrics.add(name_all, parent.add(CumulativeSum()))
    metrics.add(name_node, child.add(CumulativeSum()))
    child.record(4, now=0.0)
    parent.record(1, now=0.0)
    assert metrics.measure(0.0) == {name_all: 5.0, name_node: 4.0}
    assert name_node.tag("node-id") == "node-1" and name_node.tag("topic") is None
    with pytest.raises(ValueError, match="already registered"):
        metrics.add(
            MetricName("x-total", "g", (("client-id", "c"),), "other description"), CumulativeSum()
        )


def test_gauges_are_read_when_measured() -> None:
    metrics = Metrics(CFG)
    box = [1.0]
    name = MetricName("level", "g")
    metrics.add_gauge(name, lambda now: box[0] * now)
    box[0] = 3.0
    assert metrics.measure(2.0) == {name: 6.0}


def test_producer_metrics_catalog_has_the_java_names() -> None:
    names = {(m.group, m.name) for m in ProducerMetrics.catalog()}
    for name in (
        "record-send-rate",
        "record-send-total",
        "record-error-rate",
        "record-error-total",
        "record-retry-rate",
        "record-retry-total",
        "record-size-avg",
        "record-size-max",
        "batch-size-avg",
        "batch-size-max",
        "compression-rate-avg",
        "records-per-request-avg",
        "request-latency-avg",
        "request-latency-max",
        "request-rate",
        "produce-throttle-time-avg",
        "produce-throttle-time-max",
        "connection-creation-rate",
        "incoming-byte-rate",
        "outgoing-byte-rate",
    ):
        assert ("producer-metrics", name) in names, name
    for name in ("record-send-rate", "byte-rate", "compression-rate", "record-error-total"):
        assert ("producer-topic-metrics", name) in names
    for name in (
        "request-rate",
        "request-latency-avg",
        "incoming-byte-rate",
        "outgoing-byte-total",
    ):
        assert ("producer-node-metrics", name) in names


def test_rate_limiter_lets_one_through_per_interval_and_counts_the_rest() -> None:
    limiter = RateLimiter(10.0)
    assert limiter.allow("k", 0.0) == 0
    assert limiter.allow("k", 1.0) is None
    assert limiter.allow("k", 2.0) is None
    assert limiter.allow("other", 2.0) == 0
    assert limiter.allow("k", 10.5) == 2


@pytest.mark.parametrize(
    "make",
    [
        Avg,
        Max,
        WindowedSum,
        WindowedCount,
        lambda c: Rate(c),
        lambda c: CumulativeSum(),
        lambda c: CumulativeCount(),
    ],
    ids=["avg", "max", "sum", "count", "rate", "cumulative-sum", "cumulative-count"],
)
def test_a_summary_leaves_what_one_record_per_event_leaves(make: Any) -> None:
    """A Produce request's batches are recorded as one summary per sensor."""
    config = MetricConfig(samples=2, window=10.0)
    one_by_one, summarized = make(config), make(config)
    rounds = [
        (1.0, [3.0, 9.0, 4.0]),
        (12.5, [7.0]),
        (13.0, [2.0, 2.5]),
    ]  # the second rolls a window
    for now, values in rounds:
        for v in values:
            one_by_one.record(v, now)
        summarized.record_summary(sum(values), max(values), len(values), now)
    for now in (13.0, 25.0, 40.0):
        a, b = one_by_one.measure(now), summarized.measure(now)
        assert a == b or (math.isnan(a) and math.isnan(b)), now


def test_a_sensor_summary_reaches_its_parents() -> None:
    config = MetricConfig()
    parent, _ = Metrics(config).sensor("all")
    total = parent.add(WindowedSum(config))
    largest = parent.add(Max(config))
    child = Sensor("node", parents=(parent,))
    child.record_summary(30.0, 20.0, 2, 1.0)
    child.record_summary(0.0, 0.0, 0, 1.0)  # nothing sent: nothing recorded
    assert (total.measure(1.0), largest.measure(1.0)) == (30.0, 20.0)


def test_a_requests_summary_leaves_what_its_batches_one_by_one_leave() -> None:
    """batches_sent sums a request's batches before recording: the metrics
    equal those of the same batches sent as requests of one batch each, but
    for the per-request ones (records per request, requests)."""
    from types import SimpleNamespace

    def batch(topic: str, count: int, size: int, raw: int, created: float, largest: int) -> object:
        return SimpleNamespace(
            topic=topic,
            record_count=count,
            payload=b"x" * size,
            created=created,
            builder=SimpleNamespace(size_in_bytes=raw),
            max_record_size=largest,
        )

    batches = [
        batch("a", 3, 120, 200, 0.5, 0),
        batch("b", 7, 900, 1000, 0.25, 140),
        batch("a", 1, 70, 70, 0.75, 61),
        batch("c", 2, 30, 90, 0.9, 0),
    ]
    together = ProducerMetrics("p", CFG)
    one_by_one = ProducerMetrics("p", CFG)
    together.batches_sent(batches, 1.0)
    for b in batches:
        one_by_one.batches_sent([b], 1.0)
    per_request = {"records-per-request-avg"}
    a, b = together.measure(2.0), one_by_one.measure(2.0)
    assert a.keys() == b.keys()
    compared = [name for name in a if name.name not in per_request]
    assert len(compared) > 10
    for name in compared:
        assert a[name] == pytest.approx(b[name], nan_ok=True), name


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([Avg, Max, WindowedSum, WindowedCount]),
    events=st.lists(
        st.tuples(
            st.floats(-1e6, 1e6, allow_nan=False),  # value
            st.floats(0.0, 25.0, allow_nan=False),  # seconds since the previous event
            st.integers(0, 5),  # count
            st.booleans(),  # a summary instead of a record
        ),
        max_size=40,
    ),
)
def test_inlined_records_equal_the_generic_sampled_stat(kind: Any, events: list[Any]) -> None:
    """The windowed stats record with update() inlined; SampledStat.record,
    which calls update(), is the reference they must match sample for sample."""
    config = MetricConfig(samples=3, window=10.0)
    fast, reference = kind(config), kind(config)
    now = 100.0
    for value, step, count, summary in events:
        now += step
        if summary:
            fast.record_summary(value, value / 2, count, now)
            largest = value / 2 if kind is Max else value
            SampledStat.record(reference, largest, now, count)
        else:
            fast.record(value, now, count)
            SampledStat.record(reference, value, now, count)
        assert [(s.start, s.count, s.value) for s in fast._samples] == [
            (s.start, s.count, s.value) for s in reference._samples
        ]
    for later in (0.0, 5.0, 15.0, 40.0):
        a, b = fast.measure(now + later), reference.measure(now + later)
        assert a == b or (math.isnan(a) and math.isnan(b))


def test_a_sensor_records_a_rate_into_its_windowed_stat() -> None:
    sensor = Sensor("s")
    rate = sensor.add(Rate(CFG, WindowedCount(CFG)))
    total = sensor.add(CumulativeCount())
    sensor.record(5.0, 1.0)
    sensor.record_summary(9.0, 5.0, 3, 2.0)
    assert total.measure(2.0) == 4
    assert rate.measure(2.0) == pytest.approx(4 / 31)  # 1 s elapsed, plus one full window
