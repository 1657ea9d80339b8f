"""The bulk path against the broker, read back with librdkafka (confluent-kafka)."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pyarrow as pa
import pytest

from aioproducer import Producer
from aioproducer.engine.partitioner import partition_for_key
from tests.support.aio import read_back, within
from tests.support.verify import produce_with_librdkafka, read_records

pytestmark = pytest.mark.asyncio


async def test_keyed_bulk_records_land_where_java_puts_them_in_order_with_headers(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(5)
    n = 3000
    keys = [b"user-%d" % (i % 101) for i in range(n)]
    values = [b"event-%06d" % i for i in range(n)]
    headers = [[("seq", b"%d" % i)] for i in range(n)]
    async with Producer(kafka_bootstrap, linger_ms=5, batch_size=8192) as p:
        result = await within(
            p.send_many(topic, values, keys=keys, headers=headers), 60, "send_many"
        )
    got = await read_back(kafka_bootstrap, topic, expected=n)
    assert len(got) == n
    by_place = {(r.partition, r.offset): r for r in got}
    for i in range(n):
        md = result[i]
        assert md.partition == partition_for_key(keys[i], 5)  # Java's murmur2 partition
        rec = by_place[(md.partition, md.offset)]
        assert (rec.key, rec.value, rec.headers) == (keys[i], values[i], headers[i])
    # Per key, the broker's order is the call's order.
    per_key: dict[bytes, list[int]] = defaultdict(list)
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        per_key[r.key].append(int(r.value.split(b"-")[1]))  # type: ignore[union-attr]
    assert all(seq == sorted(seq) for seq in per_key.values())


async def test_unkeyed_arrow_bulk_is_delivered_once_each_with_idempotence(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(3)
    n = 20_000
    values = pa.array([b"%07d" % i + b"." * 93 for i in range(n)], pa.binary())
    async with Producer(kafka_bootstrap, linger_ms=5, compression="lz4") as p:
        assert p.config.idempotent
        futures = [await p.enqueue_many(topic, values.slice(i, 5000)) for i in range(0, n, 5000)]
        await within(p.flush(), 60, "flush")
        results = [f.result() for f in futures]
    got = await read_back(kafka_bootstrap, topic, expected=n)
    assert sorted(r.value for r in got) == sorted(values.to_pylist())  # each exactly once
    by_place = {(r.partition, r.offset): r.value for r in got}
    for k, result in enumerate(results):
        for i in (0, 1234, 4999):
            md = result[i]
            assert by_place[(md.partition, md.offset)] == values[k * 5000 + i].as_py()


async def test_arrow_key_column_lands_where_librdkafka_murmur2_puts_each_key(
    kafka_bootstrap: str, topic_factory
) -> None:
    # librdkafka's "murmur2_random" is its Java-compatible partitioner: an
    # independent murmur2 to check the vectorized one against.
    bulk_topic, rdkafka_topic = topic_factory(7), topic_factory(7)
    n = 5000
    keys = [f"ключ-{i}-{'x' * (i % 11)}" for i in range(n)]
    values = [b"%05d" % i for i in range(n)]
    key_column = pa.array(keys, pa.string())
    async with Producer(kafka_bootstrap, linger_ms=5) as p:
        futures = [
            await p.enqueue_many(
                bulk_topic, pa.array(values[i : i + 2500]), keys=key_column.slice(i, 2500)
            )
            for i in (0, 2500)
        ]
        await within(p.flush(), 60, "flush")
        assert all(f.result().errors == {} for f in futures)
    produce_with_librdkafka(
        kafka_bootstrap,
        rdkafka_topic,
        [{"key": k.encode(), "value": v} for k, v in zip(keys, values)],
        config={"partitioner": "murmur2_random"},
    )
    ours = await read_back(kafka_bootstrap, bulk_topic, expected=n)
    theirs = await read_back(kafka_bootstrap, rdkafka_topic, expected=n)
    assert len(ours) == len(theirs) == n
    where = {r.key: r.partition for r in theirs}
    assert len(set(where.values())) == 7
    for r in ours:
        assert r.key is not None and r.value is not None
        assert keys[int(r.value)].encode() == r.key
        assert r.partition == where[r.key]


async def test_bulk_in_a_committed_transaction(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(3)
    async with Producer(kafka_bootstrap, transactional_id=f"bulk-{uuid.uuid4().hex[:8]}") as p:
        await within(p.init_transactions(), 30, "init_transactions")
        async with p.transaction():
            fut = await p.enqueue_many(
                topic, [b"t%d" % i for i in range(500)], keys=[b"%d" % i for i in range(500)]
            )
        assert fut.done() and len(fut.result()) == 500  # commit flushed them
    records = read_records(kafka_bootstrap, topic, 500, isolation_level="read_committed")
    assert sorted(r.value for r in records) == sorted(b"t%d" % i for i in range(500))
