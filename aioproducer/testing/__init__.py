"""Test helpers: a local broker launcher and an in-process mock cluster (MockCluster)."""

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
