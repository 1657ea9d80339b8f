"""The builder when the caller's code re-enters it mid-append, and run bounds at the int64 edges.

A run (``append_run``) writes its records past the builder's length and moves
the length once, at its end. A run started from inside another one (a value's
``__getitem__``) that fails must leave the outer run's records as they were,
as the pure twin leaves them; one that succeeds refuses the outer run in both.
The batch kernels (_append.c) must hold what they read of a batch (its
outcome, the produced count) while a topic's hash or a collection triggered by
an allocation runs code that replaces them. ``start``/``stop`` at the int64
edges index as Python's range does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import hostile_lane
from tests.support.builders import builder_cls, require_compiled  # noqa: F401 - a fixture
from tests.unit.test_builder_regressions import outcome, records_of

ROOT = Path(__file__).resolve().parents[2]


class NestedRun(list):
    """Values whose item ``at`` first runs ``append_run`` on the same builder."""

    def __init__(self, values: list, builder: Any, at: int, inner: list) -> None:
        super().__init__(values)
        self.builder, self.at, self.inner, self.inner_outcome = builder, at, inner, None

    def __getitem__(self, index: Any) -> Any:
        if index == self.at and self.inner_outcome is None:
            self.inner_outcome = outcome(self.builder.append_run, 7, self.inner, 0, len(self.inner))
        return super().__getitem__(index)


@pytest.mark.parametrize("first", [0, 1], ids=["empty", "one-record"])
def test_a_failed_run_inside_a_run_leaves_the_outer_records_intact(
    builder_cls: Any, first: int
) -> None:
    builder = builder_cls(batch_size=1 << 16)
    if first:
        builder.append(5, b"k", b"first", None)
    # The inner run writes a record, then fails on its second value.
    values = NestedRun([b"v%d" % i * 10 for i in range(6)], builder, 3, [b"X" * 40, 12345])
    assert builder.append_run(5, values, 0, 6) == 6
    assert values.inner_outcome[:2] == ("raised", TypeError)
    got = records_of(builder)
    assert [r[3] for r in got] == [b"first"] * first + [b"v%d" % i * 10 for i in range(6)]
    assert [r[0] for r in got] == list(range(first + 6))


def test_a_run_inside_a_run_that_succeeds_refuses_the_outer(builder_cls: Any) -> None:
    builder = builder_cls(batch_size=1 << 16)
    values = NestedRun([b"a", b"b", b"c"], builder, 1, [b"inner"])
    assert outcome(builder.append_run, 5, values, 0, 3)[:2] == ("raised", RuntimeError)
    assert values.inner_outcome == ("ok", 1)
    assert [r[3] for r in records_of(builder)] == [b"inner"]


@pytest.mark.parametrize(
    "bounds", [(-(2**63), 1), (-(2**63), 2**63 - 1), (-5, -3), (2**63 - 1, -(2**63))]
)
def test_run_bounds_at_the_int64_edges_index_as_range_does(
    builder_cls: Any, bounds: tuple[int, int]
) -> None:
    builder = builder_cls(batch_size=1 << 16)
    got = outcome(builder.append_run, 5, [b"x", b"y", b"z"], *bounds)
    if bounds[0] < bounds[1]:
        assert got == ("raised", IndexError, "list index out of range")
    else:
        assert got == ("ok", 0)
    assert builder.record_count == 0 and builder.size_in_bytes == 61


def test_the_batch_kernel_holds_what_a_topics_code_may_free() -> None:
    """A topic whose hash frees the batch's outcome or the produced count mid-append
    (directly, or through a collection at the handle's allocation): no use after free."""
    require_compiled()
    env = dict(os.environ, PYTHONMALLOC="debug", PYTHONPATH=str(ROOT))
    env.pop("AIOPRODUCER_NO_EXTENSIONS", None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.hostile_lane"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert len(lines) == 12
    before, meanwhile = hostile_lane.BEFORE, hostile_lane.MEANWHILE
    for line in lines:
        _case, _at, answer, produced, records = line.split()
        # Appended (counted on whichever count the dict held then), or refused
        # with the count put back and only the finalizer's record in the batch.
        assert answer in ("appended", "RuntimeError"), line
        if answer == "RuntimeError":
            assert (int(produced), records) == (before, "1"), line
        else:  # counted; or the finalizer ran once the record was in, and set its own count
            assert int(produced) - before in range(1, 200) or (int(produced), records) == (
                meanwhile,
                "2",
            ), line
    assert any("RuntimeError" in line for line in lines)  # the collection came mid-append once
