"""Independent verification of what reached the broker, built on librdkafka.

Nothing here uses aioproducer: tests produce with the code under test and read
back with confluent-kafka, so a bug cannot hide on both sides.

Tansu quirks shaped these helpers: its group coordinator is unreliable, so
partitions are always ``assign()``-ed from offset 0 (never ``subscribe()``), and
its watermark offsets can be wrong, so records are counted rather than offsets
compared.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumedRecord",
    "DeliveredRecord",
    "count_records",
    "create_topic",
    "partition_count",
    "produce_with_librdkafka",
    "read_records",
]


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as read back from the broker.

    ``timestamp_type`` is one of confluent-kafka's ``TIMESTAMP_*`` constants
    (re-exported here): 1 = CreateTime, 2 = LogAppendTime, 0 = not available.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    # Kafka allows a null header value, so ``None`` may appear.
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int
    timestamp_type: int


@dataclass(frozen=True)
class DeliveredRecord:
    """Delivery report of a record produced with librdkafka."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# Errors librdkafka reports while it keeps retrying on its own; a verifier
# should ride over them rather than fail a test on a transient hiccup.
_TRANSIENT = {
    KafkaError._PARTITION_EOF,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.REQUEST_TIMED_OUT,
}


def _consumer(bootstrap: str, isolation_level: str, extra: Mapping[str, Any] | None) -> Consumer:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        # librdkafka insists on a group id even for assign(); a unique one keeps
        # runs from seeing each other's (never committed) offsets.
        "group.id": f"verify-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation_level,
        "fetch.wait.max.ms": 100,
    }
    config.update(extra or {})
    return Consumer(config)


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """Number of partitions the broker reports for ``topic`` (0 if unknown)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(topic, timeout=timeout)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        return 0
    return len(tmd.partitions)


def _assign_all(
    consumer: Consumer, topic: str, partitions: Sequence[int] | None, timeout: float
) -> list[int]:
    if partitions is None:
        deadline = time.monotonic() + timeout
        while True:
            md = consumer.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
            tmd = md.topics.get(topic)
            if tmd is not None and tmd.error is None and tmd.partitions:
                partitions = sorted(tmd.partitions)
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} has no partitions in metadata: {tmd}")
            time.sleep(0.1)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    return list(partitions)


def _to_record(msg: Message) -> ConsumedRecord:
    ts_type, ts = msg.timestamp()
    return ConsumedRecord(
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=msg.value(),
        headers=list(msg.headers() or []),
        timestamp_ms=ts,
        timestamp_type=ts_type,
    )


def _drain(
    bootstrap: str,
    topic: str,
    expected: int,
    partitions: Sequence[int] | None,
    timeout: float,
    grace: float,
    isolation_level: str,
    keep: bool,
    consumer_config: Mapping[str, Any] | None,
) -> tuple[int, list[ConsumedRecord]]:
    consumer = _consumer(bootstrap, isolation_level, consumer_config)
    count = 0
    records: list[ConsumedRecord] = []
    try:
        deadline = time.monotonic() + timeout
        _assign_all(consumer, topic, partitions, timeout)
        grace_end: float | None = None
        while True:
            now = time.monotonic()
            if grace_end is None and count >= expected:
                # Keep polling briefly so duplicates or strays show up as extras.
                grace_end = now + grace
            end = grace_end if grace_end is not None else deadline
            if now >= end:
                break
            for msg in consumer.consume(num_messages=10_000, timeout=min(0.2, end - now)):
                err = msg.error()
                if err is not None:
                    if err.code() in _TRANSIENT or err.retriable():
                        continue
                    raise KafkaException(err)
                count += 1
                if keep:
                    records.append(_to_record(msg))
    finally:
        consumer.close()
    return count, records


def read_records(
    bootstrap: str,
    topic: str,
    expected: int,
    *,
    partitions: Sequence[int] | None = None,
    timeout: float = 30.0,
    isolation_level: str = "read_uncommitted",
    grace: float = 1.0,
    consumer_config: Mapping[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """Read ``topic`` from offset 0 on every partition (or only ``partitions``).

    Polls until ``expected`` records arrived, then ``grace`` seconds more to
    catch extras (duplicates), or until ``timeout``. Returns whatever was read,
    in per-partition offset order, partitions interleaved; callers assert on the
    count and contents.
    """
    _, records = _drain(
        bootstrap,
        topic,
        expected,
        partitions,
        timeout,
        grace,
        isolation_level,
        True,
        consumer_config,
    )
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def count_records(
    bootstrap: str,
    topic: str,
    expected: int,
    *,
    partitions: Sequence[int] | None = None,
    timeout: float = 60.0,
    isolation_level: str = "read_uncommitted",
    grace: float = 1.0,
) -> int:
    """Like :func:`read_records` but only counts: cheap for large volumes."""
    count, _ = _drain(
        bootstrap, topic, expected, partitions, timeout, grace, isolation_level, False, None
    )
    return count


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 4,
    *,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> str:
    """Create ``name`` with ``partitions`` partitions; return once metadata shows them all."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[name]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(name, timeout=max(0.5, deadline - time.monotonic()))
        tmd = md.topics.get(name)
        if (
            tmd is not None
            and tmd.error is None
            and len(tmd.partitions) == partitions
            and all(p.leader >= 0 for p in tmd.partitions.values())
        ):
            return name
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name!r} not visible with {partitions} partitions: {tmd}")
        time.sleep(0.1)


def delete_topic(bootstrap: str, name: str, timeout: float = 15.0) -> None:
    """Best effort: drop a topic already counted (a benchmark's broker keeps its log in memory)."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)
    except Exception as exc:  # noqa: BLE001 - a leftover topic does not spoil a measurement
        print(f"    (could not delete {name}: {exc})", flush=True)


def produce_with_librdkafka(
    bootstrap: str,
    topic: str,
    records: Iterable[bytes | Mapping[str, Any]],
    *,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
) -> list[DeliveredRecord]:
    """Produce with confluent-kafka and wait for every delivery report.

    Each item is either a value (``bytes``) or a mapping of
    ``Producer.produce`` keyword arguments (``value``, ``key``, ``headers``,
    ``partition``, ``timestamp``). Raises ``KafkaException`` on the first failed
    delivery and ``TimeoutError`` if reports are missing after ``timeout``.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **(config or {})})
    delivered: list[DeliveredRecord] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(
                DeliveredRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())
            )

    sent = 0
    for item in records:
        kwargs = {"value": item} if isinstance(item, (bytes, bytearray)) else dict(item)
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)  # local queue full: let deliveries drain it
        sent += 1
        producer.poll(0)
    remaining = producer.flush(timeout)
    if errors:
        raise KafkaException(errors[0])
    if remaining or len(delivered) != sent:
        raise TimeoutError(f"{remaining} of {sent} records undelivered after {timeout}s")
    return delivered
