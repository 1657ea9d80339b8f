"""The driver of the standalone-cluster tests: one Spark application, several writes.

Run by tests/spark/test_standalone.py as a process of its own (a process has one
SparkContext, and the other Spark tests' local session may live in pytest's)::

    python -m tests.spark.standalone_jobs SPEC_JSON

SPEC_JSON names the master, the broker, a scratch directory and one topic per
job. Each job's outcome is printed as one ``RESULT {json}`` line, so that one
job's failure does not hide the others'; the tests read the topics back with
librdkafka and judge. Jobs, in order (the executor kill last: it costs the
application an executor, which its worker then replaces):

* ``batch``: a transactional batch write of 4 partitions over both executors,
  each value carrying the process id of the executor JVM that wrote it;
* ``streaming``: a streaming write (file source, availableNow, 3 micro-batches);
* ``killed``: a transactional write whose first attempt of partition 0 SIGKILLs
  its own executor JVM once part of its rows reached the broker in the open
  transaction; Spark runs the task again elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.types import StringType

from aioproducer.spark import local_session

BATCH_PARTITIONS, BATCH_ROWS = 4, 4_000
STREAM_FILES, STREAM_ROWS_PER_FILE = 3, 1_000
KILL_PARTITIONS, KILL_PER_PARTITION, KILL_AT = 2, 1_000, 700
PADDING = 1_000  # a 1 KB value: a task's rows fill several batches before the kill


def executor_jvm_pid() -> int:
    """The pid of the executor JVM this Python worker serves (an ancestor process)."""
    pid = os.getpid()
    for _ in range(8):
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        if pid <= 1:
            break
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
    return -1


def _write(df: Any, bootstrap: str, topic: str, **options: str) -> None:
    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", bootstrap)
    writer = writer.option("topic", topic).option("kafka.linger.ms", "5")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def job_batch(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    n = BATCH_PARTITIONS * BATCH_ROWS
    tag = udf(lambda value: f"{value}|{executor_jvm_pid()}", StringType(), useArrow=False)
    df = spark.range(n, numPartitions=BATCH_PARTITIONS).selectExpr("cast(id as string) as value")
    df = df.select(tag(col("value")).alias("value"))
    _write(
        df,
        spec["bootstrap"],
        spec["topics"]["batch"],
        transactional="true",
        **{"transactional.id.prefix": f"standalone-{uuid.uuid4().hex[:8]}"},
    )
    return {"rows": n}


def job_streaming(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    source = Path(spec["scratch"]) / "stream-input"
    source.mkdir(parents=True)
    for f in range(STREAM_FILES):
        rows = (
            json.dumps({"id": f * STREAM_ROWS_PER_FILE + r}) + "\n"
            for r in range(STREAM_ROWS_PER_FILE)
        )
        (source / f"part-{f:03d}.json").write_text("".join(rows))
    stream = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("cast(id as string) as key", "cast(id as string) as value")
    )
    query = (
        stream.writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", spec["topics"]["streaming"])
        .option("checkpointLocation", str(Path(spec["scratch"]) / "stream-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(300)
    finally:
        query.stop()
    if not finished:
        raise RuntimeError("the streaming query did not finish in 300 s")
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    return {"rows": STREAM_FILES * STREAM_ROWS_PER_FILE, "micro_batches": batches}


def _kill_own_executor_once(bootstrap: str, topic: str) -> Callable[[str], str]:
    def kill_on_first_attempt(value: str) -> str:
        ctx = TaskContext.get()
        if (
            ctx is not None
            and ctx.partitionId() == 0
            and ctx.attemptNumber() == 0
            and value.endswith(f"|0-{KILL_AT}")
        ):
            # Once some of this attempt's rows are in the log (in its open transaction),
            # the executor JVM dies as a lost machine would: no task failure, no abort.
            from tests.support.verify import read_records

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                seen = read_records(bootstrap, topic, 10**9, timeout=2, grace=0)
                if any(r.value is not None and b"|0-" in r.value for r in seen):
                    break
            os.kill(executor_jvm_pid(), signal.SIGKILL)
            time.sleep(120)  # the worker's socket closes; it never gets here
        return value

    return kill_on_first_attempt


def job_killed(spark: SparkSession, spec: dict[str, Any]) -> dict[str, Any]:
    n = KILL_PARTITIONS * KILL_PER_PARTITION
    topic = spec["topics"]["killed"]
    kill = udf(_kill_own_executor_once(spec["bootstrap"], topic), StringType(), useArrow=False)
    df = (
        spark.range(n, numPartitions=KILL_PARTITIONS)
        .selectExpr(
            f"concat(repeat('x', {PADDING}), '|', cast(id div {KILL_PER_PARTITION} as string),"
            f" '-', cast(id % {KILL_PER_PARTITION} as string)) as value"
        )
        .select(kill(col("value")).alias("value"))
    )
    _write(
        df,
        spec["bootstrap"],
        topic,
        transactional="true",
        **{"transactional.id.prefix": f"standalone-kill-{uuid.uuid4().hex[:8]}"},
    )
    return {"rows": n}


JOBS = {"batch": job_batch, "streaming": job_streaming, "killed": job_killed}


def main(spec: dict[str, Any]) -> int:
    started = time.monotonic()
    spark = local_session(
        "aioproducer-standalone-tests",
        master=spec["master"],
        **{
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            # Jobs start once both executors are there, so both take tasks.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
            "spark.task.maxFailures": "4",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "100",
        },
    )
    print(
        "RESULT " + json.dumps({"job": "session", "seconds": time.monotonic() - started}),
        flush=True,
    )
    try:
        for name in spec["jobs"]:
            began = time.monotonic()
            try:
                outcome: dict[str, Any] = {"ok": True, **JOBS[name](spark, spec)}
            except Exception as exc:  # noqa: BLE001 - each job reports; the tests judge
                outcome = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}"[-4000:],
                    "traceback": traceback.format_exc()[-4000:],
                }
            outcome.update(job=name, seconds=time.monotonic() - began)
            print("RESULT " + json.dumps(outcome), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
