"""producer.metrics() after real traffic on the mock cluster."""

from __future__ import annotations

import asyncio
import math

import pytest

from aioproducer import Producer, errors
from aioproducer.telemetry.metrics import MetricName
from aioproducer.testing import MockCluster
from tests.support.aio import until

pytestmark = pytest.mark.asyncio


def value(
    metrics: dict[MetricName, float], name: str, group: str = "producer-metrics", **tags: str
) -> float:
    found = [
        v
        for m, v in metrics.items()
        if m.name == name
        and m.group == group
        and all(m.tag(k.replace("_", "-")) == t for k, t in tags.items())
    ]
    assert len(found) == 1, (name, group, tags, found)
    return found[0]


async def test_sent_records_batches_requests_and_bytes_are_counted() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("a", partitions=2)
        cluster.create_topic("b", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, client_id="svc", linger_ms=5, compression="gzip"
        ) as p:
            futures = [await p.enqueue("a", b"v" * 200, key=b"%d" % i) for i in range(300)]
            futures += [await p.enqueue("b", b"w" * 50) for _ in range(100)]
            await p.flush()
            assert all(f.result().offset >= 0 for f in futures)
            m = p.metrics()
        stored = len(cluster.records("a")) + len(cluster.records("b"))
        produce_requests = cluster.request_count(api_key=0)
    assert stored == 400
    assert all(k.tag("client-id") == "svc" for k in m)
    assert value(m, "record-send-total") == 400
    assert value(m, "record-send-total", "producer-topic-metrics", topic="a") == 300
    assert value(m, "record-send-total", "producer-topic-metrics", topic="b") == 100
    assert value(m, "record-send-rate") > 0
    assert value(m, "record-error-total") == 0 and value(m, "record-retry-total") == 0
    # Every Produce request the cluster saw was measured, and its records too.
    assert value(m, "records-per-request-avg") == pytest.approx(400 / produce_requests)
    # Records of 200 and 50 value bytes: the largest upper bound exceeds 200.
    assert 200 < value(m, "record-size-max") < 300
    assert 50 < value(m, "record-size-avg") < value(m, "record-size-max")
    assert 0 < value(m, "compression-rate-avg") < 0.5  # repetitive values compress well
    assert value(m, "batch-size-max") >= value(m, "batch-size-avg") > 0
    assert value(m, "record-queue-time-max") >= value(m, "record-queue-time-avg") > 0
    assert value(m, "request-latency-max") >= value(m, "request-latency-avg") > 0
    assert value(m, "requests-in-flight") == 0
    per_node = [
        v
        for k, v in m.items()
        if k.group == "producer-node-metrics" and k.name == "outgoing-byte-total"
    ]
    batch_bytes = sum(value(m, "byte-total", "producer-topic-metrics", topic=t) for t in "ab")
    assert sum(per_node) == value(m, "outgoing-byte-total") > batch_bytes > 0
    assert value(m, "incoming-byte-total") > 0 and value(m, "request-total") > produce_requests
    assert value(m, "connection-count") >= 2 and value(m, "connection-creation-total") >= 2
    assert 0 <= value(m, "metadata-age") < 60
    assert value(m, "buffer-available-bytes") == value(m, "buffer-total-bytes") == 32 << 20


async def test_retries_errors_and_throttling_are_counted() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, retry_backoff_ms=1) as p:
            await p.send("t", b"warm-up")
            cluster.fail_produce("t", 0, errors.NotLeaderOrFollowerError.code, count=2)
            await p.send("t", b"retried twice")
            cluster.fail_produce("t", 0, errors.TopicAuthorizationFailedError.code)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await p.send("t", b"refused")
            cluster.throttle(cluster.broker_ids[0], 30)
            await p.send("t", b"throttled")
            m = p.metrics()
    assert value(m, "record-retry-total") == 2
    assert value(m, "record-retry-total", "producer-topic-metrics", topic="t") == 2
    assert value(m, "record-error-total") == 1
    assert value(m, "record-error-total", "producer-topic-metrics", topic="t") == 1
    assert value(m, "record-send-total") == 1 + 3 + 1 + 1  # every attempt sent
    assert value(m, "produce-throttle-time-max") == 30
    assert 0 < value(m, "produce-throttle-time-avg") < 30


async def test_tasks_waiting_for_memory_are_reported() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("m", partitions=1)
        broker = cluster.broker_ids[0]
        async with Producer(cluster.bootstrap_servers, linger_ms=0, buffer_memory=4096) as p:
            await p.send("m", b"warm-up")
            cluster.stall_broker(broker)
            tasks = [asyncio.create_task(p.enqueue("m", b"x" * 500)) for _ in range(20)]
            await asyncio.sleep(0.2)  # the waiters wait at least this long (wait time below)

            def stalled_state() -> bool:
                m = p.metrics()
                return value(m, "waiting-threads") > 0 and value(m, "requests-in-flight") >= 1

            await until(stalled_state, 10, "callers waiting for memory behind a request")
            stalled = p.metrics()
            cluster.resume_broker(broker)
            futures = await asyncio.wait_for(asyncio.gather(*tasks), 30)
            await asyncio.wait_for(p.flush(), 30)
            after = p.metrics()
    assert value(stalled, "waiting-threads") > 0
    assert value(stalled, "buffer-available-bytes") < 1000
    assert value(stalled, "requests-in-flight") >= 1
    assert all(f.result().offset > 0 for f in futures)
    assert value(after, "waiting-threads") == 0
    assert value(after, "bufferpool-wait-time-total") > 0.1e9  # nanoseconds, as in Java
    assert value(after, "buffer-available-bytes") == 4096


async def test_disabled_metrics_keep_only_the_gauges() -> None:
    async with MockCluster(brokers=1) as cluster:
        async with Producer(cluster.bootstrap_servers, metrics_enabled=False) as p:
            await p.send("t", b"v")
            m = p.metrics()
    names = {k.name for k in m}
    assert "record-send-total" not in names and "request-rate" not in names
    assert value(m, "connection-count") >= 1 and value(m, "buffer-total-bytes") > 0
    assert not any(k.group == "producer-node-metrics" for k in m)


async def test_metrics_of_a_producer_not_started() -> None:
    p = Producer(
        "127.0.0.1:1", client_id="idle", metrics_sample_window_ms=1000, metrics_num_samples=3
    )
    m = p.metrics()
    assert value(m, "record-send-total") == 0 and value(m, "record-send-rate") == 0
    assert math.isnan(value(m, "request-latency-avg")) and math.isnan(value(m, "metadata-age"))
    assert value(m, "connection-count") == 0
    with pytest.raises(errors.ConfigurationError, match="metrics_num_samples"):
        Producer("127.0.0.1:1", metrics_num_samples=0)
    assert (
        Producer.from_config({"metrics.sample.window.ms": "1000"}).config.metrics_sample_window_ms
        == 1000
    )
