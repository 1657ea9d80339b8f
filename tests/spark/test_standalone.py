"""The Spark sink on a standalone cluster: a master, two workers, executors in processes of their own.

The cluster (:mod:`tests.support.spark_standalone`) is started for this module
from pyspark's own jars on loopback. One driver process
(:mod:`tests.spark.standalone_jobs`) runs the writes; each test reads a topic
back with librdkafka on Apache Kafka and judges one of them: a transactional
batch write spread over both executors, a streaming write, and a transactional
write whose executor JVM is SIGKILLed while its transaction is open. A second
driver whose executors' Python lacks aioproducer must be told so by
``register()``, naming the interpreter, instead of failing in a task later.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark import standalone_jobs as jobs
from tests.support.repo import repo_root_or_skip
from tests.support.spark_standalone import SparkStandalone
from tests.support.verify import count_records, read_records

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

# A bound for a whole driver run far above its usual minute or two (a loaded CI host
# has taken 36 s just to start a session).
DRIVER_TIMEOUT = 900


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), python=sys.executable)
    with cluster:
        yield cluster


def _run_driver(
    spec: dict[str, Any], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    root = repo_root_or_skip("runs tests.spark.standalone_jobs from the checkout")
    return subprocess.run(
        [sys.executable, "-m", "tests.spark.standalone_jobs", json.dumps(spec)],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def results(
    standalone: SparkStandalone, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every job's outcome (``RESULT`` lines of the driver), with the topics it wrote."""
    from tests.support.verify import create_topic

    topics = {
        "batch": create_topic(kafka_bootstrap, f"standalone-batch-{os.getpid()}", 4),
        "streaming": create_topic(kafka_bootstrap, f"standalone-stream-{os.getpid()}", 2),
        "killed": create_topic(kafka_bootstrap, f"standalone-killed-{os.getpid()}", 2),
    }
    spec = {
        "master": standalone.master_url,
        "bootstrap": kafka_bootstrap,
        "scratch": str(tmp_path_factory.mktemp("standalone-driver")),
        "topics": topics,
        "jobs": ["batch", "streaming", "killed"],
    }
    done = _run_driver(spec, {"PYSPARK_PYTHON": sys.executable})
    outcomes = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            outcome = json.loads(line[len("RESULT ") :])
            outcomes[outcome["job"]] = outcome
    report = f"driver exited {done.returncode}\n{done.stderr[-5000:]}\n{standalone.logs()}"
    return {"outcomes": outcomes, "topics": topics, "report": report}


def _outcome(results: dict[str, Any], job: str) -> dict[str, Any]:
    outcome = results["outcomes"].get(job)
    assert outcome is not None, f"the driver reported nothing for {job!r}\n{results['report']}"
    assert outcome["ok"], f"{job}: {outcome['error']}\n{outcome['traceback']}\n{results['report']}"
    return outcome


def test_a_transactional_batch_write_spans_both_executors_once(
    results: dict[str, Any], kafka_bootstrap: str
) -> None:
    outcome = _outcome(results, "batch")
    n = outcome["rows"]
    records = read_records(
        kafka_bootstrap, results["topics"]["batch"], n, isolation_level="read_committed", timeout=60
    )
    ids = [int(r.value.split(b"|")[0]) for r in records if r.value is not None]
    assert sorted(ids) == list(range(n)), f"{len(ids)} of {n} rows, each once"
    writers = {int(r.value.split(b"|")[1]) for r in records if r.value is not None}
    # Two executor JVMs wrote (the job waited for both to register), none unknown.
    assert len(writers) == 2 and -1 not in writers, writers


def test_a_streaming_write_runs_its_micro_batches_on_the_cluster(
    results: dict[str, Any], kafka_bootstrap: str
) -> None:
    outcome = _outcome(results, "streaming")
    assert outcome["micro_batches"] == jobs.STREAM_FILES
    n = outcome["rows"]
    records = read_records(kafka_bootstrap, results["topics"]["streaming"], n, timeout=60)
    assert sorted(int(r.key) for r in records if r.key is not None) == list(range(n))
    assert all(r.key == r.value for r in records)


def test_an_executor_killed_mid_transaction_leaves_every_row_exactly_once(
    results: dict[str, Any], kafka_bootstrap: str
) -> None:
    outcome = _outcome(results, "killed")
    n = outcome["rows"]
    topic = results["topics"]["killed"]
    committed = read_records(
        kafka_bootstrap, topic, n, isolation_level="read_committed", timeout=60
    )
    expected = {
        f"{'x' * jobs.PADDING}|{p}-{i}".encode()
        for p in range(jobs.KILL_PARTITIONS)
        for i in range(jobs.KILL_PER_PARTITION)
    }
    assert len(committed) == n and {r.value for r in committed} == expected, (
        f"{len(committed)} records read_committed for {n} rows"
    )
    # The killed attempt had written into its open transaction before it died: those
    # records are in the log, aborted (a read_committed reader got past them above, so
    # the transaction did not stay open).
    assert count_records(kafka_bootstrap, topic, n) > n


NO_AIOPRODUCER = """
import sys
from aioproducer.spark import local_session
try:
    local_session("standalone-without-aioproducer", master=sys.argv[1],
                  **{"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.executor.memory": "512m", "spark.cores.max": "1"})
except ImportError as exc:
    print("REFUSED:", exc)
else:
    print("ACCEPTED")
"""


def test_executors_whose_python_lacks_aioproducer_are_named_by_register(
    standalone: SparkStandalone, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120
    )
    worker_python = str(bare / "bin" / "python")
    done = subprocess.run(
        [sys.executable, "-c", NO_AIOPRODUCER, standalone.master_url],
        env={**os.environ, "PYSPARK_PYTHON": worker_python},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT,
        check=False,
    )
    out = done.stdout.strip().splitlines()
    assert out and out[-1].startswith("REFUSED:"), (done.stdout, done.stderr[-3000:])
    assert f"Spark's Python workers ({worker_python}) cannot import aioproducer" in out[-1]
    assert "No module named 'aioproducer'" in out[-1]
