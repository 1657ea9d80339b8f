"""The tests' one producer factory: a test module's settings, then the test's own overrides.

``make_producer(cluster)`` builds a producer with :data:`STANDARD`, the suite's
usual settings against a cluster that injects faults: no linger, and retries
quick enough that a test waiting for a recovery sees it within its bounds. A
module whose tests need other settings names them once (``SETTINGS = {...}``)
and passes them along: ``make_producer(cluster, SETTINGS, batch_size=1000)``;
the overrides of one call win over both.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

from aioproducer import Producer

__all__ = ["DEFAULTS", "STANDARD", "make_producer"]


class _HasBootstrap(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


# No linger, and a retry backoff of 10 ms doubling up to 50 ms.
STANDARD: Mapping[str, Any] = MappingProxyType(
    {"linger_ms": 0, "retry_backoff_ms": 10, "retry_backoff_max_ms": 50}
)
# The producer's own defaults, for tests about them.
DEFAULTS: Mapping[str, Any] = MappingProxyType({})


def make_producer(
    bootstrap: str | _HasBootstrap, settings: Mapping[str, Any] = STANDARD, /, **overrides: Any
) -> Producer:
    """A producer (not started) on ``bootstrap``: a bootstrap string, or a cluster or
    broker (``MockCluster``, ``KafkaBroker``, ``KafkaCluster``) that has ``bootstrap_servers``.
    """
    servers = bootstrap if isinstance(bootstrap, str) else bootstrap.bootstrap_servers
    return Producer(servers, **{**settings, **overrides})
