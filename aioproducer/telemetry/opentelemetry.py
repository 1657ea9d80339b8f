"""OpenTelemetry for the producer (extra ``opentelemetry``): metrics and trace context.

Metrics: :func:`instrument` registers one observable instrument per Java metric
on a Meter, read from ``producer.metrics()`` when the SDK collects::

    from aioproducer.telemetry.opentelemetry import instrument
    instrument(producer)                      # the global MeterProvider

Instruments are named ``kafka.producer.<name>``, ``kafka.producer.topic.<name>``
and ``kafka.producer.node.<name>`` after the Java names (``record-send-rate``);
attributes ``client_id``, ``topic``, ``node_id``. ``*-total`` metrics are
observable counters, the rest observable gauges; averages and maxima with no
event yet are not reported.

Tracing: :class:`TraceContextInterceptor` is a producer interceptor that writes
the current span's W3C trace context (``traceparent``, and ``tracestate`` when
set) into each record's headers, so a consumer continues the trace;
:func:`extract_context` reads it back::

    producer = Producer(..., interceptors=[TraceContextInterceptor()])
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import missing_extra

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "opentelemetry-api", "opentelemetry") from None

from ..types import MetricName, ProducerRecord
from .metrics import MetricsSource
from .producer_metrics import NODE_GROUP, TOPIC_GROUP, ProducerMetrics

__all__ = ["ProducerInstruments", "TraceContextInterceptor", "extract_context", "instrument"]

_PREFIXES = {TOPIC_GROUP: "kafka.producer.topic.", NODE_GROUP: "kafka.producer.node."}
# Instruments of one producer are read in one collection: measure once for all.
_SNAPSHOT_TTL = 0.5
_Snapshot = dict[tuple[str, str], list[tuple[dict[str, str], float]]]


def instrument_name(metric: MetricName) -> str:
    return _PREFIXES.get(metric.group, "kafka.producer.") + metric.name


class ProducerInstruments:
    """The observable instruments of one Meter, reading the metrics of the producers tracked.

    Instruments are created once per meter (the SDK keeps the first of two
    instruments of one name), so every producer of a MeterProvider shares them.
    """

    def __init__(self, meter: Meter) -> None:
        self._producers: weakref.WeakSet[MetricsSource] = weakref.WeakSet()
        self._snapshots: weakref.WeakKeyDictionary[MetricsSource, tuple[float, _Snapshot]] = (
            weakref.WeakKeyDictionary()
        )
        seen: dict[tuple[str, str], MetricName] = {}
        for metric in ProducerMetrics.catalog():
            seen.setdefault((metric.group, metric.name), metric)
        self.instruments: list[Any] = []
        for key, metric in seen.items():
            make = (
                meter.create_observable_counter
                if metric.name.endswith("-total")
                else meter.create_observable_gauge
            )
            self.instruments.append(
                make(
                    instrument_name(metric),
                    callbacks=[self._callback(key)],
                    description=metric.description or metric.name,
                )
            )

    def __repr__(self) -> str:
        return f"<ProducerInstruments instruments={len(self.instruments)} producers={len(self._producers)}>"

    def track(self, producer: MetricsSource) -> None:
        """Report ``producer``'s metrics through these instruments too (held weakly)."""
        self._producers.add(producer)

    def untrack(self, producer: MetricsSource) -> None:
        """Stop reporting ``producer``'s metrics (nothing happens if it was not tracked)."""
        self._producers.discard(producer)

    def _callback(self, key: tuple[str, str]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(v, attrs)
                for producer in list(self._producers)
                for attrs, v in self._values(producer).get(key, ())
            ]

        return observe

    def _values(self, producer: MetricsSource) -> _Snapshot:
        now = time.monotonic()
        taken = self._snapshots.get(producer)
        if taken is not None and now - taken[0] <= _SNAPSHOT_TTL:
            return taken[1]
        snapshot: _Snapshot = {}
        for metric, value in producer.metrics().items():
            if math.isnan(value):
                continue
            attrs = {k.replace("-", "_"): v for k, v in metric.tags}
            snapshot.setdefault((metric.group, metric.name), []).append((attrs, value))
        self._snapshots[producer] = (now, snapshot)
        return snapshot


_INSTRUMENTS: weakref.WeakKeyDictionary[Any, ProducerInstruments] = weakref.WeakKeyDictionary()


def instrument(
    producer: MetricsSource, meter_provider: MeterProvider | None = None
) -> ProducerInstruments:
    """Observe ``producer``'s metrics through the ``aioproducer`` Meter of ``meter_provider``.

    The default is the global MeterProvider. Returns the instruments, shared
    by every producer instrumented with that provider; ``untrack(producer)`` stops.
    """
    provider = meter_provider or otel_metrics.get_meter_provider()
    instruments = _INSTRUMENTS.get(provider)
    if instruments is None:
        instruments = _INSTRUMENTS[provider] = ProducerInstruments(
            provider.get_meter("aioproducer")
        )
    instruments.track(producer)
    return instruments


class TraceContextInterceptor:
    """Writes the current W3C trace context into each record's headers (``on_send``).

    Headers of the same names already on the record are replaced. Without an
    active, valid span nothing is added.
    """

    def __init__(self, propagator: TextMapPropagator | None = None) -> None:
        self._propagator = propagator or TraceContextTextMapPropagator()

    def __repr__(self) -> str:
        return f"<TraceContextInterceptor {type(self._propagator).__name__}>"

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """The record with the current context's ``traceparent`` (and ``tracestate``) headers.

        Headers of the same names already on the record are replaced; without
        an active span the record is returned unchanged.
        """
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        if not carrier:
            return record
        headers = [(k, v) for k, v in (record.headers or ()) if k not in carrier]
        headers.extend((k, v.encode()) for k, v in carrier.items())
        record.headers = headers
        return record


def extract_context(
    headers: Sequence[tuple[str, bytes | None]], propagator: TextMapPropagator | None = None
) -> Context:
    """The trace context carried by a consumed record's headers."""
    carrier = {k: v.decode() for k, v in headers if v is not None}
    return (propagator or TraceContextTextMapPropagator()).extract(carrier)
