"""Transactional mode: a two-phase commit of one Kafka transaction per task.

On Apache Kafka, read back by librdkafka with ``read_committed``. Tasks
prepare their transactions; the driver commits them when the job succeeds and
aborts them (fencing the ids of tasks that reported nothing) when it fails. A
task whose upstream computation fails sees its input end early, as if it were
complete: only the driver knows the task failed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.types import StringType

from aioproducer import Producer
from tests.support.verify import count_records, read_records

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _prefix() -> str:
    return f"spark-tx-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def small_arrow_batches(spark: SparkSession) -> Iterator[None]:
    """Hand rows to the writer in small batches, so a task writes some before failing."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "100")
    try:
        yield
    finally:
        spark.conf.set(key, old)


def test_transactional_write_commits_every_row(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(2)
    n = 20_000
    df = spark.range(n, numPartitions=4).selectExpr(
        "cast(id as string) as key", "concat('v', id) as value"
    )
    (
        df.write.format("aioproducer")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("transactional", "true")
        .option("transactional.id.prefix", _prefix())
        .mode("append")
        .save()
    )
    records = read_records(kafka_bootstrap, topic, n, isolation_level="read_committed", timeout=60)
    assert Counter(r.key for r in records) == Counter(str(i).encode() for i in range(n))
    assert all(r.value == b"v" + r.key for r in records)  # type: ignore[operator]


def test_transactional_needs_a_prefix(spark: SparkSession, kafka_bootstrap: str) -> None:
    df = spark.range(1).selectExpr("'x' as value")
    with pytest.raises(Exception, match="needs option\\('transactional.id.prefix'"):
        (
            df.write.format("aioproducer")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", "t")
            .option("transactional", "true")
            .mode("append")
            .save()
        )


# Python workers flush their output in 64 KiB blocks: rows must be this big for
# the first rows of a task to reach the writer while the UDF still runs.
_PADDING = 1_000


def _wait_until_visible(
    bootstrap: str, topic: str, marker: bytes, timeout: float, suffix: bytes = b""
) -> None:
    """Block until some record whose value contains ``marker`` (and ends with ``suffix``)
    is in the log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # With a suffix, read all there is (two seconds' worth), not just the first record.
        records = read_records(bootstrap, topic, 10**9 if suffix else 1, timeout=2, grace=0)
        if any(
            r.value is not None and marker in r.value and r.value.endswith(suffix) for r in records
        ):
            return


def _failing_first_attempt(bootstrap: str, topic: str, fail_at: int) -> Callable[[str], str]:
    def fail_on_first_attempt(value: str) -> str:
        # Each task's first attempt fails partway through its rows, once part of
        # its output has reached the broker (inside the still open transaction);
        # Spark then retries the task (the session allows two attempts: local[2,2]).
        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and value.endswith(f"-{fail_at}"):
            task = value.rsplit("|", 1)[1].split("-")[0]
            _wait_until_visible(bootstrap, topic, f"|{task}-".encode(), 60)
            raise RuntimeError("deliberate failure of the first task attempt")
        return value

    return fail_on_first_attempt


def test_failed_first_attempt_is_fenced_and_the_retry_delivers_every_row(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, small_arrow_batches: None
) -> None:
    topic = topic_factory(2)
    partitions, per_partition = 2, 1_000
    n = partitions * per_partition
    fail = udf(_failing_first_attempt(kafka_bootstrap, topic, 700), StringType(), useArrow=False)
    df = (
        spark.range(n, numPartitions=partitions)
        .selectExpr(
            f"concat(repeat('x', {_PADDING}), '|', cast(id div {per_partition} as string),"
            f" '-', cast(id % {per_partition} as string)) as value"
        )
        .select(fail(col("value")).alias("value"))
    )
    (
        df.write.format("aioproducer")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", "1")
        .option("transactional", "true")
        .option("transactional.id.prefix", _prefix())
        .mode("append")
        .save()
    )
    expected = {
        f"{'x' * _PADDING}|{p}-{i}".encode()
        for p in range(partitions)
        for i in range(per_partition)
    }
    committed = read_records(
        kafka_bootstrap, topic, n, isolation_level="read_committed", timeout=60
    )
    # Every row arrived through the retried attempts' committed transactions.
    assert {r.value for r in committed} == expected
    # The first attempts did put records in the log (the UDF waited for them)...
    assert count_records(kafka_bootstrap, topic, n) > n

    # ...but read_committed consumers never see them: each row exactly once.
    assert len(committed) == n, f"{len(committed)} records read_committed for {n} rows"


async def _commit_marker(bootstrap: str, topic: str) -> bytes:
    async with Producer(bootstrap, transactional_id=f"marker-{uuid.uuid4().hex[:8]}") as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"marker")
    return b"marker"


def _always_failing(bootstrap: str, topic: str, fail_at: int) -> Callable[[str], str]:
    def fail_every_attempt(value: str) -> str:
        # Values carry their attempt, so each attempt of task 1 fails only once its
        # own writer has begun its transaction and written part of it: the driver's
        # abort, which follows the job's failure, is then what must end it.
        ctx = TaskContext.get()
        attempt = ctx.attemptNumber() if ctx is not None else 0
        tagged = f"{value}#a{attempt}"
        if value.rsplit("|", 1)[1] == f"1-{fail_at}":
            _wait_until_visible(bootstrap, topic, b"|1-", 60, suffix=f"#a{attempt}".encode())
            raise RuntimeError("deliberate failure of every attempt of task 1")
        return tagged

    return fail_every_attempt


def test_a_failed_job_commits_nothing_and_leaves_no_transaction_open(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, small_arrow_batches: None
) -> None:
    """Task 0 succeeds, task 1 fails on every attempt: the job fails, and the
    driver's abort() aborts task 0's prepared transaction and fences task 1's id,
    so a later transaction on the topic is visible at once, alone."""
    topic = topic_factory(1)
    partitions, per_partition = 2, 1_000
    prefix = _prefix()
    fail = udf(_always_failing(kafka_bootstrap, topic, 700), StringType(), useArrow=False)
    df = (
        spark.range(partitions * per_partition, numPartitions=partitions)
        .selectExpr(
            f"concat(repeat('x', {_PADDING}), '|', cast(id div {per_partition} as string),"
            f" '-', cast(id % {per_partition} as string)) as value"
        )
        .select(fail(col("value")).alias("value"))
    )
    with pytest.raises(Exception, match="deliberate failure of every attempt"):
        (
            df.write.format("aioproducer")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .option("kafka.linger.ms", "1")
            .option("transactional", "true")
            .option("transactional.id.prefix", prefix)
            .mode("append")
            .save()
        )
    assert count_records(kafka_bootstrap, topic, 1) > 0  # the attempts did write
    marker = asyncio.run(_commit_marker(kafka_bootstrap, topic))
    # Open transactions would hold read_committed readers back for 15 minutes;
    # the marker, committed after the job, is read well within the bound.
    committed = read_records(
        kafka_bootstrap, topic, 1, isolation_level="read_committed", timeout=60
    )
    assert [r.value for r in committed] == [marker]
