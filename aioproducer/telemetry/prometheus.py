"""Prometheus exposition of ``producer.metrics()`` (extra ``prometheus``).

::

    from prometheus_client import generate_latest
    from aioproducer.telemetry.prometheus import register

    register(producer)            # into prometheus_client.REGISTRY
    text = generate_latest()      # kafka_producer_record_send_total{client_id="producer-1"} 1000.0

Each Java metric becomes one family named after it, ``-`` turned into ``_``:
``kafka_producer_<name>`` for producer-wide metrics, ``kafka_producer_topic_<name>``
(label ``topic``) and ``kafka_producer_node_<name>`` (label ``node_id``), every
sample labelled ``client_id``. ``*-total`` metrics are counters, the rest gauges;
an average or maximum with no event yet is NaN, as in Java. One collector per
registry serves every producer registered there (producers are held weakly:
a producer that is garbage collected drops out).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator

from ..errors import missing_extra

try:
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "prometheus-client", "prometheus") from None

from .metrics import MetricsSource
from .producer_metrics import NODE_GROUP, PRODUCER_GROUP, TOPIC_GROUP

__all__ = ["ProducerCollector", "register"]

NAMESPACE = "kafka_producer"
_PREFIXES = {
    PRODUCER_GROUP: NAMESPACE,
    TOPIC_GROUP: f"{NAMESPACE}_topic",
    NODE_GROUP: f"{NAMESPACE}_node",
}
_COLLECTORS: weakref.WeakKeyDictionary[CollectorRegistry, ProducerCollector] = (
    weakref.WeakKeyDictionary()
)


def family_name(name: str, group: str) -> str:
    """``record-send-rate`` in ``producer-topic-metrics`` -> ``kafka_producer_topic_record_send_rate``."""
    prefix = _PREFIXES.get(group, f"{NAMESPACE}_{group.replace('-', '_')}")
    return f"{prefix}_{name.replace('-', '_')}"


class ProducerCollector(Collector):
    """A prometheus_client collector over the metrics of some producers."""

    def __init__(self, producers: Iterable[MetricsSource] = ()) -> None:
        self._producers: weakref.WeakSet[MetricsSource] = weakref.WeakSet(producers)

    def __repr__(self) -> str:
        return f"<ProducerCollector producers={len(self._producers)}>"

    def track(self, producer: MetricsSource) -> None:
        """Serve ``producer``'s metrics too (held weakly: a collected producer drops out)."""
        self._producers.add(producer)

    def untrack(self, producer: MetricsSource) -> None:
        """Stop serving ``producer``'s metrics (nothing happens if it was not tracked)."""
        self._producers.discard(producer)

    def describe(self) -> list[Metric]:
        """No families up front: they follow the topics and brokers the producers meet."""
        # Families depend on the topics and brokers seen so far: nothing to
        # declare up front (and no metrics read at registration time).
        return []

    def collect(self) -> Iterator[Metric]:
        """One family per metric name, one sample per producer (label ``client_id``)."""
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for producer in list(self._producers):
            for metric, value in producer.metrics().items():
                fam_name = family_name(metric.name, metric.group)
                family = families.get(fam_name)
                labels = [k.replace("-", "_") for k, _v in metric.tags]
                if family is None:
                    kind: type[CounterMetricFamily | GaugeMetricFamily] = (
                        CounterMetricFamily if metric.name.endswith("-total") else GaugeMetricFamily
                    )
                    family = families[fam_name] = kind(
                        fam_name, metric.description or metric.name, labels=labels
                    )
                family.add_metric([v for _k, v in metric.tags], value)
        yield from families.values()


def register(
    producer: MetricsSource, registry: CollectorRegistry | None = None
) -> ProducerCollector:
    """Expose ``producer``'s metrics in ``registry`` (default: the global REGISTRY).

    Returns the registry's collector; call its ``untrack(producer)`` to stop.
    """
    registry = REGISTRY if registry is None else registry
    collector = _COLLECTORS.get(registry)
    if collector is None:
        collector = _COLLECTORS[registry] = ProducerCollector()
        registry.register(collector)
    collector.track(producer)
    return collector
