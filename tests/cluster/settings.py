"""Settings shared by the cluster tests: the producer's (``make_producer(cluster, SETTINGS, ...)``)
and the clusters a test may run on."""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTERS", "SETTINGS", "TRANSACTION_VERSION", "TV1_FEATURES"]

# An idempotent acks=all producer with compression. Backoffs are short so that
# recovery after a failover shows quickly; the delivery timeout outlasts any
# failover a test provokes.
SETTINGS: dict[str, Any] = {
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

#: Feature levels of the second cluster (``kafka_cluster_tv1``): the transaction
#: protocol before KIP-890 part 2, and no eligible leader replicas (KIP-966).
TV1_FEATURES: dict[str, int] = {"transaction.version": 1, "eligible.leader.replicas.version": 0}
#: The clusters ``@pytest.mark.parametrize("cluster", CLUSTERS, indirect=True)``
#: runs a test on: Kafka's defaults, and :data:`TV1_FEATURES`.
CLUSTERS = ["tv2", "tv1"]
#: The ``transaction.version`` each of :data:`CLUSTERS` is formatted with.
TRANSACTION_VERSION = {"tv2": 2, "tv1": 1}
