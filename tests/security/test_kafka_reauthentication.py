"""KIP-368 against Apache Kafka: 30 s of idempotent streaming across many re-authentications.

The REAUTH listener sets ``connections.max.reauth.ms`` to 3 s, so Kafka
announces a 3 s session lifetime in every SaslAuthenticate answer and closes a
connection that sends anything but SaslHandshake once its session expired. The
producer re-authenticates on the same connection, at 85-95% of the lifetime,
before the next request (as Java's client does), holding requests meanwhile.
Every record must be acknowledged and stored once, in order per key, read back
with confluent-kafka; the connection must survive every renewal.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from aioproducer import Producer, RecordMetadata
from tests.support.aio import gather_within, read_back, within
from tests.support.secure_kafka import REAUTH_MS, SecureKafka

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

STREAM_SECONDS = 30.0
KEYS = 12
PARTITIONS = 4


def metric(producer: Producer, name: str) -> float:
    (value,) = [
        v for m, v in producer.metrics().items() if m.name == name and m.group == "producer-metrics"
    ]
    return value


async def test_idempotent_stream_across_reauthentications(
    secure_kafka: SecureKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer.sasl")
    topic = secure_kafka.topic(PARTITIONS)
    settings = secure_kafka.producer_settings(
        "REAUTH",
        "SCRAM-SHA-512",
        enable_idempotence=True,
        linger_ms=5,
        max_in_flight_requests_per_connection=5,
    )
    producer = Producer(**settings)
    await within(producer.start(), 30, "start")
    sent: dict[bytes, list[bytes]] = {}
    futures: list[asyncio.Future[RecordMetadata]] = []
    try:
        # Warm up: a record per key, so every partition's connection is open.
        for i in range(KEYS):
            key = f"k{i}".encode()
            sent[key] = [f"v{i}".encode()]
            futures.append(await producer.enqueue(topic, sent[key][0], key=key))
        await gather_within(futures, 30, "warm-up")
        opened = metric(producer, "connection-creation-total")
        caplog.clear()
        deadline = time.monotonic() + STREAM_SECONDS
        i = KEYS
        while time.monotonic() < deadline:
            for _ in range(10):
                key, value = f"k{i % KEYS}".encode(), f"v{i}".encode()
                sent[key].append(value)
                futures.append(await producer.enqueue(topic, value, key=key))
                i += 1
            await asyncio.sleep(0.02)
        results = await gather_within(futures, 60, "delivery")
        reopened = metric(producer, "connection-creation-total") - opened
    finally:
        await within(producer.close(), 30, "close")
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert not failed, failed[:3]
    # Renewed every 2.55-2.85 s: about ten times in 30 s.
    where = secure_kafka.address("REAUTH")
    renewals = [
        r
        for r in caplog.records
        if "re-authenticated" in r.getMessage() and where in r.getMessage()
    ]
    assert len(renewals) >= STREAM_SECONDS * 1000 / REAUTH_MS / 2, len(renewals)
    # No session expired: Kafka would have closed the connection.
    assert reopened == 0, f"{reopened} connections opened while streaming"
    records = await read_back(secure_kafka.admin_bootstrap, topic, len(futures), timeout=60)
    assert len(records) == len(futures), f"{len(records)} stored, {len(futures)} sent"
    for key, values in sent.items():
        assert [r.value for r in records if r.key == key] == values, key
