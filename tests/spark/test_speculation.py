"""Transactional writes refuse Spark speculation (``spark.speculation=true``).

A speculative copy of a task would share the task's transactional id: its
``init_transactions()`` aborts the transaction the other attempt prepared,
which the driver may be about to commit. The sink cannot tell a speculative
copy from a retry, nor learn from Spark which attempt lost, so each task of a
transactional write checks the setting (which Spark SQL hands every task as a
local property) and fails at once, before it touches Kafka, with a
ConfigurationError naming it. At-least-once writes are not affected.

The setting belongs to the SparkContext, one per process, so the end-to-end
test runs this module as a script: a Spark application of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from aioproducer.errors import ConfigurationError
from aioproducer.spark import local_session
from aioproducer.spark.options import parse_options, refuse_speculation
from tests.support.verify import count_records

pytestmark = pytest.mark.spark

_APP = Path(__file__)  # run as a script: _speculative_application()
_ROOT = Path(__file__).resolve().parents[2]


def _options(**extra: str) -> Any:
    return parse_options({"kafka.bootstrap.servers": "localhost:9092", "topic": "t", **extra})


@pytest.mark.parametrize("value", ["true", "TRUE", " true "])
def test_a_transactional_write_refuses_speculation(value: str) -> None:
    options = _options(**{"transactional": "true", "transactional.id.prefix": "p"})
    with pytest.raises(ConfigurationError, match=r"spark\.speculation=true"):
        refuse_speculation(options, value)


@pytest.mark.parametrize("value", [None, "false", "False", ""])
def test_a_transactional_write_runs_without_speculation(value: str | None) -> None:
    options = _options(**{"transactional": "true", "transactional.id.prefix": "p"})
    refuse_speculation(options, value)  # no error


def test_an_at_least_once_write_runs_with_speculation() -> None:
    refuse_speculation(_options(), "true")  # no error: duplicates are allowed there anyway


def _high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


@pytest.mark.integration
def test_speculation_fails_a_transactional_job_before_it_writes(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    transactional_topic = topic_factory(2)
    plain_topic = topic_factory(2)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, str(_APP), kafka_bootstrap, transactional_topic, plain_topic],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=_ROOT,
        check=False,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, (
        f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    )
    result = json.loads(lines[-1][len("RESULT ") :])

    error = result["transactional_error"]
    assert error is not None, "the transactional write ran with spark.speculation=true"
    assert "ConfigurationError" in error and "spark.speculation=true" in error, error
    # Refused before any producer started: nothing reached the topic, not even aborted records.
    assert _high_watermarks(kafka_bootstrap, transactional_topic, 2) == [0, 0]

    # The at-least-once write goes on under speculation.
    assert result["plain_rows"] == 100, result
    assert count_records(kafka_bootstrap, plain_topic, 100) == 100


def _speculative_application(
    bootstrap: str, transactional_topic: str, plain_topic: str
) -> dict[str, object]:
    """Run in a child process (one SparkContext per process; the setting cannot
    change in the shared session): a transactional write, then an at-least-once
    one, under spark.speculation=true. Returns the first's error text (None if
    it succeeded) and the second's row count (None if it failed)."""
    spark = local_session(
        "aioproducer-speculation",
        master="local[2]",
        **{
            "spark.speculation": "true",
            "spark.task.maxFailures": "1",  # the job fails at the first refusal
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        },
    )
    rows = 100
    df = spark.range(rows, numPartitions=2).selectExpr("concat('v', id) as value")
    result: dict[str, object] = {"transactional_error": None, "plain_rows": None}
    try:
        (
            df.write.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", transactional_topic)
            .option("transactional", "true")
            .option("transactional.id.prefix", f"spec-{uuid.uuid4().hex[:10]}")
            .mode("append")
            .save()
        )
    except Exception as exc:  # noqa: BLE001 - reported to the test, which judges it
        result["transactional_error"] = str(exc)
    try:
        (
            df.write.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", plain_topic)
            .mode("append")
            .save()
        )
        result["plain_rows"] = rows
    except Exception as exc:  # noqa: BLE001
        result["plain_error"] = str(exc)
    spark.stop()
    return result


if __name__ == "__main__":
    print("RESULT " + json.dumps(_speculative_application(*sys.argv[1:4])))
