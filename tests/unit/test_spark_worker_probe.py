"""register()'s probe of Spark's Python workers is bounded (a cluster that grants no executor).

A stand-in SparkContext whose probe job never runs until its job group is
cancelled: the check cancels it after its timeout and says so, and clears the
job group it set, so later jobs of the session are not in it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from aioproducer.spark import check_python_workers


class _Conf:
    def get(self, key: str) -> None:
        return None


class _StuckContext:
    """Runs no job: collect() waits until its job group is cancelled."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.properties: dict[str, Any] = {}
        self.group: str | None = None

    def getConf(self) -> _Conf:
        return _Conf()

    def setJobGroup(self, group: str, description: str, interrupt: bool) -> None:
        self.group = group
        self.properties["spark.jobGroup.id"] = group

    def setLocalProperty(self, key: str, value: Any) -> None:
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = value

    def cancelJobGroup(self, group: str) -> None:
        assert group == self.group
        self.cancelled.set()

    def parallelize(self, data: Any, slices: int) -> _StuckContext:
        return self

    def map(self, fn: Any) -> _StuckContext:
        return self

    def collect(self) -> list[Any]:
        if not self.cancelled.wait(60):  # far past the check's timeout: the broken case
            raise AssertionError("the probe job was never cancelled")
        raise RuntimeError("Job cancelled because the job group was cancelled")


class _Session:
    def __init__(self, context: _StuckContext) -> None:
        self.sparkContext = context


def test_a_probe_no_worker_runs_is_cancelled_after_its_timeout() -> None:
    context = _StuckContext()
    with pytest.raises(
        TimeoutError, match=r"no Spark Python worker ran the aioproducer probe task within 0.2 s"
    ):
        check_python_workers(_Session(context), timeout=0.2)  # type: ignore[arg-type]
    assert context.cancelled.is_set()
    assert "spark.jobGroup.id" not in context.properties  # later jobs are not in its group
