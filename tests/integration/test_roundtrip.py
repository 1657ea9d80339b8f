"""What aioproducer writes is what librdkafka reads back: keys, values, headers, timestamps."""

from __future__ import annotations

import asyncio
import time

import pytest

from aioproducer import Producer, RecordMetadata
from tests.support.aio import count_back, gather_within, read_back, within
from tests.support.verify import TIMESTAMP_CREATE_TIME, partition_count

pytestmark = pytest.mark.asyncio

BASE_TS = 1_700_000_000_000


def _cases() -> list[dict]:
    """One record per shape worth checking; each has a distinct timestamp to find it by."""
    return [
        {"key": b"plain", "value": b"value", "headers": [("h", b"x")]},
        {"key": None, "value": b"null key"},
        {"key": b"tombstone", "value": None},
        {"key": None, "value": None},
        {"key": b"", "value": b""},
        {"key": b"\x00\xff\x80binary", "value": bytes(range(256))},
        {
            "key": b"headers",
            "value": b"many headers",
            "headers": [
                ("h", b"first"),
                ("h", b"duplicate name keeps order"),
                ("ünïcødé-名前", "värde".encode()),
                ("empty", b""),
                ("null-value", None),
                ("", b"empty name"),
            ],
        },
        {"key": b"no-headers-list", "value": b"v", "headers": []},
        {"key": bytearray(b"bytearray key"), "value": memoryview(b"memoryview value")},
        {"key": b"large", "value": b"L" * 200_000},
        {"key": "ключ".encode(), "value": "значение".encode()},
    ]


async def test_key_value_headers_timestamps_round_trip(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(3)
    cases = _cases()
    async with Producer(kafka_bootstrap, linger_ms=20) as p:
        futs = []
        for i, case in enumerate(cases):
            futs.append(
                await p.enqueue(
                    topic,
                    case["value"],
                    key=case["key"],
                    headers=case.get("headers"),
                    partition=i % 3,
                    timestamp_ms=BASE_TS + i,
                )
            )
        # One more without an explicit timestamp: the producer stamps the send time.
        before = int(time.time() * 1000)
        now_md = await within(p.send(topic, b"now", key=b"now", partition=1), 30, "send")
        after = int(time.time() * 1000)
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results), results

    got = await read_back(kafka_bootstrap, topic, expected=len(cases) + 1)
    assert len(got) == len(cases) + 1
    by_position = {(r.partition, r.offset): r for r in got}

    for i, (case, md) in enumerate(zip(cases, results)):
        assert md.topic == topic
        assert md.partition == i % 3
        assert md.timestamp_ms == BASE_TS + i
        key = None if case["key"] is None else bytes(case["key"])
        value = None if case["value"] is None else bytes(case["value"])
        assert md.serialized_key_size == (-1 if key is None else len(key))
        assert md.serialized_value_size == (-1 if value is None else len(value))
        # The metadata's (partition, offset) must point at exactly this record.
        rec = by_position[(md.partition, md.offset)]
        assert rec.topic == topic
        assert rec.key == key, i
        assert rec.value == value, i
        assert rec.headers == list(case.get("headers") or []), i
        assert rec.timestamp_ms == BASE_TS + i
        assert rec.timestamp_type == TIMESTAMP_CREATE_TIME

    assert before <= now_md.timestamp_ms <= after
    rec = by_position[(now_md.partition, now_md.offset)]
    assert (rec.key, rec.value, rec.timestamp_ms) == (b"now", b"now", now_md.timestamp_ms)

    # Offsets are dense per partition and match what the broker holds.
    for part in range(3):
        offsets = sorted(r.offset for r in got if r.partition == part)
        assert offsets == list(range(len(offsets)))


async def test_per_key_order_is_preserved(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(4)
    keys = [f"key-{k}".encode() for k in range(24)]
    per_key = 60
    # Small batches and no linger: many batches and requests in flight at once.
    async with Producer(kafka_bootstrap, batch_size=512, linger_ms=0) as p:
        sent: list[tuple[bytes, int, asyncio.Future[RecordMetadata]]] = []
        for seq in range(per_key):
            for key in keys:
                fut = await p.enqueue(topic, f"{key.decode()}:{seq}".encode(), key=key)
                sent.append((key, seq, fut))
            if seq % 10 == 0:
                await asyncio.sleep(0)  # let the sender interleave with appends
        results = await gather_within([f for _, _, f in sent], 60, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results)

    partitions_used = {md.partition for md in results}
    assert len(partitions_used) > 1, "keys should spread over several partitions"
    # Send order per key == offset order per key, on one partition.
    last: dict[bytes, RecordMetadata] = {}
    for (key, _seq, _), md in zip(sent, results):
        prev = last.get(key)
        if prev is not None:
            assert md.partition == prev.partition
            assert md.offset > prev.offset
        last[key] = md

    got = await read_back(kafka_bootstrap, topic, expected=len(sent), timeout=60)
    assert len(got) == len(sent)
    seen: dict[bytes, list[tuple[int, int, int]]] = {}
    for rec in got:  # sorted by (partition, offset)
        name, seq = rec.value.decode().split(":")
        assert rec.key == name.encode()
        seen.setdefault(rec.key, []).append((rec.partition, rec.offset, int(seq)))
    for key in keys:
        rows = seen[key]
        assert len({part for part, _, _ in rows}) == 1
        assert [seq for _, _, seq in rows] == list(range(per_key)), key


async def test_from_config_java_names_and_many_concurrent_sends(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(4)
    p = Producer.from_config(
        {
            "bootstrap.servers": kafka_bootstrap,
            "client.id": "java-props",
            "acks": "all",
            "linger.ms": "5",
            "batch.size": "32768",
            "compression.type": "lz4",
            "max.in.flight.requests.per.connection": "5",
            "request.timeout.ms": "10000",
            "delivery.timeout.ms": "60000",
            "retries": "10",
            "enable.idempotence": "false",
            "max.block.ms": "10000",
        }
    )
    assert p.config.linger_ms == 5 and p.config.batch_size == 32768
    assert p.config.compression == "lz4" and p.config.client_id == "java-props"
    n = 1000
    async with p:
        assert await within(p.partitions_for(topic), 10) == [0, 1, 2, 3]

        async def one(i: int) -> RecordMetadata:
            return await p.send(topic, f"value-{i}".encode(), key=f"k{i % 97}".encode())

        results = await gather_within([one(i) for i in range(n)], 60, "concurrent sends")
    failures = [r for r in results if not isinstance(r, RecordMetadata)]
    assert not failures, failures[:3]
    assert len({(md.partition, md.offset) for md in results}) == n

    got = await read_back(kafka_bootstrap, topic, expected=n, timeout=60)
    assert sorted(r.value for r in got) == sorted(f"value-{i}".encode() for i in range(n))
    assert partition_count(kafka_bootstrap, topic) == 4


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks_levels_deliver(kafka_bootstrap: str, topic_factory, acks) -> None:
    topic = topic_factory(2)
    n = 300
    # A new topic's partitions may not be ready on the broker although the metadata names
    # their leader: an acks=1/all request is then retried, but the broker drops an acks=0
    # request that fails (it closes the connection without an answer, by design), and all
    # its records are lost. One acknowledged record per partition first proves both ready.
    warm = 2
    async with Producer(kafka_bootstrap, acks="all") as p:
        for partition in range(warm):
            await p.send(topic, b"warm-up", partition=partition)
    async with Producer(kafka_bootstrap, acks=acks, linger_ms=2, batch_size=2048) as p:
        futs = [await p.enqueue(topic, f"a{acks}-{i}".encode()) for i in range(n)]
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    if acks == 0:
        # The broker never answers acks=0, so no offset is known.
        assert {md.offset for md in results} == {-1}
    else:
        assert all(md.offset >= 0 for md in results)
        assert len({(md.partition, md.offset) for md in results}) == n
    # acks=0 gets no confirmation, so the verifier is the only proof of delivery.
    assert await count_back(kafka_bootstrap, topic, expected=n + warm, timeout=30) == n + warm
