"""Spark sink benchmark: the ``aioproducer`` data source, Spark's own Kafka sink, and
confluent-kafka in foreachPartition.

Usage (from the repository root)::

    python -m benchmarks.spark_sink                       # 1M rows, local[2], local Apache Kafka
    python -m benchmarks.spark_sink --rows 200000 --repeat 3 --bootstrap 127.0.0.1:9092
    python -m benchmarks.spark_sink --broker tansu        # the embedded Tansu broker
    python -m benchmarks.spark_sink --master standalone   # a master and two workers on loopback

One Spark session writes the same cached DataFrame (``key`` string, ``value``
binary of ``--size`` bytes) once per sink and round: through
``format("aioproducer")`` (at-least-once; and exactly-once, ``aioproducer-exactly-once``:
one transaction per task, committed by the driver), through Spark's own
``format("kafka")`` sink (Java's
KafkaProducer in the executor JVM; the ``spark-sql-kafka-0-10`` connector is
fetched from Maven Central, see :mod:`benchmarks.spark_kafka_jars`), and
through ``foreachPartition`` with a confluent-kafka (librdkafka) producer per
partition, the usual hand-rolled Python sink. All are idempotent with
``acks=all`` and the same ``linger.ms`` and ``batch.size``. A small write with
each one first warms up the JVM and Spark's Python workers. Each write goes to
a fresh topic, whose record count librdkafka checks afterwards. Prints rows/s
for each and the ratios (the best of ``--repeat`` rounds).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # allow ``python benchmarks/spark_sink.py`` too
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.brokers import add_broker_arguments, broker_for
from benchmarks.spark_kafka_jars import SparkKafkaUnavailable, spark_kafka_jars
from tests.support.verify import count_records, create_topic, delete_topic

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

LINGER_MS = 10
BATCH_SIZE = 65536


def _aioproducer_writer(df: Any, bootstrap: str, topic: str) -> Any:
    return (
        df.write.format("aioproducer")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", str(LINGER_MS))
        .option("kafka.batch.size", str(BATCH_SIZE))
        .option("kafka.acks", "all")
        .option("kafka.enable.idempotence", "true")
        .mode("append")
    )


def write_aioproducer(df: Any, bootstrap: str, topic: str) -> None:
    """At-least-once (idempotent, no transactions): what Spark's own sink gives."""
    _aioproducer_writer(df, bootstrap, topic).save()


def write_aioproducer_exactly_once(df: Any, bootstrap: str, topic: str) -> None:
    """Exactly-once: one transaction per task, prepared, committed by the driver."""
    (
        _aioproducer_writer(df, bootstrap, topic)
        .option("transactional", "true")
        .option("transactional.id.prefix", f"bench-{uuid.uuid4().hex[:8]}")
        .save()
    )


def write_spark_kafka(df: Any, bootstrap: str, topic: str) -> None:
    # Spark's sink passes every "kafka."-prefixed option to its KafkaProducer.
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.linger.ms", str(LINGER_MS))
        .option("kafka.batch.size", str(BATCH_SIZE))
        .option("kafka.acks", "all")
        .option("kafka.enable.idempotence", "true")
        .mode("append")
        .save()
    )


def _confluent_partition_writer(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], None]:
    def write(rows: Iterator[Any]) -> None:
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": LINGER_MS,
                "batch.size": BATCH_SIZE,
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        failures: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(err)

        produce, poll = producer.produce, producer.poll
        for row in rows:
            while True:
                try:
                    produce(topic, row.value, row.key, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: serve delivery reports
                    poll(0.05)
            poll(0)
        if producer.flush(120) != 0:
            raise TimeoutError("confluent-kafka: records undelivered after 120 s")
        if failures:
            raise KafkaException(failures[0])

    return write


def write_confluent(df: Any, bootstrap: str, topic: str) -> None:
    df.foreachPartition(_confluent_partition_writer(bootstrap, topic))


SINKS: dict[str, Callable[[Any, str, str], None]] = {
    "aioproducer": write_aioproducer,
    "aioproducer-exactly-once": write_aioproducer_exactly_once,
    "spark-kafka": write_spark_kafka,
    "confluent-foreachPartition": write_confluent,
}
LABELS = {
    "aioproducer": "aioproducer data source",
    "aioproducer-exactly-once": "aioproducer, exactly-once",
    "spark-kafka": "Spark's Kafka sink (Java)",
    "confluent-foreachPartition": "confluent-kafka foreachPartition",
}


def timed_write(name: str, df: Any, rows: int, bootstrap: str, partitions: int) -> float:
    topic = create_topic(bootstrap, f"spark-bench-{name}-{uuid.uuid4().hex[:8]}", partitions)
    try:
        start = time.perf_counter()
        SINKS[name](df, bootstrap, topic)
        elapsed = time.perf_counter() - start
        # Reading back 10M records takes a while on a loaded host: the bound grows with them.
        found = count_records(bootstrap, topic, rows, timeout=max(120, rows / 40_000), grace=0.5)
        if found != rows:
            raise RuntimeError(f"{name}: expected {rows} records in {topic!r}, found {found}")
    finally:
        delete_topic(bootstrap, topic)
    return rows / elapsed


def run(
    bootstrap: str,
    rows: int,
    size: int,
    repeat: int,
    partitions: int,
    sinks: list[str],
    warmup_rows: int = 20_000,
    master: str = "local[2]",
) -> dict[str, float]:
    from aioproducer.spark import local_session

    conf: dict[str, str] = {}
    if "spark-kafka" in sinks:
        conf["spark.jars"] = ",".join(str(j) for j in spark_kafka_jars())
    if master.startswith("spark://"):
        # Two executors of one core each, as local[2] has two cores; jobs wait for both.
        conf.update(
            {
                "spark.executor.cores": "1",
                "spark.cores.max": "2",
                "spark.executor.memory": "1g",
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    spark = local_session("aioproducer-spark-bench", master=master, **conf)
    try:

        def frame(n: int) -> Any:
            return spark.range(n, numPartitions=2).selectExpr(
                "cast(id as string) as key",
                f"cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', {max(0, size - 12)}))"
                " as binary) as value",
            )

        # Cached and materialised: both sinks read the same rows, not the generator.
        df = frame(rows).cache()
        df.count()
        warm = frame(warmup_rows).cache()
        warm.count()
        for name in sinks:
            timed_write(name, warm, warmup_rows, bootstrap, partitions)
        best: dict[str, float] = {name: 0.0 for name in sinks}
        for round_ in range(repeat):
            # Alternate the order so no sink always runs on a warmer machine.
            names = list(sinks) if round_ % 2 == 0 else list(reversed(sinks))
            for name in names:
                rate = timed_write(name, df, rows, bootstrap, partitions)
                print(f"round {round_ + 1}: {name:<28} {rate:>10,.0f} rows/s", flush=True)
                best[name] = max(best[name], rate)
        return best
    finally:
        spark.stop()


@contextlib.contextmanager
def _spark_master(master: str) -> Iterator[str]:
    if master != "standalone":
        yield master
        return
    from tests.support.spark_standalone import SparkStandalone

    with (
        tempfile.TemporaryDirectory(prefix="spark-bench-") as scratch,
        SparkStandalone(Path(scratch), python=sys.executable, worker_memory="2g") as cluster,
    ):
        yield cluster.master_url


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_broker_arguments(parser)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds; the best of each sink is kept"
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic")
    parser.add_argument(
        "--warmup-rows",
        type=int,
        default=20_000,
        help="rows each sink writes once before the measured rounds",
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="local[2], or 'standalone': a master and two 1-core workers started "
        "for the run (tests/support/spark_standalone.py)",
    )
    parser.add_argument(
        "--sinks", default=",".join(SINKS), help=f"comma list of {','.join(SINKS)} (default: all)"
    )
    args = parser.parse_args()
    sinks = [s.strip() for s in args.sinks.split(",") if s.strip()]
    if unknown := [s for s in sinks if s not in SINKS]:
        parser.error(f"unknown sinks: {', '.join(unknown)}")
    try:
        with (
            broker_for(args.broker, args.bootstrap) as (bootstrap, broker),
            _spark_master(args.master) as master,
        ):
            best = run(
                bootstrap,
                args.rows,
                args.size,
                args.repeat,
                args.partitions,
                sinks,
                args.warmup_rows,
                master,
            )
    except SparkKafkaUnavailable as exc:
        print(
            f"Spark's Kafka sink is unavailable: {exc}\n(leave it out with --sinks)",
            file=sys.stderr,
        )
        return 2
    print(
        f"\n{args.rows:,} rows x {args.size} B values, {args.master}, {broker}, "
        f"best of {args.repeat}:"
    )
    for name in sinks:
        print(f"  {LABELS[name]:<34} {best[name]:>10,.0f} rows/s")
    for name in sinks[1:]:
        print(f"  {'ratio ' + sinks[0] + ' / ' + name:<45} {best[sinks[0]] / best[name]:>5.2f}")
    if (
        "aioproducer-exactly-once" in sinks
        and "spark-kafka" in sinks
        and sinks[0] != ("aioproducer-exactly-once")
    ):
        ratio = best["aioproducer-exactly-once"] / best["spark-kafka"]
        print(f"  {'ratio aioproducer-exactly-once / spark-kafka':<45} {ratio:>5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
