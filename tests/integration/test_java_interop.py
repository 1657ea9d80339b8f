"""Java reads what aioproducer writes: Apache Kafka's own KafkaConsumer as the reader.

Every record is read back with Java's ``KafkaConsumer`` (CRC checked, every
codec decoded by the reference implementation, control records handled per
``isolation.level``) and compared field by field with what was sent and with
the ``RecordMetadata`` the producer reported. Keyed partitioning is compared
with the partition Java itself computes. These tests need the Kafka jars and a
JDK; they run on the session's Apache Kafka broker.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from aioproducer import Producer, RecordMetadata
from tests.support.aio import gather_within, within
from tests.support.java_read import java_key_partitions, java_programs, java_read_records
from tests.support.javac import JavaProgram, skip_or_fail
from tests.support.kafka_broker import KafkaJarsUnavailable
from tests.support.verify import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, ConsumedRecord

pytestmark = pytest.mark.asyncio

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
Headers = list[tuple[str, bytes | None]]


@pytest.fixture(scope="session")
def java_reader() -> JavaProgram:
    """The Java read-back programs, compiled once per session (reused while up to date)."""
    try:
        return java_programs()
    except KafkaJarsUnavailable as exc:  # or JavaToolsUnavailable: no JDK
        skip_or_fail(exc)


async def java_read(
    bootstrap: str, topic: str, expected: int, **kwargs: Any
) -> list[ConsumedRecord]:
    # The JVM blocks; a thread keeps the event loop (and any open producer) running.
    return await asyncio.to_thread(java_read_records, bootstrap, topic, expected, **kwargs)


class Sent:
    """Records as sent, one list per field, so per-record and bulk sends share the checks."""

    def __init__(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Headers] = []
        self.timestamps: list[int | None] = []

    def add(self, key: bytes | None, value: bytes | None, headers: Headers, ts: int | None) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.timestamps.append(ts)


def mixed_records(n: int, seed: str, explicit_ts: bool = True) -> Sent:
    """Keys and values null or not, empty or not; headers with null values; timestamps."""
    rand = random.Random(seed)
    sent = Sent()
    base_ts = 1_600_000_000_000  # 2020-09-13: far from "now", so a lost timestamp shows
    for i in range(n):
        key = None if i % 5 == 0 else (b"" if i % 17 == 0 else b"key-%d" % (i % 23))
        if i % 7 == 0:
            value = None
        elif i % 13 == 0:
            value = b""
        else:
            # Compressible text and random bytes, so every codec has work on both.
            value = f"value {i:05d} ".encode() * rand.randrange(1, 40) + rand.randbytes(
                rand.randrange(64)
            )
        headers: Headers = []
        if i % 3 == 0:
            headers = [("trace", b"%d" % i), ("nothing", None), ("ü-名", b"\x00\xff")]
        elif i % 3 == 1:
            headers = [("only-null", None)]
        ts = (base_ts + i * 1000) if explicit_ts and i % 4 != 3 else None
        sent.add(key, value, headers, ts)
    return sent


def check_read_back(
    got: Sequence[ConsumedRecord],
    sent: Sent,
    metadata: Sequence[RecordMetadata],
    t_before: int,
    t_after: int,
) -> None:
    """Each record read by Java is where its metadata says, with every field as sent."""
    assert len(got) == len(sent.values), f"Java read {len(got)} records of {len(sent.values)}"
    by_place = {(r.partition, r.offset): r for r in got}
    assert len(by_place) == len(got)
    for i, md in enumerate(metadata):
        rec = by_place.get((md.partition, md.offset))
        assert rec is not None, f"record {i} not at {md.partition}/{md.offset}"
        assert rec.key == sent.keys[i], i
        assert rec.value == sent.values[i], i
        assert rec.headers == sent.headers[i], i
        assert rec.timestamp_type == TIMESTAMP_CREATE_TIME, i
        if sent.timestamps[i] is not None:
            assert rec.timestamp_ms == sent.timestamps[i], i
        else:
            assert t_before <= rec.timestamp_ms <= t_after, (i, rec.timestamp_ms)
        assert rec.timestamp_ms == md.timestamp_ms, i


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("codec", CODECS)
async def test_per_record_path_is_read_back_by_java(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram, codec: str
) -> None:
    topic = topic_factory(3)
    sent = mixed_records(900, codec)
    t_before = now_ms()
    # 128 KiB batches and a long linger: big batches (compressed off the event
    # loop past 64 KiB) beside the small ones the null-key partition fills.
    async with Producer(
        kafka_bootstrap, compression=codec, batch_size=128 * 1024, linger_ms=200
    ) as p:
        futures = [
            await p.enqueue(topic, v, key=k, headers=h, timestamp_ms=ts)
            for k, v, h, ts in zip(sent.keys, sent.values, sent.headers, sent.timestamps)
        ]
        await within(p.flush(), 60, "flush")
        metadata = await gather_within(futures, 30, "sends")
    t_after = now_ms()
    got = await java_read(kafka_bootstrap, topic, len(futures))
    check_read_back(got, sent, metadata, t_before, t_after)


@pytest.mark.parametrize("codec", CODECS)
async def test_bulk_path_is_read_back_by_java(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram, codec: str
) -> None:
    topic = topic_factory(3)
    lists = mixed_records(700, f"bulk-{codec}")
    arrow = mixed_records(500, f"arrow-{codec}", explicit_ts=False)
    t_before = now_ms()
    async with Producer(
        kafka_bootstrap, compression=codec, batch_size=64 * 1024, linger_ms=20
    ) as p:
        # Lists with per-record headers and timestamps (null keys, values and header values) ...
        lists.timestamps = [ts if ts is not None else now_ms() for ts in lists.timestamps]
        listed = await within(
            p.send_many(
                topic,
                lists.values,
                keys=lists.keys,
                headers=lists.headers,
                timestamp_ms=lists.timestamps,
            ),
            60,
            "send_many",
        )
        # ... and Arrow columns through enqueue_many, one headers list for every record.
        shared: Headers = [("batch", b"arrow"), ("null", None)]
        futures = [
            await p.enqueue_many(
                topic,
                pa.array(arrow.values[i : i + 200], pa.binary()),
                keys=pa.array(arrow.keys[i : i + 200], pa.binary()),
                headers=shared,
            )
            for i in range(0, 500, 200)
        ]
        await within(p.flush(), 60, "flush")
        arrowed = [md for f in futures for md in (f.result()[j] for j in range(len(f.result())))]
    t_after = now_ms()
    arrow.headers = [shared] * 500
    both = Sent()
    for part in (lists, arrow):
        for row in zip(part.keys, part.values, part.headers, part.timestamps):
            both.add(*row)
    metadata = [listed[i] for i in range(len(listed))] + arrowed
    got = await java_read(kafka_bootstrap, topic, 1200)
    check_read_back(got, both, metadata, t_before, t_after)


async def test_log_append_time_topic_is_read_back_with_the_brokers_time(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram
) -> None:
    topic = topic_factory(1, config={"message.timestamp.type": "LogAppendTime"})
    t_before = now_ms()
    async with Producer(kafka_bootstrap, compression="lz4") as p:
        metadata = [await p.send(topic, b"v%d" % i, timestamp_ms=1_000 + i) for i in range(20)]
    t_after = now_ms()
    got = await java_read(kafka_bootstrap, topic, 20)
    assert [r.value for r in got] == [b"v%d" % i for i in range(20)]
    for rec, md in zip(got, metadata):
        assert rec.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        assert t_before <= rec.timestamp_ms <= t_after
        # The producer reports the broker's append time (KIP-32), as Java's does.
        assert md.timestamp_ms == rec.timestamp_ms


def _tid() -> str:
    return f"java-interop-{uuid.uuid4().hex[:10]}"


async def test_transactions_read_committed_and_uncommitted_by_java(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram
) -> None:
    topic = topic_factory(3)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    async with Producer(
        kafka_bootstrap, transactional_id=_tid(), compression="zstd", linger_ms=5
    ) as p:
        await p.init_transactions()
        async with p.transaction():
            for i in range(100):
                await p.send(topic, b"c1-%d" % i, key=b"k%d" % (i % 9))
                committed.append(b"c1-%d" % i)
        await p.begin_transaction()
        aborted += [b"a-%d" % i for i in range(150)]
        await p.send_many(topic, aborted[:100], keys=[b"k%d" % (i % 9) for i in range(100)])
        for v in aborted[100:]:
            await p.enqueue(topic, v)
        await within(p.flush(), 30, "flush")
        await p.abort_transaction()
        async with p.transaction():
            values = [b"c2-%d" % i for i in range(200)]
            await p.send_many(topic, values, headers=[("txn", None)])
            committed += values
    got = await java_read(
        kafka_bootstrap, topic, len(committed), isolation_level="read_committed", grace=2.0
    )
    assert sorted(r.value or b"" for r in got) == sorted(committed)
    everything = await java_read(
        kafka_bootstrap, topic, len(committed) + len(aborted), isolation_level="read_uncommitted"
    )
    assert sorted(r.value or b"" for r in everything) == sorted(committed + aborted)
    # Control records (commit/abort markers) take offsets but are never returned.
    by_partition: dict[int, list[int]] = {}
    for r in everything:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert any(offsets != list(range(len(offsets))) for offsets in by_partition.values())


@pytest.mark.slow  # three Java reads
async def test_open_transaction_is_invisible_to_read_committed_until_commit(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram
) -> None:
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"before")
        await p.begin_transaction()
        await p.send(topic, b"pending")  # acknowledged, but its transaction is open
        during = await java_read(
            kafka_bootstrap, topic, 1, isolation_level="read_committed", grace=2.0
        )
        dirty = await java_read(kafka_bootstrap, topic, 2, isolation_level="read_uncommitted")
        await p.commit_transaction()
    after = await java_read(kafka_bootstrap, topic, 2, isolation_level="read_committed")
    assert [r.value for r in during] == [b"before"]
    assert [r.value for r in dirty] == [b"before", b"pending"]
    assert [r.value for r in after] == [b"before", b"pending"]


def random_keys(n: int, seed: int) -> list[bytes]:
    """Random bytes of random lengths, the empty key among them, every tail length (len % 4)."""
    rand = random.Random(seed)
    keys = [b""]
    while len(keys) < n:
        length = rand.choice((rand.randrange(0, 8), rand.randrange(8, 64), rand.randrange(64, 300)))
        keys.append(rand.randbytes(length))
    return keys


async def test_key_partitions_equal_javas_for_random_keys(
    kafka_bootstrap: str, topic_factory, java_reader: JavaProgram
) -> None:
    partitions = 7
    topic = topic_factory(partitions)
    keys = random_keys(10_000, 20_240_611)
    async with Producer(kafka_bootstrap, linger_ms=20) as p:
        futures = [await p.enqueue(topic, b"", key=k) for k in keys]
        per_record = [md.partition for md in await gather_within(futures, 60, "sends")]
        bulk = await within(p.send_many(topic, [b""] * len(keys), keys=keys), 60, "send_many")
        arrow = await within(
            p.send_many(
                topic, pa.array([b""] * len(keys), pa.binary()), keys=pa.array(keys, pa.binary())
            ),
            60,
            "send_many (Arrow keys)",
        )
    count, java = await asyncio.to_thread(java_key_partitions, kafka_bootstrap, topic, keys)
    assert count == partitions
    assert set(java) == set(range(partitions))
    for name, ours in (
        ("enqueue", per_record),
        ("send_many", [bulk[i].partition for i in range(len(keys))]),
        ("send_many with Arrow keys", [arrow[i].partition for i in range(len(keys))]),
    ):
        wrong = [
            (keys[i][:12].hex(), len(keys[i]), ours[i], java[i])
            for i in range(len(keys))
            if ours[i] != java[i]
        ]
        assert not wrong, f"{name}: {len(wrong)} keys differ from Java, first {wrong[:3]}"
