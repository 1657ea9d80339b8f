"""The Spark guide's first example runs as written (on Apache Kafka, read back with librdkafka)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tests.support.verify import read_records

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "spark.md"


def _snippet() -> str:
    [first, *_] = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.DOTALL)
    assert 'format("aioproducer")' in first and "writeStream" in first
    return first


def test_the_guides_batch_and_streaming_example_runs_as_written(
    spark: SparkSession, kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory(2)
    source = (
        _snippet()
        .replace('"host:9092"', repr(kafka_bootstrap))
        .replace('"events"', repr(topic))
        .replace('"/checkpoints/events"', repr(str(tmp_path / "checkpoint")))
    )
    # What the snippet takes as given: a session, a DataFrame and a stream.
    df = spark.createDataFrame([(i, f"user-{i}") for i in range(5)], "user_id int, name string")
    stream_df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .selectExpr("cast(value as string) as value")
    )
    namespace: dict[str, Any] = {"spark": spark, "df": df, "stream_df": stream_df}
    exec(compile(source, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own documentation
    query = namespace["query"]
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    records = read_records(kafka_bootstrap, topic, 5, timeout=90)
    batch = sorted((r.key, json.loads(r.value)) for r in records if r.key is not None)
    assert batch == [(str(i).encode(), {"user_id": i, "name": f"user-{i}"}) for i in range(5)]
