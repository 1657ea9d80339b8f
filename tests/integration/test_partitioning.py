"""Partition choice agrees with the Java client (keyed) and is sticky (unkeyed)."""

from __future__ import annotations

import asyncio
import random

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.engine.partitioner import murmur2, partition_for_key
from tests.support.aio import gather_within, read_back, runs
from tests.support.verify import produce_with_librdkafka


def test_murmur2_java_vector() -> None:
    # Kafka's UtilsTest: murmur2("21".getBytes()) == -973932308.
    assert murmur2(b"21") == -973932308


def _keys() -> list[bytes]:
    rand = random.Random(20240601)
    keys = [f"user-{i}".encode() for i in range(300)]
    keys += [str(i).encode() for i in range(100)]
    # Every tail length (len % 4) and bytes with the high bit set (signedness bugs).
    keys += [bytes(rand.randrange(256) for _ in range(rand.randrange(1, 40))) for _ in range(200)]
    keys += ["ключ-ü-名".encode(), b"\xff" * 7, b"\x80", b"a", b"ab", b"abc", b"abcd"]
    return list(dict.fromkeys(keys))


@pytest.mark.asyncio
async def test_keyed_partitioning_matches_librdkafka_murmur2(
    kafka_bootstrap: str, topic_factory
) -> None:
    partitions = 7
    ours = topic_factory(partitions)
    theirs = topic_factory(partitions)
    keys = _keys()

    async with Producer(kafka_bootstrap, linger_ms=5) as p:
        futs = [await p.enqueue(ours, b"x", key=k) for k in keys]
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results)
    ours_by_key = {k: md.partition for k, md in zip(keys, results)}

    # murmur2_random is librdkafka's Java-compatible partitioner.
    delivered = await asyncio.to_thread(
        produce_with_librdkafka,
        kafka_bootstrap,
        theirs,
        [{"key": k, "value": b"x"} for k in keys],
        config={"partitioner": "murmur2_random"},
    )
    theirs_by_key = {d.key: d.partition for d in delivered}
    assert len(theirs_by_key) == len(keys)

    mismatches = [k for k in keys if ours_by_key[k] != theirs_by_key[k]]
    assert not mismatches, mismatches[:5]
    assert len(set(ours_by_key.values())) == partitions
    # The broker holds our records where the metadata said.
    got = await read_back(kafka_bootstrap, ours, expected=len(keys))
    assert {r.key: r.partition for r in got} == ours_by_key
    assert all(partition_for_key(k, partitions) == ours_by_key[k] for k in keys)


@pytest.mark.asyncio
async def test_unkeyed_records_stick_to_a_partition_per_batch(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(8)
    n = 400
    value = b"v" * 100
    # ~8 records fill a 1 KiB batch; the long linger keeps batches from being
    # sent for age, so a full batch is what moves the sticky partition on.
    async with Producer(kafka_bootstrap, batch_size=1024, linger_ms=1000) as p:
        futs = [await p.enqueue(topic, value + str(i).encode()) for i in range(n)]
        await p.flush(timeout=30)
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results)

    groups = runs(results)
    assert len({md.partition for md in results}) >= 3, "unkeyed records should spread"
    # A run of records on one partition is one batch: consecutive offsets.
    for group in groups:
        first = group[0].offset
        assert [md.offset for md in group] == list(range(first, first + len(group)))
    # Runs are cut short only when the sender takes a partition's batch early
    # (it drains every partition of a ready broker, as the Java client does);
    # otherwise a run fills its batch. One record per run would mean no stickiness.
    in_long_runs = sum(len(g) for g in groups if len(g) >= 4)
    assert in_long_runs >= 0.75 * n, [(g[0].partition, len(g)) for g in groups]
    assert len(groups) <= n // 4

    got = await read_back(kafka_bootstrap, topic, expected=n)
    assert len(got) == n
    assert {(r.partition, r.offset) for r in got} == {(md.partition, md.offset) for md in results}


@pytest.mark.asyncio
async def test_custom_partitioner_and_explicit_partition(
    kafka_bootstrap: str, topic_factory
) -> None:
    """A custom callable decides unless the record names its partition."""
    topic = topic_factory(5)
    calls: list[tuple[str, bytes | None, int, tuple[int, ...]]] = []

    def last_byte(topic_: str, key: bytes | None, num_partitions: int, available) -> int:  # type: ignore[no-untyped-def]
        calls.append((topic_, key, num_partitions, tuple(available)))
        return (key[-1] if key else 0) % num_partitions

    async with Producer(kafka_bootstrap, partitioner=last_byte) as p:
        mds = await gather_within([p.send(topic, b"v", key=bytes([i])) for i in range(10)], 30)
        explicit = await p.send(topic, b"pinned", key=b"\x01", partition=4)
    assert [md.partition for md in mds] == [i % 5 for i in range(10)]
    assert explicit.partition == 4
    assert len(calls) == 10 and all(c[0] == topic and c[2] == 5 for c in calls)
    back = await read_back(kafka_bootstrap, topic, 11)
    by_value = {(r.key, r.partition) for r in back if r.value == b"v"}
    assert by_value == {(bytes([i]), i % 5) for i in range(10)}
