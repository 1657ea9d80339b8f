"""The test kit for code that uses aioproducer: the in-process mock cluster and its pytest plugin.

:class:`MockCluster` (``aioproducer.testing.mock``) answers the Kafka protocol on
loopback sockets and keeps every record; ``pytest_plugin`` gives the
``kafka_cluster``, ``producer`` and ``schema_registry`` fixtures;
``mock_schema_registry`` is an in-process Confluent Schema Registry. The
embedded Tansu broker is :mod:`aioproducer.embedded`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .mock import MockCluster

__all__ = ["MockCluster"]


def __getattr__(name: str) -> Any:
    # Imported on first use: pytest loads aioproducer.testing.pytest_plugin in
    # every run, and that must stay cheap and work without the mock package.
    if name == "MockCluster":
        from .mock import MockCluster

        return MockCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
