"""Streaming writes through ``df.writeStream.format("aioproducer")``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.support.verify import read_records

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _write_json_files(directory: Path, files: int, rows_per_file: int) -> None:
    directory.mkdir()
    for f in range(files):
        with open(directory / f"part-{f:03d}.json", "w") as out:
            out.writelines(
                json.dumps({"id": f * rows_per_file + r, "file": f}) + "\n"
                for r in range(rows_per_file)
            )


def test_streaming_query_delivers_every_row_over_several_micro_batches(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory(2)
    files, per_file = 4, 2_500
    source = tmp_path / "input"
    _write_json_files(source, files, per_file)
    stream = (
        spark.readStream.schema("id long, file int")
        .option("maxFilesPerTrigger", 1)  # one file per micro-batch
        .json(str(source))
        .selectExpr(
            "cast(id as string) as key",
            "to_json(named_struct('id', id, 'double', id * 2)) as value",
            "array(named_struct('key', 'file', 'value', cast(cast(file as string) as binary))) as headers",
        )
    )
    query = (
        stream.writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", "10")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "the streaming query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == files  # several micro-batches, not one

    total = files * per_file
    records = read_records(kafka_bootstrap, topic, total, timeout=60)
    assert len(records) == total
    by_key = {int(r.key): r for r in records}  # type: ignore[arg-type]
    assert sorted(by_key) == list(range(total))
    for key, r in by_key.items():
        assert json.loads(r.value) == {"id": key, "double": key * 2}  # type: ignore[arg-type]
        assert r.headers == [("file", str(key // per_file).encode())]


def test_streaming_schema_errors_fail_before_any_task(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()  # 'value' is a long
    query = (
        stream.writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", "never")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    # Spark creates a Python stream writer when it plans the first micro-batch,
    # not in start(): the query fails then, before running a task.
    try:
        with pytest.raises(Exception, match="column 'value' must be of type string or binary"):
            query.awaitTermination(120)
    finally:
        query.stop()
