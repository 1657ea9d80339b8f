"""A Spark batch pipeline that writes to Kafka through the ``aioproducer`` data source.

    python examples/spark_batch.py                         # starts a local broker
    python examples/spark_batch.py --bootstrap host:9092 --orders 200000 --format parquet

It generates a small orders dataset (CSV or Parquet) in a temporary directory,
reads it back with Spark, enriches and filters it with Spark SQL, and writes
one JSON record per order to the ``orders-enriched`` topic, keyed by customer,
with a header naming the source file format. Without ``--bootstrap`` it starts
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
from pathlib import Path

from aioproducer.embedded import bootstrap_or_local

# Spark's Python workers must run this interpreter, which has aioproducer installed.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

TRANSFORM_SQL = """
SELECT
    customer                                         AS key,
    to_json(named_struct(
        'order_id', order_id,
        'customer', customer,
        'country',  upper(country),
        'amount',   round(amount, 2),
        'vat',      round(amount * CASE country WHEN 'de' THEN 0.19 WHEN 'fr' THEN 0.20 ELSE 0.0 END, 2),
        'tier',     CASE WHEN amount >= 500 THEN 'large' WHEN amount >= 100 THEN 'medium' ELSE 'small' END,
        'ordered_at', ordered_at
    ))                                               AS value,
    array(named_struct('key', 'source-format', 'value', cast('{fmt}' AS binary))) AS headers,
    ordered_at                                       AS timestamp
FROM orders
WHERE status = 'paid'
"""


def generate_orders(spark, directory: Path, orders: int, fmt: str) -> str:  # type: ignore[no-untyped-def]
    """Write a synthetic orders dataset with Spark; return its path."""
    path = str(directory / f"orders.{fmt}")
    df = spark.range(orders).selectExpr(
        "id AS order_id",
        "concat('customer-', cast(id % 997 AS string)) AS customer",
        "element_at(array('de', 'fr', 'us', 'jp'), cast(id % 4 AS int) + 1) AS country",
        "cast((id * 7919) % 100000 AS double) / 100 AS amount",
        "if(id % 10 = 0, 'refunded', 'paid') AS status",
        "timestamp_seconds(1700000000 + id) AS ordered_at",
    )
    writer = df.write.mode("overwrite")
    if fmt == "csv":
        writer.option("header", "true").csv(path)
    else:
        writer.parquet(path)
    return path


def run(bootstrap: str, orders: int, fmt: str, topic: str) -> int:

    from aioproducer.spark import local_session

    spark = local_session("aioproducer-spark-batch")
    try:
        with tempfile.TemporaryDirectory(prefix="aioproducer-spark-") as tmp:
            path = generate_orders(spark, Path(tmp), orders, fmt)
            print(f"generated {orders:,} orders as {fmt} in {path}")
            if fmt == "csv":
                source = (
                    spark.read.option("header", "true")
                    .schema(
                        "order_id long, customer string, country string, amount double, "
                        "status string, ordered_at timestamp"
                    )
                    .csv(path)
                )
            else:
                source = spark.read.parquet(path)
            source.createOrReplaceTempView("orders")
            enriched = spark.sql(TRANSFORM_SQL.format(fmt=fmt))
            expected = enriched.count()
            start = time.perf_counter()
            (
                enriched.write.format("aioproducer")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", topic)
                .option("kafka.linger.ms", "10")
                .option("kafka.compression.type", "lz4")
                .mode("append")
                .save()
            )
            elapsed = time.perf_counter() - start
            print(
                f"wrote {expected:,} enriched orders to {topic!r} in {elapsed:.2f} s "
                f"({expected / elapsed:,.0f} records/s)"
            )
    finally:
        spark.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a Kafka cluster (default: start a local broker)"
    )
    parser.add_argument("--topic", default="orders-enriched")
    parser.add_argument("--orders", type=int, default=50_000)
    parser.add_argument("--format", dest="fmt", default="csv", choices=["csv", "parquet"])
    args = parser.parse_args()
    # The sink logs one summary line per committed write.
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    with bootstrap_or_local(
        args.bootstrap, announce=lambda a: print(f"started a local broker at {a}")
    ) as bs:
        return run(bs, args.orders, args.fmt, args.topic)


if __name__ == "__main__":
    sys.exit(main())
