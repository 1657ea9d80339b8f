"""The record batch builder's twins, for the tests that run on both.

:data:`PURE` is the readable reference (``records.RecordBatchBuilderPy``);
:data:`COMPILED` the C type (``aioproducer._speedups._kernels.RecordBatchBuilder``),
imported directly so that it is tested under ``AIOPRODUCER_NO_EXTENSIONS=1``
too, or None where the extension is not built. The ``builder_cls`` fixture
gives each in turn (import it into a test module to use it): the compiled one
is skipped where it is not built, and fails in CI (``CI=true``), where it must be.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from aioproducer.protocol.records import RecordBatchBuilderPy


def _compiled() -> Any:
    try:
        return importlib.import_module("aioproducer._speedups._kernels").RecordBatchBuilder
    except ImportError:
        return None


PURE: type[Any] = RecordBatchBuilderPy
COMPILED: Any = _compiled()


def require_compiled() -> type[Any]:
    """The compiled builder, or a skip (a failure in CI, which must build it)."""
    if COMPILED is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but aioproducer._speedups._kernels is not built")
        pytest.skip("the C kernels are not built here: pip install -e . with a C compiler")
    return COMPILED  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=["pure", "compiled"])
def builder_cls(request: pytest.FixtureRequest) -> type[Any]:
    """Each builder class in turn."""
    return PURE if request.param == "pure" else require_compiled()


def held_bytes(builder: Any) -> int:
    """The bytes a compiled builder has allocated for its buffer (``__sizeof__`` less the object)."""
    return sys.getsizeof(builder) - type(builder).__basicsize__


# -- the twins' differential fuzz (test_builder_differential, test_builder_hostile) --

FUZZ = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(call: Any, *args: Any, **kwargs: Any) -> tuple:
    """What a call did: ("ok", result) or ("raised", type, message); built bytes as bytes."""
    try:
        result = call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return ("raised", type(exc), str(exc))
    return ("ok", bytes(result) if isinstance(result, (bytes, bytearray)) else result)


def state(builder: Any) -> tuple:
    return (
        builder.size_in_bytes,
        builder.record_count,
        builder.base_timestamp,
        builder.max_timestamp,
        builder.is_sealed,
    )
