"""Real clients against the mock cluster: what they produce is what records() shows.

librdkafka (confluent-kafka, idempotent, every codec; transactional), aiokafka
and aioproducer each write records with chosen keys, values, headers,
timestamps and partitions; the tests compare them field by field with what
the mock stored. The blocking confluent-kafka calls run in a worker thread so
the event loop keeps serving the mock brokers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import confluent_kafka
import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import MockRecord
from tests.support.extras import require

T0 = 1_700_000_000_000
TIMEOUT = 20.0


def _expected(n: int, partitions: int) -> list[dict[str, Any]]:
    return [
        {
            "partition": i % partitions,
            "key": b"k%d" % i,
            "value": b"v%d" % i * (i + 1),
            "headers": [("h", b"%d" % i), ("null", None)],
            "timestamp_ms": T0 + i,
        }
        for i in range(n)
    ]


def _check(records: list[MockRecord], expected: list[dict[str, Any]]) -> None:
    got = sorted(
        ((r.partition, r.key, r.value, r.headers, r.timestamp_ms) for r in records), key=str
    )
    want = sorted(
        ((e["partition"], e["key"], e["value"], e["headers"], e["timestamp_ms"]) for e in expected),
        key=str,
    )
    assert got == want
    for partition in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(len(offsets)))


def _librdkafka_produce(
    bootstrap: str, topic: str, expected: list[dict[str, Any]], conf: dict[str, Any]
) -> list[Any]:
    errors: list[Any] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for e in expected:
        producer.produce(
            topic,
            e["value"],
            e["key"],
            partition=e["partition"],
            timestamp=e["timestamp_ms"],
            headers=e["headers"],
            on_delivery=lambda err, _msg: errors.append(err),
        )
    left = producer.flush(TIMEOUT)
    assert left == 0, f"{left} messages not delivered"
    return errors


@pytest.mark.asyncio
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_librdkafka_idempotent_each_codec(codec: str) -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("lib", partitions=3)
        expected = _expected(30, 3)
        conf = {"enable.idempotence": True, "compression.type": codec}
        errors = await asyncio.wait_for(
            asyncio.to_thread(
                _librdkafka_produce, cluster.bootstrap_servers, "lib", expected, conf
            ),
            TIMEOUT + 5,
        )
        assert errors == [None] * 30
        records = cluster.records("lib")
        _check(records, expected)
        assert len({r.producer_id for r in records}) == 1 and records[0].producer_id >= 0
        for partition in range(3):
            seqs = [r.sequence for r in records if r.partition == partition]
            assert seqs == list(range(10))  # idempotent: contiguous from 0 per partition
        assert cluster.request_count(22) >= 1  # InitProducerId


def _librdkafka_transactions(bootstrap: str) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "fidelity-txn",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("txn", b"keep-%d" % i, partition=i % 2)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn", b"drop-%d" % i, partition=i % 2)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)


@pytest.mark.asyncio
async def test_librdkafka_transactions_commit_visible_abort_hidden() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("txn", partitions=2)
        await asyncio.wait_for(
            asyncio.to_thread(_librdkafka_transactions, cluster.bootstrap_servers), 4 * TIMEOUT
        )
        visible = cluster.records("txn")
        assert sorted(r.value for r in visible) == [b"keep-%d" % i for i in range(4)]
        assert all(r.transactional for r in visible)
        everything = cluster.records("txn", include_uncommitted=True)
        assert sorted(r.value for r in everything if r.value.startswith(b"drop")) == [
            b"drop-0",
            b"drop-1",
            b"drop-2",
        ]
        # Each EndTxn wrote a marker per partition: the aborted records come after one.
        assert [r.offset for r in everything if r.partition == 0] == [0, 1, 3, 4]
        assert cluster.request_count(26) == 2  # EndTxn: one commit, one abort
        assert cluster.request_count(24) >= 2  # AddPartitionsToTxn


@pytest.mark.asyncio
async def test_aiokafka_records_match() -> None:
    aiokafka = require("aiokafka", extra="bench")
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("aio", partitions=2)
        expected = _expected(12, 2)
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True
        )
        await asyncio.wait_for(producer.start(), TIMEOUT)
        try:
            futures = [
                await producer.send(
                    "aio",
                    e["value"],
                    key=e["key"],
                    partition=e["partition"],
                    timestamp_ms=e["timestamp_ms"],
                    headers=e["headers"],
                )
                for e in expected
            ]
            metadata = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        finally:
            await asyncio.wait_for(producer.stop(), TIMEOUT)
        records = cluster.records("aio")
        _check(records, expected)
        stored = {(r.partition, r.offset): r.value for r in records}
        assert [stored[(m.partition, m.offset)] for m in metadata] == [e["value"] for e in expected]


@pytest.mark.asyncio
async def test_aiokafka_transaction() -> None:
    aiokafka = require("aiokafka", extra="bench")
    async with MockCluster(brokers=1) as cluster:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, transactional_id="aio-txn"
        )
        await asyncio.wait_for(producer.start(), TIMEOUT)
        try:
            async with producer.transaction():
                await asyncio.wait_for(
                    producer.send_and_wait("auto", b"in-txn", partition=0), TIMEOUT
                )
        finally:
            await asyncio.wait_for(producer.stop(), TIMEOUT)
        (record,) = cluster.records("auto")  # auto-created with the default partitions
        assert (record.value, record.transactional, record.partition) == (b"in-txn", True, 0)
        assert cluster.partitions("auto") == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_aioproducer_send_records_match() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("own", partitions=3)
        expected = _expected(9, 3)
        async with Producer(cluster.bootstrap_servers, linger_ms=1) as producer:
            metadata = await asyncio.wait_for(
                asyncio.gather(
                    *[
                        producer.send(
                            "own",
                            e["value"],
                            key=e["key"],
                            partition=e["partition"],
                            timestamp_ms=e["timestamp_ms"],
                            headers=e["headers"],
                        )
                        for e in expected
                    ]
                ),
                TIMEOUT,
            )
        records = cluster.records("own")
        _check(records, expected)
        stored = {(r.partition, r.offset): r for r in records}
        for md, e in zip(metadata, expected):
            assert (md.topic, md.partition) == ("own", e["partition"])
            assert stored[(md.partition, md.offset)].value == e["value"]
        # Idempotence is on by default (Java semantics): one producer id, sequences from 0.
        assert {r.producer_id for r in records} != {-1}
        assert sorted(r.sequence for r in records if r.partition == 0) == [0, 1, 2]
