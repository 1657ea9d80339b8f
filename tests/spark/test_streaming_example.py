"""``examples/spark_streaming.py`` reports the rows its sink committed, every micro-batch counted.

The example looks at the query's progress every half second and stops once
enough micro-batches committed. On a busy machine several commit between two
looks (and one may commit while the query stops); the report must count each
of them. Here the example's clock is slowed so that two micro-batches with data
have committed before it looks for the first time, and a streaming listener
counts what Spark committed independently of the example.
"""

from __future__ import annotations

import re
import threading
import time
import types
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


class _KeepSession:
    """The test's shared session, as the example sees it: its stop() leaves it running."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)

    def stop(self) -> None:
        pass


class _Committed(StreamingQueryListener):
    """Rows of every micro-batch with data that Spark reported complete (after its sink commit)."""

    def __init__(self) -> None:
        self.rows: dict[int, int] = {}
        self.terminated = threading.Event()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        if event.progress.numInputRows:
            self.rows[event.progress.batchId] = event.progress.numInputRows

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.terminated.set()


def test_the_streaming_example_counts_every_committed_micro_batch(
    spark: SparkSession,
    kafka_bootstrap: str,
    topic_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import examples.spark_streaming as example

    topic = topic_factory(2)
    committed = _Committed()

    def slow_sleep(seconds: float) -> None:
        # Wait until two micro-batches with data committed, as if the machine
        # were too busy to look sooner; bounded, so a stuck query fails below.
        deadline = time.monotonic() + 120
        while len(committed.rows) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(seconds)

    monkeypatch.setattr(
        example, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=slow_sleep)
    )
    monkeypatch.setattr("aioproducer.spark.local_session", lambda *a, **k: _KeepSession(spark))
    spark.streams.addListener(committed)
    try:
        code = example.run(kafka_bootstrap, topic, 1, 50, False)
        assert committed.terminated.wait(60), "the listener never heard the query end"
    finally:
        spark.streams.removeListener(committed)
        spark.sparkContext.setLogLevel("ERROR")  # the example quiets the session while stopping

    assert code == 0
    assert len(committed.rows) >= 2  # the case under test: more batches than asked for
    out = capsys.readouterr().out
    match = re.search(r"stopped after (\d+) micro-batches: ([\d,]+) rows written", out)
    assert match, out
    assert int(match.group(1)) == len(committed.rows)
    assert int(match.group(2).replace(",", "")) == sum(committed.rows.values())
