"""``python -m benchmarks.schema_registry`` runs end to end at a small size.

The figures are not checked (the machine may be busy); the script must finish,
exit 0 and print both tables with a number in every cell, for both formats.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka.schema_registry")

ROOT = Path(__file__).resolve().parents[2]
# A few seconds on an idle machine; the bound only catches a hang.
BOUND_S = 120
NUMBER = r"\d+(?:\.\d+)?"


def test_the_benchmark_prints_both_tables() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.schema_registry",
            "--records",
            "2000",
            "--rounds",
            "1",
            "--subjects",
            "10",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert out.startswith("2,000 records of 10 fields"), out
    assert "Loop lag while a cold client resolves 10 schemas at once" in out
    for fmt in ("Avro", "JSON Schema"):
        cost = re.search(
            rf"^\| {fmt} \| ({NUMBER}) \| ({NUMBER}) \(({NUMBER})x\) \| ({NUMBER}) \(({NUMBER})x\) \|$",
            out,
            re.MULTILINE,
        )
        assert cost is not None, (fmt, out)
        assert all(float(v) > 0 for v in cost.groups()), cost.groups()
        lag = re.search(
            rf"^\| {fmt} \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| {NUMBER} / {NUMBER} \| "
            r"(\d+) \|$",
            out,
            re.MULTILINE,
        )
        assert lag is not None, (fmt, out)
        p50, p99, worst, ticks = lag.groups()
        assert float(p50) <= float(p99) <= float(worst) and int(ticks) > 0
