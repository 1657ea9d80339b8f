"""Producer settings shared by the cluster tests."""

from __future__ import annotations

from typing import Any

from aioproducer import Producer
from aioproducer.testing.kafka_cluster import KafkaCluster


def cluster_producer(cluster: KafkaCluster, **overrides: Any) -> Producer:
    """An idempotent ``acks=all`` producer with compression, bootstrapped on every node.

    Backoffs are short so that recovery after a failover shows quickly; the
    delivery timeout outlasts any failover a test provokes.
    """
    settings: dict[str, Any] = {
        "acks": "all",
        "enable_idempotence": True,
        "compression": "lz4",
        "linger_ms": 5,
        "request_timeout_ms": 10_000,
        "delivery_timeout_ms": 120_000,
        "retry_backoff_ms": 100,
        "retry_backoff_max_ms": 1000,
        "reconnect_backoff_ms": 50,
        "reconnect_backoff_max_ms": 1000,
    }
    settings.update(overrides)
    return Producer(cluster.bootstrap_servers, **settings)
