"""The C kernels for the tests that compare them with their pure-Python twins.

The extension is imported directly, so the comparisons also run when
``AIOPRODUCER_NO_EXTENSIONS=1`` selects the pure path for the rest of the
package. Such a test module calls :func:`kernels_or_skip` at import: it skips
where the extension is not built and CI is not ``"true"``; in CI an unbuilt
extension fails the test through :func:`required`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def kernels_or_skip() -> ModuleType | None:
    """The compiled module, or None in CI (where :func:`required` then fails); skips elsewhere."""
    try:
        return importlib.import_module("aioproducer._speedups._kernels")
    except ImportError:
        if os.environ.get("CI") != "true":
            pytest.skip(
                "the C kernels are not built here (no compiler at install time); "
                "run `pip install -e .` with a C compiler to compare them",
                allow_module_level=True,
            )
        return None


def required(kernels: ModuleType | None) -> ModuleType:
    """``kernels``, or a failure: CI must compare the compiled kernels."""
    if kernels is None:
        pytest.fail("CI=true but aioproducer._speedups._kernels is not built")
    return kernels
