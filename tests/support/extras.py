"""Optional extras in tests: skip where one is not installed, fail in CI.

``pip install -e '.[test]'`` is enough to collect and run tests/unit and
tests/mock; a test that needs another extra (``spark``: pyarrow, numpy,
pyspark; ``bench``: aiokafka) gets its module from :func:`require`:

    pa = require("pyarrow", extra="spark")   # at module level, or inside a test

Where the module is missing, the test (or the whole module) skips, naming the
extra to install. In CI (``CI=true``, exported by .ci/run) every extra is
installed, so a missing one fails instead: CI never passes by skipping. CI's
runs on the other interpreters install the ``test`` extra only and say so with
``AIOPRODUCER_TEST_EXTRAS=test``: there tests that need another extra skip
again, while a module of the ``test`` extra itself still must be present.

This module is the one place for that rule.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

__all__ = ["ONLY_TEST_EXTRA_ENV", "in_ci", "require"]

# Set to "test" by a run whose environment has the 'test' extra only (.ci/run's
# runs on the other Python versions).
ONLY_TEST_EXTRA_ENV = "AIOPRODUCER_TEST_EXTRAS"
_ROOT = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    """True in CI, where a test must not skip for want of something CI installs."""
    return os.environ.get("CI", "").lower() == "true"


def _missing_is_a_failure(extra: str) -> bool:
    if not in_ci():
        return False
    return extra == "test" or os.environ.get(ONLY_TEST_EXTRA_ENV, "") != "test"


def require(module: str, *, extra: str) -> ModuleType:
    """``module`` imported, or a skip (a failure in CI) naming ``extra``.

    Called at module level it skips (or fails) the whole test module; inside a
    test, that test only.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = str(exc)
    # The caller is named: pytest reports a skip raised here at this file's line.
    caller = Path(sys._getframe(1).f_code.co_filename)
    where = caller.relative_to(_ROOT) if caller.is_relative_to(_ROOT) else caller
    why = f"{where} needs {module} ({missing}): pip install -e '.[{extra}]'"
    if _missing_is_a_failure(extra):
        pytest.fail(f"CI=true but {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)
