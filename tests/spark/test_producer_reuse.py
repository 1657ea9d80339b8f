"""Spark's reused Python workers keep their producers between writes; a failed task's goes.

The broker is a MockCluster in this process, so the test can see which
producer id wrote each record: a producer kept by a worker writes the next
write's records under the id it already had; a fresh one gets a new id.
Spark also replaces the Python worker of a failed task, so what the pool does
with a failed task's producer is checked without Spark, in test_producer_pool.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from aioproducer.testing import MockCluster
from tests.support.loop_thread import LoopThread

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROWS = 30_000  # 15,000 per Spark partition: two Arrow batches each


@pytest.fixture
def cluster() -> Iterator[tuple[LoopThread, MockCluster]]:
    with LoopThread() as owner:
        mock = owner.run(MockCluster(brokers=1).start())
        try:
            yield owner, mock
        finally:
            owner.run(mock.stop())


def write(df: DataFrame, bootstrap: str, topic: str) -> None:
    (
        df.write.format("aioproducer")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def frame(spark: SparkSession, tag: str, bad_last_rows: bool = False) -> DataFrame:
    """ROWS keyed rows in two partitions; ``bad_last_rows``: the last row of each
    partition has a timestamp before 1970, which the producer refuses, so every
    task fails after its first batch was delivered."""
    columns = ["cast(id as string) as key", f"cast(concat('{tag}-', id) as binary) as value"]
    if bad_last_rows:
        last = f"id = {ROWS // 2 - 1} or id = {ROWS - 1}"
        columns.append(
            f"case when {last} then timestamp'1960-01-01 00:00:00' "
            "else timestamp'2024-01-01 00:00:00' end as timestamp"
        )
    return spark.range(ROWS, numPartitions=2).selectExpr(*columns)


def stored(owner: LoopThread, mock: MockCluster, topic: str) -> list[tuple[bytes, int]]:
    return owner.call(lambda: [(r.value or b"", r.producer_id) for r in mock.records(topic)])


def test_workers_reuse_producers_and_a_failed_task_leaves_none_behind(
    spark: SparkSession, cluster: tuple[LoopThread, MockCluster]
) -> None:
    owner, mock = cluster
    topics = [f"reuse-{uuid.uuid4().hex[:8]}-{i}" for i in range(4)]
    for topic in topics:
        owner.call(lambda t=topic: mock.create_topic(t, 4))  # type: ignore[misc]
    bootstrap = mock.bootstrap_servers

    write(frame(spark, "a"), bootstrap, topics[0])
    write(frame(spark, "b"), bootstrap, topics[1])
    first, second = stored(owner, mock, topics[0]), stored(owner, mock, topics[1])
    assert len(first) == len(second) == ROWS
    # The second write's tasks ran on the workers of the first, with their producers.
    assert {pid for _, pid in second} & {pid for _, pid in first}

    with pytest.raises(Exception, match="rejected"):
        write(frame(spark, "c", bad_last_rows=True), bootstrap, topics[2])
    failed_ids = {pid for _, pid in stored(owner, mock, topics[2])}

    write(frame(spark, "d"), bootstrap, topics[3])
    after = stored(owner, mock, topics[3])
    # Every row once, and none written by a producer of a failed task.
    assert sorted(v for v, _ in after) == sorted(f"d-{i}".encode() for i in range(ROWS))
    assert {pid for _, pid in after}.isdisjoint(failed_ids)
