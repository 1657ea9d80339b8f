"""The Prometheus collector and the OpenTelemetry instruments, read after real traffic."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aioproducer import Producer
from aioproducer.telemetry.opentelemetry import instrument
from aioproducer.telemetry.prometheus import register
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio


async def _traffic(cluster: MockCluster, p: Producer) -> None:
    cluster.create_topic("orders", partitions=2)
    for i in range(50):  # keyed: both partitions, so both brokers, get records
        await p.enqueue("orders", b"payload-%d" % i, key=b"%d" % i)
    await p.flush()


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


async def test_prometheus_scrape_has_producer_topic_and_node_families() -> None:
    registry = CollectorRegistry()
    async with MockCluster(brokers=2) as cluster:
        async with (
            Producer(cluster.bootstrap_servers, client_id="api") as p,
            Producer(cluster.bootstrap_servers, client_id="worker") as q,
        ):
            collector = register(p, registry)
            assert register(q, registry) is collector  # one collector per registry
            await _traffic(cluster, p)
            await q.send("orders", b"one")
            text = generate_latest(registry).decode()
            collector.untrack(q)
            after_untrack = generate_latest(registry).decode()
    samples = _samples(text)
    assert samples[("kafka_producer_record_send_total", frozenset({("client_id", "api")}))] == 50
    assert samples[("kafka_producer_record_send_total", frozenset({("client_id", "worker")}))] == 1
    assert (
        samples[
            (
                "kafka_producer_topic_record_send_total",
                frozenset({("client_id", "api"), ("topic", "orders")}),
            )
        ]
        == 50
    )
    assert "# TYPE kafka_producer_record_send_total counter" in text
    assert "# TYPE kafka_producer_request_latency_avg gauge" in text
    node_requests = {
        dict(labels)["node_id"]: v
        for (name, labels), v in samples.items()
        if name == "kafka_producer_node_request_total" and dict(labels)["client_id"] == "api"
    }
    assert {"node-0", "node-1"} <= set(node_requests) and all(v > 0 for v in node_requests.values())
    assert (
        samples[("kafka_producer_buffer_total_bytes", frozenset({("client_id", "api")}))]
        == 32 << 20
    )
    assert 'client_id="worker"' not in after_untrack and 'client_id="api"' in after_untrack


async def test_opentelemetry_reader_sees_the_producer_metrics() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    async with MockCluster(brokers=2) as cluster:
        async with (
            Producer(cluster.bootstrap_servers, client_id="otel") as p,
            Producer(cluster.bootstrap_servers, client_id="other") as q,
        ):
            instruments = instrument(p, provider)
            assert instrument(q, provider) is instruments  # one set of instruments per provider
            await _traffic(cluster, p)
            await q.send("orders", b"one")
            data = reader.get_metrics_data()
            instruments.untrack(q)
            after_untrack = reader.get_metrics_data()
    points: dict[str, list[tuple[dict[str, str], float]]] = {}
    kinds: dict[str, str] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kinds[metric.name] = type(metric.data).__name__
                points[metric.name] = [
                    (dict(pt.attributes or {}), pt.value) for pt in metric.data.data_points
                ]
    assert sorted(points["kafka.producer.record-send-total"], key=str) == [
        ({"client_id": "otel"}, 50),
        ({"client_id": "other"}, 1),
    ]
    assert kinds["kafka.producer.record-send-total"] == "Sum"
    assert kinds["kafka.producer.request-latency-avg"] == "Gauge"
    assert ({"client_id": "otel", "topic": "orders"}, 50) in points[
        "kafka.producer.topic.record-send-total"
    ]
    nodes = {attrs["node_id"] for attrs, _v in points["kafka.producer.node.request-total"]}
    assert {"node-0", "node-1"} <= nodes
    assert ({"client_id": "otel"}, 32 << 20) in points["kafka.producer.buffer-total-bytes"]
    assert '"other"' not in after_untrack.to_json() and '"otel"' in after_untrack.to_json()
