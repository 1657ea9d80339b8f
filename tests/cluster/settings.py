"""Producer settings shared by the cluster tests (``make_producer(cluster, SETTINGS, ...)``)."""

from __future__ import annotations

from typing import Any

__all__ = ["SETTINGS"]

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
