"""Read back with Java's own ``KafkaConsumer``; ask Java which partition a key goes to.

The second independent reader beside librdkafka (:mod:`tests.support.verify`):
Apache Kafka's Java client is the reference implementation, so a batch it
decodes (CRC checked, every codec, transactional control records skipped or
not per ``isolation.level``) is a batch any Kafka client can read. Both
programs are in ``tests/support/java`` and compiled on first use
(:mod:`tests.support.javac`).
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.javac import JavaProgram, compile_java
from tests.support.verify import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    ConsumedRecord,
)

__all__ = ["java_key_partitions", "java_programs", "java_read_records"]

SOURCES = sorted((Path(__file__).parent / "java").glob("*.java"))

# Java's TimestampType names -> the confluent-kafka constants ConsumedRecord carries.
_TIMESTAMP_TYPES = {
    "CreateTime": TIMESTAMP_CREATE_TIME,
    "LogAppendTime": TIMESTAMP_LOG_APPEND_TIME,
    "NoTimestampType": TIMESTAMP_NOT_AVAILABLE,
}

# Seconds a JVM may take to start on a busy machine, on top of a call's own timeout.
_JVM_SLACK = 60.0


def java_programs() -> JavaProgram:
    """The compiled read-back programs (compiled now if missing or older than their source)."""
    return compile_java(SOURCES, "tests")


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _record(topic: str, row: dict[str, Any]) -> ConsumedRecord:
    return ConsumedRecord(
        topic=topic,
        partition=row["partition"],
        offset=row["offset"],
        key=_b64(row["key"]),
        value=_b64(row["value"]),
        headers=[(name, _b64(value)) for name, value in row["headers"]],
        timestamp_ms=row["timestamp"],
        timestamp_type=_TIMESTAMP_TYPES[row["timestampType"]],
    )


def _run(cmd: list[str], timeout: float, stdin: str | None = None) -> list[dict[str, Any]]:
    try:
        proc = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(f"{cmd[-6:]} did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"Java exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def java_read_records(
    bootstrap: str,
    topic: str,
    expected: int,
    *,
    isolation_level: str = "read_uncommitted",
    timeout: float = 60.0,
    grace: float = 1.0,
) -> list[ConsumedRecord]:
    """Read ``topic`` from offset 0 on every partition with Java's ``KafkaConsumer``.

    Polls until ``expected`` records arrived, then ``grace`` seconds more to
    catch extras, or until ``timeout``; returns what was read in
    (partition, offset) order, like :func:`tests.support.verify.read_records`.
    Raises RuntimeError when the consumer fails (e.g. a corrupt batch).
    """
    cmd = java_programs().command(
        "ReadBack", bootstrap, topic, str(expected), isolation_level, str(timeout), str(grace)
    )
    rows = _run(cmd, timeout + grace + _JVM_SLACK)
    if not rows or not rows[-1].get("done"):
        raise RuntimeError(f"ReadBack ended without its summary line ({len(rows)} lines)")
    records = [_record(topic, row) for row in rows[:-1]]
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def java_key_partitions(
    bootstrap: str, topic: str, keys: Sequence[bytes], timeout: float = 30.0
) -> tuple[int, list[int]]:
    """``(partition count, [partition of each key])`` as Java's producer computes them.

    Java asks the broker for ``topic``'s partition count itself and calls
    ``BuiltInPartitioner.partitionForKey`` for each key.
    """
    cmd = java_programs().command("KeyPartitions", bootstrap, topic, str(timeout))
    stdin = "".join(base64.b64encode(k).decode() + "\n" for k in keys)
    rows = _run(cmd, timeout + _JVM_SLACK, stdin=stdin)
    if len(rows) != 1:
        raise RuntimeError(f"KeyPartitions printed {len(rows)} JSON lines, expected 1")
    partitions = rows[0]["partitions"]
    if len(partitions) != len(keys):
        raise RuntimeError(f"KeyPartitions answered {len(partitions)} keys of {len(keys)}")
    return rows[0]["numPartitions"], partitions
