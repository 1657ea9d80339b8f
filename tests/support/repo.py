"""Where the repository's checkout is, for the few tests that read its files.

Tests normally run from the checkout (``tests/`` beside ``aioproducer/``). ``.ci/wheels``
runs them from a copy of ``tests/`` against an installed wheel, so that the checkout
cannot shadow the installed package; ``AIOPRODUCER_REPO_ROOT`` then names the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT_ENV = "AIOPRODUCER_REPO_ROOT"


def repo_root() -> Path | None:
    """The checkout's root (it holds pyproject.toml and aioproducer/), or None."""
    given = os.environ.get(ROOT_ENV, "").strip()
    candidates = [Path(given)] if given else [Path(__file__).resolve().parents[2]]
    for root in candidates:
        if (root / "pyproject.toml").is_file() and (root / "aioproducer").is_dir():
            return root
    return None


def repo_root_or_skip(why: str) -> Path:
    """The checkout's root; without one, skips with ``why`` (the test reads the checkout)."""
    root = repo_root()
    if root is None:
        pytest.skip(f"no repository checkout beside tests/ (set {ROOT_ENV}): this test {why}")
    return root
