"""The package passes ruff and mypy, as CI requires (the linters run as a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.extras import require

ROOT = Path(__file__).resolve().parents[2]


def _tool(module: str) -> list[str]:
    require(module, extra="test")
    return [sys.executable, "-m", module]


def test_ruff_finds_nothing_in_the_package() -> None:
    cmd = _tool("ruff")
    done = subprocess.run(
        [*cmd, "check", "--no-cache", "aioproducer"], cwd=ROOT, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package() -> None:
    cmd = _tool("mypy")
    # aioproducer.spark and the Arrow bulk path import these (with their types) when present.
    for module in ("pyarrow", "numpy", "pyspark"):
        require(module, extra="spark")
    done = subprocess.run(
        [*cmd, "--no-incremental", "aioproducer"], cwd=ROOT, capture_output=True, text=True,
        timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
