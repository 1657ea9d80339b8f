"""OpenTelemetry for the producer (extra ``opentelemetry``): metrics and trace context.

Metrics: :func:`instrument` registers one observable instrument per Java metric
on a Meter, read from ``producer.metrics()`` when the SDK collects::

    from aioproducer.integrations.opentelemetry import instrument
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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import missing_extra

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "opentelemetry-api", "opentelemetry") from None

from ..interceptors import ProducerRecord
from ..metrics import MetricName
from ..producer_metrics import NODE_GROUP, TOPIC_GROUP, ProducerMetrics

if TYPE_CHECKING:
    from ..producer import Producer

__all__ = ["ProducerInstruments", "TraceContextInterceptor", "extract_context", "instrument"]

_PREFIXES = {TOPIC_GROUP: "kafka.producer.topic.", NODE_GROUP: "kafka.producer.node."}
# Instruments of one producer are read in one collection: measure once for all.
_SNAPSHOT_TTL = 0.5


def instrument_name(metric: MetricName) -> str:
    return _PREFIXES.get(metric.group, "kafka.producer.") + metric.name


class ProducerInstruments:
    """The observable instruments reading one producer's metrics."""

    def __init__(self, producer: Producer, meter: Meter) -> None:
        self._producer = producer
        self._snapshot: dict[tuple[str, str], list[tuple[dict[str, str], float]]] = {}
        self._taken = -math.inf
        seen: dict[tuple[str, str], MetricName] = {}
        for metric in list(producer.metrics()) + ProducerMetrics.catalog():
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
        return f"<ProducerInstruments instruments={len(self.instruments)}>"

    def _callback(self, key: tuple[str, str]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(v, attrs) for attrs, v in self._values().get(key, ())]

        return observe

    def _values(self) -> dict[tuple[str, str], list[tuple[dict[str, str], float]]]:
        now = time.monotonic()
        if now - self._taken > _SNAPSHOT_TTL:
            snapshot: dict[tuple[str, str], list[tuple[dict[str, str], float]]] = {}
            for metric, value in self._producer.metrics().items():
                if math.isnan(value):
                    continue
                attrs = {k.replace("-", "_"): v for k, v in metric.tags}
                snapshot.setdefault((metric.group, metric.name), []).append((attrs, value))
            self._snapshot, self._taken = snapshot, now
        return self._snapshot


def instrument(
    producer: Producer, meter_provider: MeterProvider | None = None
) -> ProducerInstruments:
    """Observe ``producer``'s metrics through a Meter of ``meter_provider`` (default: global)."""
    provider = meter_provider or otel_metrics.get_meter_provider()
    return ProducerInstruments(producer, provider.get_meter("aioproducer"))


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
