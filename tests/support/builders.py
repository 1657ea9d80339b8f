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
