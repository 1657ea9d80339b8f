"""The producer's metrics, under the Java producer's names, groups and tags.

Three groups, as in Java (``kafka.producer`` JMX beans):

* ``producer-metrics`` (tag ``client-id``): producer-wide;
* ``producer-topic-metrics`` (tags ``client-id``, ``topic``);
* ``producer-node-metrics`` (tags ``client-id``, ``node-id`` such as ``node-1``).

The engine reports at request and batch granularity, never per record:
:meth:`ProducerMetrics.batches_sent` once per Produce request,
:meth:`~ProducerMetrics.produce_response` once per answer, retries and errors
once per batch, and each connection feeds its :class:`NodeTraffic` once per
request and response. Gauges (buffer memory, requests in flight, metadata age,
connections) are read from their owners when measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol.records import RECORD_BATCH_OVERHEAD
from .metrics import (
    FOLD_AT,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Rate,
    Sensor,
    WindowedCount,
)

__all__ = ["NodeTraffic", "ProducerMetrics"]

PRODUCER_GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"
NODE_GROUP = "producer-node-metrics"

# Producer-wide values read when measured (the producer supplies the readers).
GAUGES = {
    "buffer-total-bytes": "buffer_memory, bytes",
    "buffer-available-bytes": "free buffer memory, bytes",
    "bufferpool-wait-time-total": "time spent waiting for buffer memory, ns",
    "waiting-threads": "tasks waiting for buffer memory",
    "requests-in-flight": "Produce requests awaiting an answer",
    "connection-count": "open broker connections",
    "metadata-age": "seconds since the last metadata refresh",
    "interceptor-error-total": "exceptions raised by interceptors",
}


class NodeTraffic:
    """Requests and bytes on one broker connection, fed by the connection itself."""

    __slots__ = (
        "_bytes_received",
        "_bytes_sent",
        "_pending",
        "_registry",
        "_requests",
        "_responses",
    )

    def __init__(
        self,
        registry: Metrics,
        requests: Sensor,
        bytes_sent: Sensor,
        responses: Sensor,
        bytes_received: Sensor,
    ) -> None:
        self._registry = registry
        self._pending = registry.pending
        self._requests = requests
        self._bytes_sent = bytes_sent
        self._responses = responses
        self._bytes_received = bytes_received

    def request_sent(self, size: int, now: float) -> None:
        pending = self._pending
        pending.append((self._requests, size, size, 1, now))
        pending.append((self._bytes_sent, size, size, 1, now))
        if len(pending) >= FOLD_AT:
            self._registry.fold()

    def response_received(self, size: int, now: float) -> None:
        pending = self._pending
        pending.append((self._responses, size, size, 1, now))
        pending.append((self._bytes_received, size, size, 1, now))
        if len(pending) >= FOLD_AT:
            self._registry.fold()


class ProducerMetrics:
    """Sensors of one producer; :meth:`measure` returns every metric's value."""

    def __init__(
        self, client_id: str, config: MetricConfig | None = None, *, enabled: bool = True
    ) -> None:
        self.client_id = client_id
        self.registry = Metrics(config)
        self._pending = self.registry.pending
        self._topics: dict[str, tuple[Sensor, Sensor, Sensor, Sensor, Sensor]] = {}
        self._nodes: dict[int, tuple[NodeTraffic, Sensor]] = {}
        if enabled:  # disabled: gauges only, and the engine is handed no metrics to feed
            self._add_sensors()

    def _add_sensors(self) -> None:
        s = self._producer_sensor
        self._records_per_request = s(
            "records-per-request",
            meter=("record-send", "records sent"),
            avg=("records-per-request-avg", "records per Produce request"),
        )
        self._retries = s("record-retries", meter=("record-retry", "records retried"))
        self._errors = s("record-errors", meter=("record-error", "records that failed"))
        self._record_size = s("record-size", avg=("record-size-avg", "bytes per record, encoded"))
        self._record_size_max = s(
            "record-size-max", max_=("record-size-max", "largest record, bytes")
        )
        self._batch_size = s(
            "batch-size",
            avg=("batch-size-avg", "bytes per batch sent"),
            max_=("batch-size-max", "largest batch sent, bytes"),
        )
        self._queue_time = s(
            "queue-time",
            avg=(
                "record-queue-time-avg",
                "ms a batch waited in the accumulator before it was sent",
            ),
            max_=("record-queue-time-max", "longest wait of a batch in the accumulator, ms"),
        )
        self._compression = s(
            "compression-rate", avg=("compression-rate-avg", "compressed/uncompressed batch size")
        )
        self._latency = s(
            "request-latency",
            avg=("request-latency-avg", "Produce round trip, ms"),
            max_=("request-latency-max", "slowest Produce round trip, ms"),
        )
        self._throttle = s(
            "produce-throttle-time",
            avg=("produce-throttle-time-avg", "broker throttle time, ms (KIP-219)"),
            max_=("produce-throttle-time-max", "largest broker throttle time, ms"),
        )
        self._requests = s(
            "requests-sent",
            meter=("request", "requests sent to any broker"),
            avg=("request-size-avg", "bytes per request"),
            max_=("request-size-max", "largest request, bytes"),
            count=True,
        )
        self._outgoing = s("bytes-sent", meter=("outgoing-byte", "bytes sent to brokers"))
        self._responses = s(
            "responses-received", meter=("response", "responses received"), count=True
        )
        self._incoming = s("bytes-received", meter=("incoming-byte", "bytes received from brokers"))
        self._connections = s(
            "connections-created", meter=("connection-creation", "connections opened"), count=True
        )
        self._closes = s(
            "connections-closed",
            meter=("connection-close", "connections lost or closed"),
            count=True,
        )

    @classmethod
    def catalog(cls) -> list[MetricName]:
        """Every metric a producer can report, one topic and one node standing
        for all (tag values are placeholders)."""
        sample = cls("client")
        sample._topic("topic")
        sample._node(0)
        for name in GAUGES:
            sample.add_gauge(name, lambda now: 0.0)
        return sample.registry.names()

    def __repr__(self) -> str:
        return f"<ProducerMetrics client_id={self.client_id!r} {self.registry!r}>"

    # -- registration -------------------------------------------------------

    def name(self, name: str, group: str, description: str = "", **tags: str) -> MetricName:
        all_tags = {
            "client-id": self.client_id,
            **{k.replace("_", "-"): v for k, v in tags.items()},
        }
        return MetricName(name, group, tuple(sorted(all_tags.items())), description)

    def _sensor(
        self,
        key: str,
        group: str,
        tags: dict[str, str],
        *,
        meter: tuple[str, str] | None = None,
        avg: tuple[str, str] | None = None,
        max_: tuple[str, str] | None = None,
        count: bool = False,
        parents: Iterable[Sensor] = (),
    ) -> Sensor:
        """A sensor with the stats named: ``meter`` gives ``<x>-rate`` and ``<x>-total``.

        With ``count`` the meter counts events instead of summing values
        (request-rate counts requests while request-size sums their bytes).
        """
        reg = self.registry
        sensor, _created = reg.sensor(key, parents)
        cfg = reg.config
        if meter is not None:
            prefix, what = meter
            windowed = WindowedCount(cfg) if count else None
            total = CumulativeCount() if count else CumulativeSum()
            reg.add(
                self.name(f"{prefix}-rate", group, f"{what}, per second", **tags),
                sensor.add(Rate(cfg, windowed)),
            )
            reg.add(
                self.name(f"{prefix}-total", group, f"{what}, total", **tags), sensor.add(total)
            )
        if avg is not None:
            reg.add(self.name(avg[0], group, avg[1], **tags), sensor.add(Avg(cfg)))
        if max_ is not None:
            reg.add(self.name(max_[0], group, max_[1], **tags), sensor.add(Max(cfg)))
        return sensor

    def _producer_sensor(self, key: str, **kw: Any) -> Sensor:
        return self._sensor(key, PRODUCER_GROUP, {}, **kw)

    def add_gauge(self, name: str, read: Callable[[float], float]) -> None:
        """The producer-wide gauge ``name`` (one of GAUGES), read as ``read(now)``."""
        self.registry.add_gauge(self.name(name, PRODUCER_GROUP, GAUGES[name]), read)

    def _topic(self, topic: str) -> tuple[Sensor, Sensor, Sensor, Sensor, Sensor]:
        sensors = self._topics.get(topic)
        if sensors is None:
            tags = {"topic": topic}
            t = self._sensor
            sensors = self._topics[topic] = (
                t(
                    f"topic.{topic}.records",
                    TOPIC_GROUP,
                    tags,
                    meter=("record-send", "records sent"),
                ),
                t(f"topic.{topic}.bytes", TOPIC_GROUP, tags, meter=("byte", "batch bytes sent")),
                t(
                    f"topic.{topic}.compression",
                    TOPIC_GROUP,
                    tags,
                    avg=("compression-rate", "compressed/uncompressed batch size"),
                ),
                t(
                    f"topic.{topic}.retries",
                    TOPIC_GROUP,
                    tags,
                    meter=("record-retry", "records retried"),
                ),
                t(
                    f"topic.{topic}.errors",
                    TOPIC_GROUP,
                    tags,
                    meter=("record-error", "records failed"),
                ),
            )
        return sensors

    def node_traffic(self, node_id: int) -> NodeTraffic:
        """The traffic recorder a connection to ``node_id`` feeds."""
        return self._node(node_id)[0]

    def _node(self, node_id: int) -> tuple[NodeTraffic, Sensor]:
        entry = self._nodes.get(node_id)
        if entry is None:
            tags = {"node-id": f"node-{node_id}"}
            t = self._sensor
            key = f"node-{node_id}"
            traffic = NodeTraffic(
                self.registry,
                t(
                    f"{key}.requests",
                    NODE_GROUP,
                    tags,
                    meter=("request", "requests sent"),
                    count=True,
                    avg=("request-size-avg", "bytes per request"),
                    max_=("request-size-max", "largest request, bytes"),
                    parents=(self._requests,),
                ),
                t(
                    f"{key}.bytes-sent",
                    NODE_GROUP,
                    tags,
                    meter=("outgoing-byte", "bytes sent"),
                    parents=(self._outgoing,),
                ),
                t(
                    f"{key}.responses",
                    NODE_GROUP,
                    tags,
                    meter=("response", "responses received"),
                    count=True,
                    parents=(self._responses,),
                ),
                t(
                    f"{key}.bytes-received",
                    NODE_GROUP,
                    tags,
                    meter=("incoming-byte", "bytes received"),
                    parents=(self._incoming,),
                ),
            )
            latency = t(
                f"{key}.latency",
                NODE_GROUP,
                tags,
                avg=("request-latency-avg", "Produce round trip, ms"),
                max_=("request-latency-max", "slowest Produce round trip, ms"),
                parents=(self._latency,),
            )
            entry = self._nodes[node_id] = (traffic, latency)
        return entry

    # -- recording (called by the engine) --------------------------------------

    def batches_sent(self, batches: Iterable[Any], now: float) -> None:
        """One Produce request is going out with ``batches`` (built payloads).

        The batches' values are summed first and each sensor records once per
        request (:meth:`Sensor.record_summary`): the windows hold what one
        record per batch would leave, at a few calls per request.
        """
        n = records = 0
        sizes = queue_ms = ratios = encoded_total = 0.0
        size_max = queue_max = ratio_max = record_max = -math.inf
        by_topic: dict[str, list[float]] = {}
        for batch in batches:
            n += 1
            count = batch.record_count
            records += count
            size = len(batch.payload)
            uncompressed = batch.builder.size_in_bytes
            ratio = size / uncompressed if uncompressed else 1.0
            waited = (now - batch.created) * 1000
            # Encoded bytes (batch.reserved also counts each record's future and bookkeeping).
            encoded = uncompressed - RECORD_BATCH_OVERHEAD
            # The bulk path does not size each record: its batch's average stands in.
            largest = batch.max_record_size or encoded / max(count, 1)
            sizes += size
            queue_ms += waited
            ratios += ratio
            encoded_total += encoded
            # Comparisons rather than max(): a builtin call each, per batch.
            if size > size_max:
                size_max = size
            if waited > queue_max:
                queue_max = waited
            if ratio > ratio_max:
                ratio_max = ratio
            if largest > record_max:
                record_max = largest
            # per topic: batches, then (sum, largest) of records, bytes and ratio
            t = by_topic.get(batch.topic)
            if t is None:
                by_topic[batch.topic] = [1, count, count, size, size, ratio, ratio]
            else:
                t[0] += 1
                t[1] += count
                if count > t[2]:
                    t[2] = count
                t[3] += size
                if size > t[4]:
                    t[4] = size
                t[5] += ratio
                if ratio > t[6]:
                    t[6] = ratio
        pending = self._pending
        pending.append((self._records_per_request, records, records, 1, now))
        if n:
            pending += (
                (self._batch_size, sizes, size_max, n, now),
                (self._queue_time, queue_ms, queue_max, n, now),
                (self._compression, ratios, ratio_max, n, now),
                (self._record_size, encoded_total, encoded_total, records, now),
                (self._record_size_max, record_max, record_max, n, now),
            )
            for topic, (t_n, *sums) in by_topic.items():
                t_records, t_bytes, t_compression, _retries, _errors = self._topic(topic)
                pending += (
                    (t_records, sums[0], sums[1], int(t_n), now),
                    (t_bytes, sums[2], sums[3], int(t_n), now),
                    (t_compression, sums[4], sums[5], int(t_n), now),
                )
        if len(pending) >= FOLD_AT:
            self.registry.fold()

    def produce_response(
        self, node_id: int, latency_ms: float, throttle_ms: int, now: float
    ) -> None:
        self._record(self._node(node_id)[1], latency_ms, 1, now)
        self._record(self._throttle, throttle_ms, 1, now)

    def retried(self, topic: str, records: int, now: float) -> None:
        self._record(self._retries, records, 1, now)
        self._record(self._topic(topic)[3], records, 1, now)

    def failed(self, topic: str, records: int, now: float) -> None:
        self._record(self._errors, records, 1, now)
        self._record(self._topic(topic)[4], records, 1, now)

    def connection_created(self, now: float) -> None:
        self._record(self._connections, 1, 1, now)

    def connection_closed(self, now: float) -> None:
        self._record(self._closes, 1, 1, now)

    def _record(self, sensor: Sensor, value: float, count: int, now: float) -> None:
        """``sensor.record(value, now, count)``, deferred (see :attr:`Metrics.pending`)."""
        pending = self._pending
        pending.append((sensor, value, value, count, now))
        if len(pending) >= FOLD_AT:
            self.registry.fold()

    # -- reading ------------------------------------------------------------

    def measure(self, now: float) -> dict[MetricName, float]:
        return self.registry.measure(now)


def add_producer_gauges(
    metrics: ProducerMetrics,
    pool: Any,
    *,
    sender: Callable[[], Any],
    client: Callable[[], Any],
    interceptors: Callable[[], Any],
) -> None:
    """Register the producer's gauges, read when measured.

    ``pool`` is the producer's BufferPool; ``sender``, ``client`` and
    ``interceptors`` return the producer's current ones (None before start, or
    without interceptors), so a gauge reads 0 (NaN for the metadata age) then.
    """
    gauge = metrics.add_gauge
    gauge("buffer-total-bytes", lambda now: pool.total)
    gauge("buffer-available-bytes", lambda now: pool.available)
    gauge("bufferpool-wait-time-total", lambda now: pool.wait_time_total * 1e9)
    gauge("waiting-threads", lambda now: pool.waiting)

    def requests_in_flight(now: float) -> float:
        current = sender()
        return 0 if current is None else current.requests_in_flight

    def connection_count(now: float) -> float:
        current = client()
        return 0 if current is None else current.connections.connection_count

    def metadata_age(now: float) -> float:
        current = client()
        if current is None or not current.snapshot.updated_at:
            return math.nan
        updated_at: float = current.snapshot.updated_at
        return now - updated_at

    def interceptor_errors(now: float) -> float:
        chain = interceptors()
        return 0 if chain is None else chain.errors

    gauge("requests-in-flight", requests_in_flight)
    gauge("connection-count", connection_count)
    gauge("metadata-age", metadata_age)
    gauge("interceptor-error-total", interceptor_errors)
