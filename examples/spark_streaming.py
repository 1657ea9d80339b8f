"""A Structured Streaming pipeline that writes to Kafka through the ``aioproducer`` data source.

    python examples/spark_streaming.py                          # starts a local broker
    python examples/spark_streaming.py --bootstrap host:9092 --batches 10 --rows-per-second 5000

Spark's ``rate`` source generates rows; a transformation turns each into a
sensor reading (JSON value, sensor id as key, the event time as the Kafka
timestamp) and the query writes them to the ``sensor-readings`` topic, one
micro-batch per second. After ``--batches`` micro-batches with data it stops
the query and prints what each committed batch wrote (a batch that committed
while the query was stopping included). Without ``--bootstrap`` it starts
the embedded Tansu broker on a free loopback port. Needs the ``spark`` extra
(``pip install 'aioproducer[spark]'``) and Java 17+.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

from aioproducer.embedded import bootstrap_or_local

# Spark's Python workers must run this interpreter, which has aioproducer installed.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def run(bootstrap: str, topic: str, batches: int, rows_per_second: int, transactional: bool) -> int:

    from aioproducer.spark import local_session

    spark = local_session("aioproducer-spark-streaming")
    readings = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .option("numPartitions", 2)
        .load()
        .selectExpr(
            "concat('sensor-', cast(value % 50 AS string)) AS key",
            "to_json(named_struct("
            "  'sensor', concat('sensor-', cast(value % 50 AS string)),"
            "  'seq', value,"
            "  'celsius', round(20 + 5 * sin(value / 100.0), 3),"
            "  'at', timestamp)) AS value",
            "timestamp",
        )
    )
    with tempfile.TemporaryDirectory(prefix="aioproducer-stream-") as checkpoint:
        writer = (
            readings.writeStream.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("kafka.linger.ms", "10")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
        )
        if transactional:
            writer = writer.option("transactional", "true").option(
                "transactional.id.prefix", f"sensor-readings-{os.getpid()}"
            )
        query = writer.start()
        committed: dict[int, int] = {}  # batch id -> rows, of micro-batches with data

        def take_progress() -> None:
            # A micro-batch's progress is reported once the sink committed it.
            # recentProgress keeps only the latest ones: gather them as they come.
            for progress in query.recentProgress:
                rows, batch_id = progress["numInputRows"], progress["batchId"]
                if rows and batch_id not in committed:
                    committed[batch_id] = rows
                    print(f"micro-batch {batch_id}: {rows:,} rows written to {topic!r}")

        try:
            deadline = time.monotonic() + 120 + 10 * batches
            while query.isActive and time.monotonic() < deadline:
                take_progress()
                if len(committed) >= batches:
                    break
                time.sleep(0.5)
        finally:
            # Stopping cancels the micro-batch in progress, which Spark logs as
            # errors; that cancellation is intended here.
            spark.sparkContext.setLogLevel("FATAL")
            query.stop()
            # More micro-batches may have committed since the last look (several
            # between two looks on a busy machine, one while stopping): count
            # every one the sink committed, not just the first ``batches``.
            take_progress()
            spark.stop()
        if query.exception() is not None:
            print(f"the query failed: {query.exception()}", file=sys.stderr)
            return 1
    # A micro-batch cut short by stop() is not counted: rows its tasks had
    # already delivered stay in Kafka (at-least-once), but the sink did not
    # commit it, and Spark would run it again on a restart from the checkpoint.
    written = sum(committed.values())
    print(f"stopped after {len(committed)} micro-batches: {written:,} rows written")
    return 0 if len(committed) >= batches else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a Kafka cluster (default: start a local broker)"
    )
    parser.add_argument("--topic", default="sensor-readings")
    parser.add_argument(
        "--batches", type=int, default=5, help="micro-batches with data before stopping"
    )
    parser.add_argument("--rows-per-second", type=int, default=2_000)
    parser.add_argument(
        "--transactional", action="store_true", help="one Kafka transaction per task"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    with bootstrap_or_local(
        args.bootstrap, announce=lambda a: print(f"started a local broker at {a}")
    ) as bs:
        return run(bs, args.topic, args.batches, args.rows_per_second, args.transactional)


if __name__ == "__main__":
    sys.exit(main())
