"""The sink's pieces without a Spark session: options, column contract, conversion, summary."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aioproducer.errors import ConfigurationError, InvalidTopicError
from aioproducer.spark.columns import (
    CHUNK_ROWS,
    SinkSchemaError,
    SinkWriteError,
    arrow_chunks,
    plan_columns,
    row_chunks,
)
from aioproducer.spark.options import parse_options
from aioproducer.spark.writer import (
    KafkaBatchWriter,
    KafkaCommitMessage,
    KafkaStreamWriter,
    summarize,
)
from tests.support.verify import read_records

pytestmark = pytest.mark.spark

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
FULL = StructType(
    [
        StructField("Key", StringType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
        StructField("timestamp", TimestampType()),
        StructField("other", LongType()),
    ]
)


def test_import_aioproducer_does_not_import_pyspark() -> None:
    code = "import sys, aioproducer, aioproducer.spark; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_options_split_producer_properties_from_sink_options() -> None:
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:9092",
            "kafka.linger.ms": "10",
            "topic": "events",
            "checkpointLocation": "/tmp/cp",
        }
    )
    assert opts.producer_properties == {"bootstrap.servers": "h:9092", "linger.ms": "10"}
    assert opts.topic == "events" and not opts.transactional
    assert opts.task_properties(3) == {
        "bootstrap.servers": "h:9092",
        "linger.ms": "10",
        "batch.size": "262144",  # the sink's default
        "client.id": "aioproducer-spark-3",
    }


@pytest.mark.parametrize(
    ("given", "batch_size"),
    [
        ({}, "262144"),
        ({"kafka.batch.size": "16384"}, "16384"),  # the user's choice stands
        ({"kafka.max.request.size": "100000"}, "100000"),  # never above a request
    ],
)
def test_tasks_get_the_sinks_batch_size_unless_one_is_set(
    given: dict[str, str], batch_size: str
) -> None:
    opts = parse_options({"kafka.bootstrap.servers": "h:9092", **given})
    assert opts.task_properties(0)["batch.size"] == batch_size
    assert opts.shared_properties()["batch.size"] == batch_size


def test_transactional_ids_are_stable_per_partition() -> None:
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:9092",
            "transactional": "TRUE",
            "transactional.id.prefix": "job7",
        }
    )
    assert opts.task_properties(5)["transactional.id"] == "job7-5"
    assert opts.task_properties(5) == opts.task_properties(5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "'kafka.bootstrap.servers' is required"),
        ({"kafka.bootstrap.servers": "h:1", "kafka.lingerms": "1"}, "unknown producer property"),
        (
            {"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "soon"},
            "linger.ms must be an integer",
        ),
        ({"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"}, "'key' column"),
        ({"kafka.bootstrap.servers": "h:1", "topik": "x"}, "unknown option 'topik'"),
        ({"kafka.bootstrap.servers": "h:1", "transactional": "yes"}, "true or false"),
        ({"kafka.bootstrap.servers": "h:1", "transactional": "true"}, "transactional.id.prefix"),
        ({"kafka.bootstrap.servers": "h:1", "transactional.id.prefix": "p"}, "only used with"),
        (
            {
                "kafka.bootstrap.servers": "h:1",
                "kafka.acks": "1",
                "kafka.enable.idempotence": "true",
            },
            "conflicts with",
        ),
    ],
)
def test_bad_options_name_the_problem(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_options(options)


def test_bad_topic_option() -> None:
    with pytest.raises(InvalidTopicError):
        parse_options({"kafka.bootstrap.servers": "h:1", "topic": "a/b"})


def test_column_plan_is_case_insensitive_and_ignores_other_columns() -> None:
    plan = plan_columns(FULL, None)
    assert (plan.key, plan.value, plan.topic, plan.partition, plan.headers, plan.timestamp) == (
        0,
        1,
        2,
        3,
        4,
        5,
    )
    assert plan_columns(FULL, "fixed").topic is None


def test_column_plan_rejects_duplicates() -> None:
    schema = StructType([StructField("value", StringType()), StructField("VALUE", StringType())])
    with pytest.raises(SinkSchemaError, match="two columns named 'value'"):
        plan_columns(schema, "t")


def test_arrow_and_row_conversion_agree() -> None:
    plan = plan_columns(FULL, None)
    stamp = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=timezone.utc)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.record_batch(
        [
            pa.array(["k1", None]),
            pa.array([b"v1", None], pa.binary()),
            pa.array(["t1", "t2"]),
            pa.array([2, None], pa.int32()),
            pa.array([[{"key": "h", "value": b"x"}], None], header_type),
            pa.array([stamp, None], pa.timestamp("us", tz="UTC")),
            pa.array([1, 2], pa.int64()),
        ],
        names=FULL.fieldNames(),
    )
    (chunk,) = list(arrow_chunks([batch], plan))
    assert chunk.records() == [
        ("t1", b"v1", b"k1", 2, 1714564800123, [("h", b"x")]),
        ("t2", None, None, None, None, None),
    ]
    assert chunk.nbytes == 4 and dict(chunk.topics) == {"t1": 1, "t2": 1}
    # Values and keys reach the producer as Arrow arrays, read in place.
    assert all(isinstance(p.values, pa.Array) and isinstance(p.keys, pa.Array) for p in chunk.parts)

    rows = [
        Row(
            Key="k1",
            value=bytearray(b"v1"),
            topic="t1",
            partition=2,
            headers=[Row(key="h", value=bytearray(b"x"))],
            timestamp=stamp,
            other=1,
        ),
        Row(
            Key=None, value=None, topic="t2", partition=None, headers=None, timestamp=None, other=2
        ),
    ]
    (row_chunk,) = list(row_chunks(rows, plan))
    assert row_chunk.records() == chunk.records()
    assert row_chunk.nbytes == chunk.nbytes and row_chunk.topics == chunk.topics


def test_chunks_are_bounded_and_null_topics_are_reported_by_row() -> None:
    schema = StructType([StructField("topic", StringType()), StructField("value", StringType())])
    plan = plan_columns(schema, None)
    n = 2 * CHUNK_ROWS + 5
    values = [f"v{i}" for i in range(n)]
    topics: list[str | None] = ["t"] * n
    batch = pa.record_batch([pa.array(topics), pa.array(values)], names=["topic", "value"])
    sizes = [c.rows for c in arrow_chunks([batch], plan)]
    assert sum(sizes) == n and max(sizes) <= CHUNK_ROWS
    topics[CHUNK_ROWS + 4321] = None
    batch = pa.record_batch([pa.array(topics), pa.array(values)], names=["topic", "value"])
    row = f"row {CHUNK_ROWS + 4322} of this task has a null 'topic'"
    with pytest.raises(SinkWriteError, match=row):
        list(arrow_chunks([batch], plan))
    rows = [Row(topic=t, value=v) for t, v in zip(topics, values)]
    with pytest.raises(SinkWriteError, match=row):
        list(row_chunks(rows, plan))


def test_commit_logs_one_summary_line(caplog: pytest.LogCaptureFixture) -> None:
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    writer = KafkaBatchWriter(opts, plan_columns(FULL, "t"))
    messages = [
        KafkaCommitMessage(0, 0, 1000, 50_000, {"a": 600, "b": 400}, started=100.0, finished=101.0),
        KafkaCommitMessage(1, 1, 3000, 150_000, {"a": 3000}, started=100.5, finished=102.0),
        None,
    ]
    with caplog.at_level(logging.INFO, logger="aioproducer.spark"):
        writer.commit(messages)  # type: ignore[arg-type]
    (record,) = caplog.records
    assert record.getMessage() == (
        "aioproducer sink write committed: 4,000 records, 200,000 bytes from 2 tasks in 2.00 s, "
        "2,000 records/s; topics: a=3,600, b=400"
    )
    assert summarize([])[1:] == (0, 0)


@pytest.mark.integration
def test_row_writer_outside_spark_delivers_and_counts(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    """The Row-based stream writer (Spark 4.0's only streaming input), driven directly."""
    topic = topic_factory(2)
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    opts = parse_options({"kafka.bootstrap.servers": kafka_bootstrap, "topic": topic})
    writer = KafkaStreamWriter(opts, plan_columns(schema, topic))
    rows = (Row(key=str(i), value=bytearray(b"v%d" % i)) for i in range(5000))
    message = writer.write(rows)
    assert (message.partition_id, message.records, message.topics) == (0, 5000, {topic: 5000})
    assert message.bytes == sum(len(str(i)) * 2 + 1 for i in range(5000))
    records = read_records(kafka_bootstrap, topic, 5000)
    assert sorted(r.value for r in records) == sorted(b"v%d" % i for i in range(5000))  # type: ignore[type-var]


@pytest.mark.integration
def test_a_refused_record_fails_the_task_with_the_producer_reason(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory(2)
    schema = StructType(
        [StructField("value", StringType()), StructField("partition", IntegerType())]
    )
    opts = parse_options({"kafka.bootstrap.servers": kafka_bootstrap, "topic": topic})
    batch = pa.record_batch(
        [pa.array(["a", "b", "c"]), pa.array([0, 1, 7], pa.int32())], names=["value", "partition"]
    )
    writer = KafkaBatchWriter(opts, plan_columns(schema, topic))
    with pytest.raises(
        SinkWriteError, match="InvalidPartitionError: .*partition 7 is not in the range"
    ) as failed:
        writer.write(iter([batch]))
    # Refused before anything was buffered: Spark's retry of the task duplicates nothing.
    assert failed.value.may_have_been_written is False
    assert "duplicates nothing" in str(failed.value)
