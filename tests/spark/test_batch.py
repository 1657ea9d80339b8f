"""Batch writes through ``df.write.format("aioproducer")``, read back with librdkafka."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from aioproducer.engine.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from tests.support.loop_thread import LoopThread
from tests.support.verify import count_records, read_records

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def write(df: DataFrame, bootstrap: str, **options: str) -> None:
    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        writer = writer.option(name.replace("_", "."), value)
    writer.mode("append").save()


def test_100k_rows_with_keys_values_and_headers(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(4)
    n = 100_000
    df = spark.range(n, numPartitions=4).selectExpr(
        "cast(id as string) as key",
        "cast(concat('value-', id) as binary) as value",
        "array(named_struct('key', 'row', 'value', cast(cast(id as string) as binary)),"
        "      named_struct('key', 'source', 'value', cast('spark' as binary))) as headers",
        "id as ignored_extra_column",
    )
    write(df, kafka_bootstrap, topic=topic, kafka_linger_ms="10")

    records = read_records(kafka_bootstrap, topic, n, timeout=90)
    assert len(records) == n
    keys = [r.key for r in records]
    assert len(set(keys)) == n and set(keys) == {str(i).encode() for i in range(n)}
    for r in records:
        assert r.value == b"value-" + r.key  # type: ignore[operator]
        assert r.headers == [("row", r.key), ("source", b"spark")]
        # Keyed records land where the Java partitioner would put them.
        assert r.partition == partition_for_key(r.key, 4)  # type: ignore[arg-type]


def test_partition_column_is_honoured(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(3)
    df = spark.range(3_000, numPartitions=2).selectExpr(
        "cast(id as string) as value", "cast(id % 3 as int) as partition"
    )
    write(df, kafka_bootstrap, topic=topic)
    records = read_records(kafka_bootstrap, topic, 3_000)
    assert len(records) == 3_000
    assert all(r.partition == int(r.value) % 3 for r in records)  # type: ignore[arg-type]


def test_topic_column_routes_rows_to_several_topics(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topics = [topic_factory(2) for _ in range(3)]
    rows = [(topics[i % 3], f"row-{i}") for i in range(3_000)]
    df = spark.createDataFrame(rows, "topic string, value string").repartition(2)
    write(df, kafka_bootstrap)
    for index, topic in enumerate(topics):
        values = sorted(r.value for r in read_records(kafka_bootstrap, topic, 1_000))  # type: ignore[type-var]
        assert values == sorted(f"row-{i}".encode() for i in range(index, 3_000, 3))


def test_topic_option_overrides_the_topic_column(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    chosen, ignored = topic_factory(1), topic_factory(1)
    df = spark.createDataFrame([(ignored, "a"), (None, "b")], "topic string, value string")
    write(df, kafka_bootstrap, topic=chosen)
    assert sorted(r.value for r in read_records(kafka_bootstrap, chosen, 2)) == [b"a", b"b"]  # type: ignore[type-var]
    assert count_records(kafka_bootstrap, ignored, 0, grace=0.5) == 0


def test_string_and_binary_columns_and_timestamps(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(1)
    df = spark.createDataFrame(
        [
            (bytearray(b"\x00\xffbin"), "héllo", "2024-05-01 12:00:00.123"),
            (None, None, None),  # a null key and a tombstone
            (bytearray(b"k"), "", "1970-01-01 00:00:01"),
        ],
        "key binary, value string, ts string",
    ).selectExpr("key", "value", "to_timestamp(ts) as timestamp")
    write(df.coalesce(1), kafka_bootstrap, topic=topic)
    records = read_records(kafka_bootstrap, topic, 3)
    assert [(r.key, r.value) for r in records] == [
        (b"\x00\xffbin", "héllo".encode()),
        (None, None),
        (b"k", b""),
    ]
    assert records[0].timestamp_ms == 1714564800123  # the session time zone is UTC
    assert records[2].timestamp_ms == 1000
    assert records[1].timestamp_ms > 1714564800123  # no timestamp: the producer's clock


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        (["cast(id as string) as key"], {"topic": "t"}, "needs a 'value' column"),
        (["id as value"], {"topic": "t"}, "column 'value' must be of type string or binary"),
        (
            ["cast(id as string) as value", "id as partition"],
            {"topic": "t"},
            "column 'partition' must be of type int",
        ),
        (
            ["cast(id as string) as value", "array('a') as headers"],
            {"topic": "t"},
            "column 'headers' must be of type array<struct<key:string,value:binary>>",
        ),
        (["cast(id as string) as value"], {}, "no topic"),
        (["cast(id as string) as value"], {"topic": "bad topic!"}, "illegal characters"),
        (
            ["cast(id as string) as value"],
            {"topic": "t", "kafka.linger.mss": "5"},
            "unknown producer property 'linger.mss'; did you mean 'linger.ms'",
        ),
        (
            ["cast(id as string) as value"],
            {"topic": "t", "kafka.transactional.id": "x"},
            "transactional.id.prefix",
        ),
    ],
    ids=[
        "missing-value",
        "value-type",
        "partition-type",
        "headers-type",
        "no-topic",
        "bad-topic-name",
        "unknown-property",
        "reserved-property",
    ],
)
def test_analysis_errors_fail_before_any_task(
    spark: SparkSession,
    kafka_bootstrap: str,
    columns: list[str],
    options: dict[str, str],
    message: str,
) -> None:
    df = spark.range(3).selectExpr(*columns)
    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", kafka_bootstrap)
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR") as info:
        writer.mode("append").save()
    assert message in str(info.value)
    assert type(info.value).__name__ == "AnalysisException"


def test_missing_bootstrap_and_overwrite_are_refused(spark: SparkSession) -> None:
    df = spark.range(1).selectExpr("'x' as value")
    with pytest.raises(Exception, match="'kafka.bootstrap.servers' is required"):
        df.write.format("aioproducer").option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="only appends"):
        df.write.format("aioproducer").option("kafka.bootstrap.servers", "127.0.0.1:1").option(
            "topic", "t"
        ).mode("overwrite").save()


def test_null_topic_on_a_row_fails_the_task(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(1)
    df = spark.createDataFrame([(topic, "ok"), (None, "orphan")], "topic string, value string")
    with pytest.raises(Exception) as info:
        write(df.coalesce(1), kafka_bootstrap)
    assert "row 2 of this task has a null 'topic'" in str(info.value)


def test_oversized_record_fails_the_job_with_the_reason(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(1)
    df = spark.range(200, numPartitions=1).selectExpr(
        "if(id = 150, repeat('x', 5000), cast(id as string)) as value"
    )
    with pytest.raises(Exception) as info:
        write(df, kafka_bootstrap, topic=topic, kafka_max_request_size="2000")
    text = str(info.value)
    assert "RecordTooLargeError" in text and "larger than max_request_size (2000)" in text


def test_kafka_properties_reach_the_producer(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(2)
    df = spark.range(5_000, numPartitions=2).selectExpr("cast(id as string) as value")
    write(
        df,
        kafka_bootstrap,
        topic=topic,
        kafka_compression_type="lz4",
        kafka_acks="all",
        kafka_batch_size="65536",
    )
    records = read_records(kafka_bootstrap, topic, 5_000)
    assert Counter(r.value for r in records) == Counter(str(i).encode() for i in range(5_000))


# -- Producers kept by Spark's Python workers between writes ---------------------------
#
# Spark's reused Python workers keep their producers between writes; a failed task's goes.
# The broker is a MockCluster in this process, so the test can see which
# producer id wrote each record: a producer kept by a worker writes the next
# write's records under the id it already had; a fresh one gets a new id.
# Spark also replaces the Python worker of a failed task, so what the pool does
# with a failed task's producer is checked without Spark, in test_producer_pool.

REUSE_ROWS = 30_000  # 15,000 per Spark partition: two Arrow batches each


@pytest.fixture
def mock_cluster() -> Iterator[tuple[LoopThread, MockCluster]]:
    with LoopThread() as owner:
        mock = owner.run(MockCluster(brokers=1).start())
        try:
            yield owner, mock
        finally:
            owner.run(mock.stop())


def reuse_frame(spark: SparkSession, tag: str, bad_last_rows: bool = False) -> DataFrame:
    """REUSE_ROWS keyed rows in two partitions; ``bad_last_rows``: the last row of each
    partition has a timestamp before 1970, which the producer refuses, so every
    task fails after its first batch was delivered."""
    columns = ["cast(id as string) as key", f"cast(concat('{tag}-', id) as binary) as value"]
    if bad_last_rows:
        last = f"id = {REUSE_ROWS // 2 - 1} or id = {REUSE_ROWS - 1}"
        columns.append(
            f"case when {last} then timestamp'1960-01-01 00:00:00' "
            "else timestamp'2024-01-01 00:00:00' end as timestamp"
        )
    return spark.range(REUSE_ROWS, numPartitions=2).selectExpr(*columns)


def stored(owner: LoopThread, mock: MockCluster, topic: str) -> list[tuple[bytes, int]]:
    return owner.call(lambda: [(r.value or b"", r.producer_id) for r in mock.records(topic)])


def test_workers_reuse_producers_and_a_failed_task_leaves_none_behind(
    spark: SparkSession, mock_cluster: tuple[LoopThread, MockCluster]
) -> None:
    owner, mock = mock_cluster
    topics = [f"reuse-{uuid.uuid4().hex[:8]}-{i}" for i in range(4)]
    for topic in topics:
        owner.call(lambda t=topic: mock.create_topic(t, 4))  # type: ignore[misc]
    bootstrap = mock.bootstrap_servers

    write(reuse_frame(spark, "a"), bootstrap, topic=topics[0])
    write(reuse_frame(spark, "b"), bootstrap, topic=topics[1])
    first, second = stored(owner, mock, topics[0]), stored(owner, mock, topics[1])
    assert len(first) == len(second) == REUSE_ROWS
    # The second write's tasks ran on the workers of the first, with their producers.
    assert {pid for _, pid in second} & {pid for _, pid in first}

    with pytest.raises(Exception, match="rejected"):
        write(reuse_frame(spark, "c", bad_last_rows=True), bootstrap, topic=topics[2])
    failed_ids = {pid for _, pid in stored(owner, mock, topics[2])}

    write(reuse_frame(spark, "d"), bootstrap, topic=topics[3])
    after = stored(owner, mock, topics[3])
    # Every row once, and none written by a producer of a failed task.
    assert sorted(v for v, _ in after) == sorted(f"d-{i}".encode() for i in range(REUSE_ROWS))
    assert {pid for _, pid in after}.isdisjoint(failed_ids)
