"""The benchmark's Java KafkaProducer peer, end to end at a small size.

Compiles ``benchmarks/java/ProducerBench.java``, runs it through the
orchestrator's own ``measure()`` (a fresh topic, the client process, the broker
count of librdkafka, warm-up records included) and checks the result row.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from benchmarks import matrix, run
from benchmarks.clients.java import SOURCE
from tests.support.javac import JavaProgram, compile_java, skip_or_fail
from tests.support.kafka_broker import KafkaJarsUnavailable

RECORDS = 1000
WARMUP = 500


@pytest.fixture(scope="module")
def producer_bench() -> JavaProgram:
    try:
        return compile_java([SOURCE], "bench")
    except KafkaJarsUnavailable as exc:  # or JavaToolsUnavailable: no JDK
        skip_or_fail(exc)


def _args(compression: str) -> argparse.Namespace:
    return argparse.Namespace(
        timeout=180.0,
        linger_ms=5,
        batch_size=16384,
        partitions=2,
        no_verify=False,
        compression=compression,
    )


@pytest.mark.parametrize(
    ("pattern", "idempotence", "compression"), [("a", True, "none"), ("b", False, "lz4")]
)
def test_java_bench_reports_a_row_that_the_broker_confirms(
    kafka_bootstrap: str,
    producer_bench: JavaProgram,
    pattern: str,
    idempotence: bool,
    compression: str,
) -> None:
    case = matrix.Case(pattern, "java", matrix.Variant(100, idempotence, "-"), RECORDS)
    row = run.measure(
        _args(compression), kafka_bootstrap, case, extra=["--warmup-records", str(WARMUP)]
    )
    assert row["status"] == "ok", row
    assert row["warmup_records"] == WARMUP
    assert row["broker_count"] == row["expected_count"] == RECORDS + WARMUP, row
    assert row["records_per_s"] > 0 and row["wall_s"] > 0
    # The whole JVM's CPU (start-up and JIT included) exceeds the measured span's.
    assert 0 <= row["cpu_s"] <= row["process_cpu_s"], row
    assert row["jvm_cpu_s"] <= row["process_cpu_s"], row


def test_java_bench_has_no_pattern_c_or_d(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for pattern in "cd":
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.clients.java",
                "--bootstrap",
                "127.0.0.1:1",
                "--topic",
                "t",
                "--pattern",
                pattern,
                "--records",
                "10",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=run.REPO_ROOT,
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert proc.returncode == 3 and result["status"] == "skipped", (proc.stdout, proc.stderr)
    assert matrix.CLIENT_APIS["java"].keys() == {"a", "b"}


def test_default_matrix_runs_java_in_patterns_a_and_b_without_an_event_loop() -> None:
    cases = [c for c in matrix.default_matrix(1000) if c.client == "java"]
    assert {(c.pattern, c.variant.size, c.variant.idempotence) for c in cases} == {
        ("a", 100, True),
        ("a", 100, False),
        ("b", 100, True),
        ("b", 100, False),
        ("a", 1024, True),
        ("a", 1024, False),
    }
    assert {c.variant.loop for c in cases} == {"-"}


def test_spark_kafka_jars_are_named_without_their_versions() -> None:
    # spark.jars leaves out every artifact the pyspark wheel ships, whatever its version.
    from benchmarks.spark_kafka_jars import artifact_name

    assert artifact_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert artifact_name("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert artifact_name("lz4-java-1.10.1.jar") == "lz4-java"
    assert artifact_name("javassist-3.30.2-GA.jar") == "javassist"
    assert artifact_name("scala-library-2.13.15.jar") == artifact_name("scala-library-2.13.18.jar")
