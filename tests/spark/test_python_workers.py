"""Spark's Python workers without aioproducer: register() says so in seconds, naming PYSPARK_PYTHON."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

SCRIPT = """
from aioproducer.spark import local_session
try:
    local_session("workers-without-aioproducer")
except ImportError as exc:
    print("REFUSED:", exc)
else:
    print("ACCEPTED")
"""


def test_workers_that_cannot_import_aioproducer_fail_register_naming_pyspark_python(
    tmp_path: Path,
) -> None:
    # A virtualenv of the same Python without any package: what a worker gets
    # from an interpreter that is not the one aioproducer is installed in.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    worker_python = str(bare / "bin" / "python")
    env = {**os.environ, "PYSPARK_PYTHON": worker_python}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout.strip().splitlines()
    assert out and out[-1].startswith("REFUSED:"), (done.stdout, done.stderr[-3000:])
    message = out[-1]
    assert f"Spark's Python workers ({worker_python}) cannot import aioproducer" in message
    assert "No module named 'aioproducer'" in message
    assert f"set PYSPARK_PYTHON={sys.executable}" in message
