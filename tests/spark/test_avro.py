"""Struct columns written as Avro through a Schema Registry, read back with confluent-kafka.

The mock registry runs on a loopback port in a thread of this process (Spark's
Python workers are other processes and reach it over HTTP); confluent-kafka's
own Schema Registry client and AvroDeserializer decode what librdkafka reads
from Apache Kafka, so neither side of the check is aioproducer's code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from aioproducer.schema_registry import split_wire
from aioproducer.testing.mock_schema_registry import MockSchemaRegistry
from tests.support.loop_thread import LoopThread
from tests.support.verify import ConsumedRecord, count_records, read_records

pytest.importorskip("fastavro")
confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = [pytest.mark.spark, pytest.mark.integration]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# Every Spark type the sink maps, nullable and not, nested, in a map and an array.
VALUE_SQL = """named_struct(
    'id', id,
    'name', concat('user-', id),
    'age', cast(id % 100 as int),
    'small', cast(id % 7 as tinyint),
    'score', id * 0.5,
    'ratio', cast(id % 4 as float) / 4,
    'active', id % 2 = 0,
    'payload', cast(concat('p', id) as binary),
    'price', cast(concat(cast(id as string), '.25') as decimal(12, 2)),
    'day', date_add(date'2024-01-01', cast(id % 365 as int)),
    'at', timestamp_micros(1700000000000000 + id),
    'tags', array(concat('t', id % 3), 'x'),
    'attrs', map('k', cast(id as int), 'n', if(id % 5 = 0, null, 1)),
    'nick', if(id % 3 = 0, null, concat('n', id)),
    'address', named_struct('city', concat('c', id % 10), 'zip', cast(id % 1000 as int))
) as value"""


def expected_value(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"user-{i}",
        "age": i % 100,
        "small": i % 7,
        "score": i * 0.5,
        "ratio": (i % 4) / 4,
        "active": i % 2 == 0,
        "payload": f"p{i}".encode(),
        "price": Decimal(f"{i}.25"),
        "day": date(2024, 1, 1) + timedelta(days=i % 365),
        "at": EPOCH + timedelta(microseconds=1_700_000_000_000_000 + i),
        "tags": [f"t{i % 3}", "x"],
        "attrs": {"k": i, "n": None if i % 5 == 0 else 1},
        "nick": None if i % 3 == 0 else f"n{i}",
        "address": {"city": f"c{i % 10}", "zip": i % 1000},
    }


class Registry:
    """The mock registry on its own loop thread, with confluent-kafka's client of it."""

    def __init__(self, thread: LoopThread, mock: MockSchemaRegistry) -> None:
        self.thread = thread
        self.mock = mock
        self.url = mock.url
        self.conf: dict[str, str] = {"url": mock.url}

    def confluent(self) -> Any:
        return confluent_sr.SchemaRegistryClient(self.conf)

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        schema_id: int = self.confluent().register_schema(
            subject, confluent_sr.Schema(json.dumps(schema), "AVRO")
        )
        return schema_id

    def registrations(self, subject: str) -> int:
        """How many register requests the registry served for ``subject``."""
        path = f"/subjects/{subject}/versions"
        return self.thread.call(
            lambda: sum(1 for r in self.mock.requests if r.method == "POST" and r.path == path)
        )

    def decode(self, records: list[ConsumedRecord], field: MessageField) -> list[Any]:
        deserializer = AvroDeserializer(self.confluent())
        out = []
        for r in records:
            data = r.key if field == MessageField.KEY else r.value
            out.append(deserializer(data, SerializationContext(r.topic, field)))
        return out


@pytest.fixture
def registry() -> Iterator[Registry]:
    with LoopThread() as thread:
        mock = thread.run(MockSchemaRegistry().start())
        try:
            yield Registry(thread, mock)
        finally:
            thread.run(mock.stop())


def write(df: DataFrame, bootstrap: str, registry: Registry | None, **options: str) -> None:
    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", bootstrap)
    if registry is not None:
        writer = writer.option("schema.registry.url", registry.url)
    for name, value in options.items():
        writer = writer.option(name.replace("_", "."), value)
    writer.mode("append").save()


def test_struct_values_are_avro_every_row_decodes_equal(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    topic = topic_factory(4)
    n, tasks = 20_000, 4
    df = spark.range(n, numPartitions=tasks).selectExpr("cast(id as string) as key", VALUE_SQL)
    write(df, kafka_bootstrap, registry, topic=topic, value_format="avro")

    records = read_records(kafka_bootstrap, topic, n, timeout=90)
    assert len(records) == n
    values = registry.decode(records, MessageField.VALUE)
    for r, value in zip(records, values):
        assert value == expected_value(int(r.key)), r.key  # type: ignore[arg-type]
    # One schema, registered under the topic's subject, named as Spark's to_avro names it.
    ids = {split_wire(r.value)[0] for r in records}  # type: ignore[arg-type]
    latest = registry.confluent().get_latest_version(f"{topic}-value")
    assert ids == {latest.schema_id}
    schema = json.loads(latest.schema.schema_str)
    assert schema["name"] == "topLevelRecord"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["nick"] == {"name": "nick", "type": ["null", "string"], "default": None}
    assert fields["address"]["type"]["namespace"] == "topLevelRecord"
    # Resolved once on the driver and once per task, never per row or per batch.
    assert 1 <= registry.registrations(f"{topic}-value") <= 1 + tasks


def test_avro_keys_and_values_with_record_names_auth_and_a_topic_column(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    registry.thread.call(lambda: registry.mock.require_basic_auth("spark", "s3cret"))
    registry.conf["basic.auth.user.info"] = "spark:s3cret"
    topics = [topic_factory(2), topic_factory(2)]
    n = 3_000
    df = spark.range(n, numPartitions=2).selectExpr(
        f"if(id % 2 = 0, '{topics[0]}', '{topics[1]}') as topic",
        "named_struct('order_id', id, 'region', concat('r', id % 3)) as key",
        "named_struct('order_id', id, 'amount', id * 1.5, 'note', cast(null as string)) as value",
    )
    write(
        df,
        kafka_bootstrap,
        registry,
        key_format="avro",
        value_format="avro",
        key_avro_record_name="OrderKey",
        key_avro_record_namespace="com.example",
        value_avro_record_name="Order",
        value_avro_record_namespace="com.example",
        key_subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy",
        value_subject_name_strategy="RecordNameStrategy",
        basic_auth_user_info="spark:s3cret",
    )
    for parity, topic in enumerate(topics):
        records = read_records(kafka_bootstrap, topic, n // 2, timeout=60)
        assert len(records) == n // 2
        keys = registry.decode(records, MessageField.KEY)
        values = registry.decode(records, MessageField.VALUE)
        assert sorted(k["order_id"] for k in keys) == list(range(parity, n, 2))
        for k, v in zip(keys, values):
            i = k["order_id"]
            assert k == {"order_id": i, "region": f"r{i % 3}"}
            assert v == {"order_id": i, "amount": i * 1.5, "note": None}
    subjects = sorted(registry.confluent().get_subjects())
    assert subjects == ["com.example.Order", "com.example.OrderKey"]


def test_transactional_avro_write_is_read_committed(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    topic = topic_factory(2)
    df = spark.range(2_000, numPartitions=2).selectExpr(
        "cast(id as string) as key", "named_struct('id', id, 'label', concat('l', id)) as value"
    )
    write(
        df,
        kafka_bootstrap,
        registry,
        topic=topic,
        value_format="avro",
        transactional="true",
        transactional_id_prefix=f"{topic}-txn",
    )
    records = read_records(kafka_bootstrap, topic, 2_000, isolation_level="read_committed")
    assert len(records) == 2_000
    for r, value in zip(records, registry.decode(records, MessageField.VALUE)):
        assert value == {"id": int(r.key), "label": f"l{int(r.key)}"}  # type: ignore[arg-type]


def test_use_latest_version_writes_with_the_registered_schema(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    topic = topic_factory(2)
    registered = {
        "type": "record",
        "name": "Reading",
        "namespace": "iot",
        "fields": [
            {"name": "sensor", "type": "string"},
            {"name": "celsius", "type": "double"},
            {"name": "unit", "type": "string", "default": "C"},
        ],
    }
    schema_id = registry.register(f"{topic}-value", registered)
    df = spark.range(500, numPartitions=2).selectExpr(
        "named_struct('celsius', id / 10, 'sensor', concat('s', id)) as value"
    )
    write(
        df,
        kafka_bootstrap,
        registry,
        topic=topic,
        value_format="avro",
        use_latest_version="true",
        auto_register_schemas="false",
    )

    records = read_records(kafka_bootstrap, topic, 500)
    assert {split_wire(r.value)[0] for r in records} == {schema_id}  # type: ignore[arg-type]
    decoded = sorted(registry.decode(records, MessageField.VALUE), key=lambda v: v["celsius"])
    assert decoded == [{"sensor": f"s{i}", "celsius": i / 10, "unit": "C"} for i in range(500)]
    assert registry.confluent().get_versions(f"{topic}-value") == [1]


def test_a_row_that_does_not_fit_the_latest_schema_fails_the_task_naming_it(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    topic = topic_factory(1)
    registry.register(
        f"{topic}-value",
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "n", "type": "int"}],
        },
    )
    df = spark.range(10, numPartitions=1).selectExpr("named_struct('n', concat('x', id)) as value")
    with pytest.raises(Exception) as info:
        write(
            df,
            kafka_bootstrap,
            registry,
            topic=topic,
            value_format="avro",
            use_latest_version="true",
        )
    text = str(info.value)
    assert "row 1 of this task: the value column's value does not match its schema" in text
    assert count_records(kafka_bootstrap, topic, 0, grace=0.5) == 0


def test_a_streaming_query_writes_avro_over_several_micro_batches(
    spark: SparkSession,
    kafka_bootstrap: str,
    topic_factory: Any,
    registry: Registry,
    tmp_path: Path,
) -> None:
    topic = topic_factory(2)
    source = tmp_path / "input"
    source.mkdir()
    files, per_file = 3, 1_000
    for f in range(files):
        (source / f"part-{f}.json").write_text(
            "".join(json.dumps({"id": f * per_file + r, "file": f}) + "\n" for r in range(per_file))
        )
    stream = (
        spark.readStream.schema("id long, file int")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr(
            "cast(id as string) as key",
            "named_struct('id', id, 'file', file, 'half', id / 2) as value",
        )
    )
    query = (
        stream.writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("value.format", "avro")
        .option("schema.registry.url", registry.url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "the streaming query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) == files

    records = read_records(kafka_bootstrap, topic, files * per_file, timeout=60)
    assert len(records) == files * per_file
    for r, value in zip(records, registry.decode(records, MessageField.VALUE)):
        i = int(r.key)  # type: ignore[arg-type]
        assert value == {"id": i, "file": i // per_file, "half": i / 2}
    # Per micro-batch (Spark plans the writer for each): one check on the driver and one
    # resolution per task (two at most here), never one per row or Arrow batch.
    assert registry.registrations(f"{topic}-value") <= files * (1 + 2)


BAD = "named_struct('a', id) as value"


@pytest.mark.parametrize(
    ("select", "options", "message"),
    [
        (BAD, {"value.format": "avro"}, "needs option('schema.registry.url', ...)"),
        (
            "cast(id as string) as value",
            {"value.format": "avro", "schema.registry.url": "R"},
            "column 'value' must be of type struct",
        ),
        (BAD, {}, "or set option('value.format', 'avro')"),
        (
            "cast(id as string) as value",
            {"schema.registry.url": "R"},
            "only used when a column is written as Avro",
        ),
        (BAD, {"value.format": "json"}, "'value.format' must be one of bytes, avro"),
        (
            BAD,
            {
                "value.format": "avro",
                "schema.registry.url": "R",
                "use.latest.version": "true",
                "auto.register.schemas": "true",
            },
            "are both true",
        ),
        (
            BAD,
            {
                "value.format": "avro",
                "schema.registry.url": "R",
                "value.subject.name.strategy": "TopicNamestrat",
            },
            "unknown subject name strategy",
        ),
        (
            BAD,
            {"key.format": "avro", "value.format": "avro", "schema.registry.url": "R"},
            "needs a 'key' column",
        ),
        (
            BAD,
            {
                "value.format": "avro",
                "schema.registry.url": "R",
                "value.avro.record.name": "9lives",
            },
            "must be an Avro name",
        ),
        (
            BAD,
            {
                "value.format": "avro",
                "schema.registry.url": "R",
                "basic.auth.user.info": "no-colon",
            },
            "of the form 'user:password'",
        ),
        (
            "named_struct('bad-name', id) as value",
            {"value.format": "avro", "schema.registry.url": "R"},
            "is not a valid Avro name",
        ),
        (
            "named_struct('m', map(id, 'x')) as value",
            {"value.format": "avro", "schema.registry.url": "R"},
            "Avro maps have string keys",
        ),
        (
            "named_struct('i', interval 1 day) as value",
            {"value.format": "avro", "schema.registry.url": "R"},
            "cannot write as Avro",
        ),
    ],
)
def test_bad_options_fail_at_write_start(
    spark: SparkSession,
    registry: Registry,
    topic_factory: Any,
    select: str,
    options: dict[str, str],
    message: str,
) -> None:
    df = spark.range(3).selectExpr(select)
    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", "127.0.0.1:1")
    writer = writer.option("topic", "never-written")
    for name, value in options.items():
        writer = writer.option(name, registry.url if value == "R" else value)
    with pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR") as info:
        writer.mode("append").save()
    assert message in str(info.value)


def test_registry_refusals_fail_at_write_start(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, registry: Registry
) -> None:
    topic = topic_factory(1)
    registry.register(
        f"{topic}-value",
        {
            "type": "record",
            "name": "topLevelRecord",
            "fields": [{"name": "a", "type": "string"}],
        },
    )
    df = spark.range(3).selectExpr("named_struct('a', id) as value")  # long: incompatible
    cases = [
        ({}, "Schema incompatible with an earlier version"),
        ({"auto.register.schemas": "false"}, "SchemaNotFoundError"),
        (
            {"schema.registry.url": "http://127.0.0.1:1", "schema.registry.max.retries": "0"},
            "SchemaRegistryUnavailableError",
        ),
    ]
    for extra, message in cases:
        writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", kafka_bootstrap)
        options = {"topic": topic, "value.format": "avro", "schema.registry.url": registry.url}
        options.update(extra)
        for name, value in options.items():
            writer = writer.option(name, value)
        with pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR") as info:
            writer.mode("append").save()
        assert message in str(info.value), extra
    # A struct field the latest version does not have.
    df2 = spark.range(3).selectExpr("named_struct('a', 'x', 'b', 1) as value")
    with pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR") as info:
        write(
            df2,
            kafka_bootstrap,
            registry,
            topic=topic,
            value_format="avro",
            use_latest_version="true",
        )
    assert "has field(s) ['b'] that the latest schema" in str(info.value)
    assert count_records(kafka_bootstrap, topic, 0, grace=0.5) == 0


@pytest.fixture
def new_york_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is not UTC (so naive local times differ from UTC)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_rows_path_encodes_structs_with_local_timestamps(
    registry: Registry, new_york_time: None
) -> None:
    """Spark 4.0's streaming writer hands over Rows: nested Rows, dict maps, naive local times."""
    from pyspark.sql import Row
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from aioproducer.spark.avro_columns import AvroEncoder, plan_avro
    from aioproducer.spark.columns import plan_columns, row_chunks
    from aioproducer.spark.options import parse_options

    struct = StructType(
        [
            StructField("id", LongType(), False),
            StructField("at", TimestampType()),
            StructField("attrs", MapType(StringType(), IntegerType())),
            StructField("inner", StructType([StructField("tags", ArrayType(StringType()))])),
        ]
    )
    schema = StructType([StructField("value", struct)])
    options = parse_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "topic": "rows",
            "value.format": "avro",
            "schema.registry.url": registry.url,
        }
    )
    plan = plan_columns(schema, options.topic, avro=("value",))
    options = plan_avro(schema, plan, options)
    assert options.avro is not None
    at = datetime(2024, 5, 1, 12, 0, 0, 123456)  # naive, local time, as Spark gives it
    rows = [
        Row(value=Row(id=i, at=at, attrs={"a": i}, inner=Row(tags=["x", str(i)]))) for i in range(3)
    ] + [Row(value=None)]
    encoder = AvroEncoder(options.avro, registry.thread.loop)
    try:
        [chunk] = list(encoder.encoded(row_chunks(rows, plan)))
    finally:
        registry.thread.run(encoder.close())
    [part] = chunk.parts
    assert part.values[3] is None  # a null struct: a tombstone
    assert chunk.nbytes == sum(len(v) for v in part.values[:3])
    decoded = registry.decode(
        [ConsumedRecord("rows", 0, i, None, v, [], 0, 0) for i, v in enumerate(part.values[:3])],
        MessageField.VALUE,
    )
    # 12:00 in New York (EDT) is 16:00 UTC.
    assert decoded[0]["at"] == datetime(2024, 5, 1, 16, 0, 0, 123456, tzinfo=timezone.utc)
    assert decoded == [
        {
            "id": i,
            "at": at.astimezone(timezone.utc),
            "attrs": {"a": i},
            "inner": {"tags": ["x", str(i)]},
        }
        for i in range(3)
    ]


def test_avro_options_keep_secrets_out_of_their_repr() -> None:
    from aioproducer.spark.options import parse_options

    options = parse_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "value.format": "avro",
            "schema.registry.url": "http://registry:8081",
            "basic.auth.user.info": "me:hunter2",
            "bearer.auth.logical.cluster": "lsrc-1",
        }
    )
    text = repr(options)
    assert "hunter2" not in text and "[hidden]" in text and "lsrc-1" in text
