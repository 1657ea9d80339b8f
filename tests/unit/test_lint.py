"""The package passes ruff and mypy, as CI requires (the linters run as a test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.extras import require
from tests.support.repo import repo_root_or_skip

WHY = "lints the checkout's sources with its pyproject.toml"


def _tool(module: str) -> list[str]:
    require(module, extra="test")
    return [sys.executable, "-m", module]


def test_ruff_finds_nothing_in_the_package() -> None:
    cmd = _tool("ruff")
    root = repo_root_or_skip(WHY)
    done = subprocess.run(
        [*cmd, "check", "--no-cache", "aioproducer"], cwd=root, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package() -> None:
    cmd = _tool("mypy")
    root = repo_root_or_skip(WHY)
    # aioproducer.spark and the Arrow bulk path import these (with their types) when present.
    for module in ("pyarrow", "numpy", "pyspark"):
        require(module, extra="spark")
    done = subprocess.run(
        [*cmd, "--no-incremental", "aioproducer"], cwd=root, capture_output=True, text=True,
        timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
