"""A small metrics registry with the Java client's windowed statistics.

Pure: no clock of its own and no I/O. Every ``record`` and ``measure`` takes
``now`` (monotonic seconds), so the statistics are tested with a fake clock.

The windowed statistics follow ``org.apache.kafka.common.metrics.stats``:
a :class:`SampledStat` keeps ``samples`` samples of ``window`` seconds each
(Java's ``metrics.num.samples=2`` and ``metrics.sample.window.ms=30000``). A
record goes into the current sample, or starts the next one (overwriting the
oldest) once the current sample is ``window`` old. Samples older than
``samples * window`` are reset before measuring. :class:`Rate` divides the
windowed sum by the time the retained samples cover, counted as at least
``samples - 1`` full windows, so a rate does not spike when the first sample
is young.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ..types import MetricName

__all__ = [
    "FOLD_AT",
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Gauge",
    "Max",
    "MetricConfig",
    "MetricName",
    "Metrics",
    "MetricsSource",
    "Rate",
    "SampledStat",
    "Sensor",
    "WindowedCount",
    "WindowedSum",
]


class MetricsSource(Protocol):
    """What an exporter reads: an object whose ``metrics()`` gives every metric's value now.

    A :class:`~aioproducer.Producer` is one; the exporters hold it weakly.
    """

    def metrics(self) -> Mapping[MetricName, float]: ...


@dataclass(frozen=True)
class MetricConfig:
    """Window configuration: ``samples`` samples of ``window`` seconds."""

    samples: int = 2
    window: float = 30.0

    def __post_init__(self) -> None:
        if self.samples < 1 or self.window <= 0:
            raise ValueError(f"need samples >= 1 and window > 0, got {self}")


class Stat:
    """Something a sensor feeds: ``record`` a value at ``now``, ``measure`` at ``now``."""

    def record(self, value: float, now: float, count: int = 1) -> None:
        raise NotImplementedError

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        """Record ``count`` events at one ``now`` at once: their values add up to
        ``total`` and the largest is ``largest``. The windows end up as if each
        event had been recorded (they all fall in the same sample), up to the
        rounding of float sums."""
        self.record(total, now, count)

    def measure(self, now: float) -> float:
        raise NotImplementedError


class CumulativeSum(Stat):
    """The sum of every value ever recorded (Java ``CumulativeSum``)."""

    def __init__(self) -> None:
        self.total = 0.0

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.total += value

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.total += total

    def measure(self, now: float) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    """How many events were recorded (Java ``CumulativeCount``)."""

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.total += count

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.total += count


class _Sample:
    __slots__ = ("count", "start", "value")

    def __init__(self, start: float, initial: float) -> None:
        self.start = start
        self.count = 0
        self.value = initial


class SampledStat(Stat):
    """A statistic over the last ``config.samples`` windows (Java ``SampledStat``)."""

    initial = 0.0

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self._window = config.window
        self._samples: list[_Sample] = []
        self._current = 0
        self._head: _Sample | None = None  # samples[_current], None before the first record

    def record(self, value: float, now: float, count: int = 1) -> None:
        sample = self._head
        if sample is None or now - sample.start >= self._window:
            sample = self._advance(now)
        self.update(sample, value)
        sample.count += count

    def _advance(self, now: float) -> _Sample:
        """The sample a record at ``now`` goes into when the current one is
        ``window`` old (or there is none yet): the next one, reset."""
        samples = self._samples
        if not samples:
            sample = _Sample(now, self.initial)
            samples.append(sample)
        else:
            self._current = (self._current + 1) % self.config.samples
            if self._current >= len(samples):
                sample = _Sample(now, self.initial)
                samples.append(sample)
            else:
                sample = samples[self._current]
                self._reset(sample, now)
        self._head = sample
        return sample

    def update(self, sample: _Sample, value: float) -> None:
        raise NotImplementedError

    def _reset(self, sample: _Sample, now: float) -> None:
        sample.start = now
        sample.count = 0
        sample.value = self.initial

    def purge_obsolete(self, now: float) -> None:
        """Reset samples older than the whole retained span."""
        expire = self.config.samples * self.config.window
        for sample in self._samples:
            if now - sample.start >= expire:
                self._reset(sample, now)

    def oldest_start(self, now: float) -> float:
        return min((s.start for s in self._samples), default=now)

    def measure(self, now: float) -> float:
        self.purge_obsolete(now)
        return self.combine(self._samples)

    def combine(self, samples: list[_Sample]) -> float:
        raise NotImplementedError


class WindowedSum(SampledStat):
    """Sum of the values recorded in the retained windows."""

    # record and record_summary spell out SampledStat.record with update()
    # inlined: the producer records a few dozen of these per request.
    def record(self, value: float, now: float, count: int = 1) -> None:
        sample = self._head
        if sample is None or now - sample.start >= self._window:
            sample = self._advance(now)
        sample.value += value
        sample.count += count

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        sample = self._head
        if sample is None or now - sample.start >= self._window:
            sample = self._advance(now)
        sample.value += total
        sample.count += count

    def update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def combine(self, samples: list[_Sample]) -> float:
        return sum(s.value for s in samples)


class WindowedCount(WindowedSum):
    """Number of events recorded in the retained windows."""

    def record(self, value: float, now: float, count: int = 1) -> None:
        sample = self._head
        if sample is None or now - sample.start >= self._window:
            sample = self._advance(now)
        sample.count += count

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.record(total, now, count)

    def update(self, sample: _Sample, value: float) -> None:
        pass

    def combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.count for s in samples))


class Avg(WindowedSum):
    """Sum of values over number of events in the retained windows; NaN without events.

    ``record(value, now, count=n)`` records ``n`` events whose values add up
    to ``value`` (a batch of records at once).
    """

    def combine(self, samples: list[_Sample]) -> float:
        count = sum(s.count for s in samples)
        return sum(s.value for s in samples) / count if count else math.nan


class Max(SampledStat):
    """Largest value in the retained windows; NaN without events."""

    initial = -math.inf

    def record(self, value: float, now: float, count: int = 1) -> None:
        sample = self._head
        if sample is None or now - sample.start >= self._window:
            sample = self._advance(now)
        if value > sample.value:
            sample.value = value
        sample.count += count

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.record(largest, now, count)

    def update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def combine(self, samples: list[_Sample]) -> float:
        if not any(s.count for s in samples):
            return math.nan
        return float(max(s.value for s in samples))


class Rate(Stat):
    """Per-second rate of a windowed stat (Java ``Rate``): sum over the elapsed window."""

    def __init__(self, config: MetricConfig, stat: SampledStat | None = None) -> None:
        self.config = config
        self.stat = stat if stat is not None else WindowedSum(config)

    def record(self, value: float, now: float, count: int = 1) -> None:
        self.stat.record(value, now, count)

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        self.stat.record_summary(total, largest, count, now)

    def measure(self, now: float) -> float:
        value = self.stat.measure(now)
        return value / self.window_size(now)

    def window_size(self, now: float) -> float:
        """Seconds the rate is taken over (Java ``Rate.windowSize``)."""
        self.stat.purge_obsolete(now)
        elapsed = now - self.stat.oldest_start(now)
        window = self.config.window
        full = int(elapsed // window)
        minimum = self.config.samples - 1
        if full < minimum:
            elapsed += (minimum - full) * window
        # With one sample and no time elapsed Java would divide by zero.
        return elapsed if elapsed > 0 else window


class Gauge(Stat):
    """A value read when measured (Java ``Gauge``/``Value``); records nothing."""

    def __init__(self, read: Callable[[float], float]) -> None:
        self.read = read

    def record(self, value: float, now: float, count: int = 1) -> None:
        raise TypeError("a gauge is read, not recorded")

    def measure(self, now: float) -> float:
        return float(self.read(now))


class Sensor:
    """Records a value into each of its stats, then into its parents' stats.

    A per-node sensor with the producer-wide sensor as parent updates both in
    one call (Java ``Sensor`` parents).
    """

    __slots__ = ("_stats", "name", "parents")

    def __init__(self, name: str, parents: Iterable[Sensor] = ()) -> None:
        self.name = name
        self.parents = tuple(parents)
        # What records go to: a Rate's windowed stat instead of the Rate,
        # whose record methods only pass the call on.
        self._stats: list[Stat] = []

    def __repr__(self) -> str:
        return f"<Sensor {self.name} stats={len(self._stats)}>"

    def add(self, stat: Stat) -> Stat:
        self._stats.append(stat.stat if type(stat) is Rate else stat)
        return stat

    # No compiled twin: the producer records a few dozen stats per Produce
    # request, not per record, and a compiled version saved under 0.3% of the
    # producer's CPU per record. Every stat and parent is called through its own
    # method, so an override (in a subclass or on an instance) is honoured.
    def record(self, value: float, now: float, count: int = 1) -> None:
        """Record ``value`` at ``now`` (``count`` events) into each stat, then the parents."""
        for stat in self._stats:
            stat.record(value, now, count)
        for parent in self.parents:
            parent.record(value, now, count)

    def record_summary(self, total: float, largest: float, count: int, now: float) -> None:
        """``count`` events at ``now`` in one call (see :meth:`Stat.record_summary`):
        the producer records a whole request's batches this way."""
        if count:
            for stat in self._stats:
                stat.record_summary(total, largest, count, now)
            for parent in self.parents:
                parent.record_summary(total, largest, count, now)

    def within_samples(self, first: float, last: float) -> bool:
        """Whether events from ``first`` to ``last`` all go into the current samples
        of this sensor's stats and its parents'."""
        for stat in self._stats:
            if isinstance(stat, SampledStat):
                head = stat._head
                if head is None or first < head.start or last - head.start >= stat._window:
                    return False
        return all(parent.within_samples(first, last) for parent in self.parents)


# Pending events after which the recording code folds them (see Metrics.pending).
FOLD_AT = 256


class Metrics:
    """Named sensors and the metrics their stats expose."""

    def __init__(self, config: MetricConfig | None = None) -> None:
        self.config = config or MetricConfig()
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[MetricName, Stat] = {}
        #: Events recorded but not yet in their sensors' stats, as
        #: ``(sensor, total, largest, count, now)`` in time order. A producer
        #: records some fifteen per Produce request; appending a tuple costs a
        #: fraction of a sensor's record through its stats and parents, and
        #: :meth:`fold` records a sensor's pending events in one call. The
        #: recording code folds once FOLD_AT are pending; :meth:`measure`
        #: folds first, so what is measured is what was recorded.
        self.pending: list[tuple[Sensor, float, float, int, float]] = []
        # measure() may run on an exporter's thread while the event loop
        # records: the stats change, and sensors and metrics are added, only
        # under this lock (re-entrant: a gauge may measure).
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<Metrics sensors={len(self._sensors)} metrics={len(self._metrics)}>"

    def sensor(self, name: str, parents: Iterable[Sensor] = ()) -> tuple[Sensor, bool]:
        """The sensor called ``name``; the flag says whether it was just created."""
        with self._lock:
            sensor = self._sensors.get(name)
            if sensor is not None:
                return sensor, False
            sensor = self._sensors[name] = Sensor(name, parents)
            return sensor, True

    def add(self, name: MetricName, stat: Stat) -> Stat:
        """Expose ``stat`` under ``name`` (ValueError if the name is taken)."""
        with self._lock:
            if name in self._metrics:
                raise ValueError(f"metric {name} is already registered")
            self._metrics[name] = stat
        return stat

    def add_gauge(self, name: MetricName, read: Callable[[float], float]) -> None:
        self.add(name, Gauge(read))

    def names(self) -> list[MetricName]:
        with self._lock:
            return list(self._metrics)

    def fold(self) -> None:
        """Record the pending events into their sensors (see :attr:`pending`)."""
        with self._lock:
            self._fold()

    def _fold(self) -> None:
        pending = self.pending
        # Another thread may append meanwhile: take what is there, by count.
        taken = len(pending)
        if not taken:
            return
        rows = pending[:taken]
        del pending[:taken]
        nows = [row[4] for row in rows]
        first, last = min(nows), max(nows)
        # (total, largest, count) of each sensor's events.
        sums: dict[Sensor, list[float]] = {}
        for sensor, total, largest, count, _now in rows:
            if not count:
                continue  # as record_summary: no event, nothing recorded
            summed = sums.get(sensor)
            if summed is None:
                summed = sums[sensor] = [0.0, -math.inf, 0]
            summed[0] += total
            if largest > summed[1]:  # a NaN never wins, as in Max.record
                summed[1] = largest
            summed[2] += count
        if all(sensor.within_samples(first, last) for sensor in sums):
            # Every event goes into the current samples, whatever the order: a
            # sensor's events are one summary (sums and maxima commute).
            for sensor, (summed_total, summed_largest, summed_count) in sums.items():
                sensor.record_summary(summed_total, summed_largest, int(summed_count), last)
            return
        # A sample ends among them (or none is open yet): each event in its
        # order, so that each window gets what it would have.
        for sensor, total, largest, count, now in rows:
            sensor.record_summary(total, largest, count, now)

    def measure(self, now: float) -> dict[MetricName, float]:
        """Every metric's value at ``now`` (the pending events folded first)."""
        with self._lock:
            self._fold()
            return {name: stat.measure(now) for name, stat in self._metrics.items()}
