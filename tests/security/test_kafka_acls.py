"""Kafka's StandardAuthorizer: refusals are typed, fast and not retried; grants deliver.

The users and the ACLs made at start are in tests/support/secure_kafka.py:
``bob`` may write only ``bob-*`` topics (enough for an idempotent producer
id, KIP-679), ``carol`` nothing, ``alice`` ``ok-*`` topics and transactional
ids ``alice-tx-*``. Each refusal must come long before the 120 s delivery
timeout, after a handful of requests, not a retry storm.
"""

from __future__ import annotations

import time
import uuid

import pytest

from aioproducer import Producer, RecordMetadata, errors
from tests.support.aio import gather_within, read_back, within
from tests.support.secure_kafka import SecureKafka

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

DELIVERY_TIMEOUT_MS = 120_000
FAST_S = 10.0  # a refusal must come well within this (the delivery timeout is 120 s)


def requests_sent(producer: Producer) -> float:
    """Every request the producer sent to any broker (producer-metrics request-total)."""
    (total,) = [
        v
        for m, v in producer.metrics().items()
        if m.name == "request-total" and m.group == "producer-metrics"
    ]
    return total


def producer_as(kafka: SecureKafka, user: str, **overrides: object) -> Producer:
    settings = kafka.producer_settings(
        "SASL",
        "SCRAM-SHA-256",
        user=user,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        max_block_ms=60_000,
        linger_ms=5,
        **overrides,
    )
    return Producer(**settings)


async def test_metadata_refusal_fails_the_send_fast(secure_kafka: SecureKafka) -> None:
    """No ACL on the topic: Metadata refuses it, so send() raises (as Java's send does)."""
    topic = secure_kafka.topic()
    producer = producer_as(secure_kafka, "bob")
    await within(producer.start(), 30, "start")
    try:
        # Warm up where bob may write: the producer id and connections are there.
        await within(producer.send(secure_kafka.topic(prefix="bob-"), b"warm-up"), 30, "warm-up")
        before = requests_sent(producer)
        started = time.monotonic()
        for _ in range(3):
            with pytest.raises(errors.TopicAuthorizationFailedError, match=topic):
                await within(producer.send(topic, b"v", key=b"k"), 70, "refusal")
        elapsed = time.monotonic() - started
        made = requests_sent(producer) - before
    finally:
        await within(producer.close(), 30, "close")
    assert elapsed < FAST_S, f"three refusals took {elapsed:.1f} s"
    # Each send asks once more (an ACL may have been granted since), no more.
    assert made <= 3, f"{made} requests for three refusals"


def _retries(producer: Producer) -> float:
    return sum(v for m, v in producer.metrics().items() if m.name == "record-retry-total")


async def test_produce_refusal_fails_every_record_fast(secure_kafka: SecureKafka) -> None:
    """DESCRIBE but no WRITE: the Produce request is refused; its records fail, unretried."""
    topic = secure_kafka.topic()
    secure_kafka.allow("bob", "TOPIC", topic, ["DESCRIBE"])
    producer = producer_as(secure_kafka, "bob")
    await within(producer.start(), 30, "start")
    try:
        await within(producer.send(secure_kafka.topic(prefix="bob-"), b"warm-up"), 30, "warm-up")
        await within(producer.partitions_for(topic), 30, "metadata")
        before = requests_sent(producer)
        # The warm-up may have been retried (its topic's leader was still
        # being elected): only retries from here on count.
        retried_before = _retries(producer)
        started = time.monotonic()
        futures = [
            await producer.enqueue(topic, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(30)
        ]
        results = await gather_within(futures, DELIVERY_TIMEOUT_MS / 1000 + 30, "refusal")
        elapsed = time.monotonic() - started
        made = requests_sent(producer) - before
        retried = _retries(producer) - retried_before
    finally:
        await within(producer.close(), 30, "close")
    assert all(isinstance(r, errors.TopicAuthorizationFailedError) for r in results), results[:3]
    assert elapsed < FAST_S, f"refused after {elapsed:.1f} s"
    # One Produce request (the broker's only connection carries all three
    # partitions), perhaps two if the first left before every record was in.
    assert made <= 3, f"{made} requests for one refusal"
    assert retried == 0


async def test_idempotent_producer_without_any_write_acl(secure_kafka: SecureKafka) -> None:
    """carol may write nowhere, so Kafka refuses her a producer id (KIP-679)."""
    topic = secure_kafka.topic()
    secure_kafka.allow("carol", "TOPIC", topic, ["DESCRIBE"])
    producer = producer_as(secure_kafka, "carol")
    await within(producer.start(), 30, "start")
    try:
        started = time.monotonic()
        futures = [await producer.enqueue(topic, f"v{i}".encode()) for i in range(5)]
        results = await gather_within(futures, DELIVERY_TIMEOUT_MS / 1000 + 30, "refusal")
        elapsed = time.monotonic() - started
    finally:
        await within(producer.close(), 30, "close")
    assert all(isinstance(r, errors.ClusterAuthorizationFailedError) for r in results), results[:3]
    assert elapsed < FAST_S, f"refused after {elapsed:.1f} s"


async def test_a_grant_lets_the_same_producer_deliver(secure_kafka: SecureKafka) -> None:
    topic = secure_kafka.topic()
    producer = producer_as(secure_kafka, "bob")
    await within(producer.start(), 30, "start")
    try:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            await within(producer.send(topic, b"refused", key=b"k"), FAST_S, "refusal")
        secure_kafka.allow("bob", "TOPIC", topic, ["WRITE"])
        futures = [await producer.enqueue(topic, f"v{i}".encode(), key=b"k") for i in range(20)]
        results = await gather_within(futures, 30, "delivery after the grant")
    finally:
        await within(producer.close(), 30, "close")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    records = await read_back(secure_kafka.admin_bootstrap, topic, 20)
    assert [r.value for r in records] == [f"v{i}".encode() for i in range(20)]


async def test_transactional_id_without_acl_is_refused(secure_kafka: SecureKafka) -> None:
    producer = producer_as(
        secure_kafka, "alice", transactional_id=f"not-alices-{uuid.uuid4().hex[:8]}"
    )
    await within(producer.start(), 30, "start")
    try:
        started = time.monotonic()
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError) as info:
            await within(producer.init_transactions(), 70, "init_transactions")
        elapsed = time.monotonic() - started
    finally:
        await within(producer.close(), 30, "close")
    assert "not-alices-" in str(info.value)
    assert elapsed < FAST_S, f"refused after {elapsed:.1f} s"


async def test_transactions_with_their_acl_deliver(secure_kafka: SecureKafka) -> None:
    topic = secure_kafka.topic()
    producer = producer_as(
        secure_kafka, "alice", transactional_id=f"alice-tx-{uuid.uuid4().hex[:8]}"
    )
    await within(producer.start(), 30, "start")
    try:
        await within(producer.init_transactions(), 30, "init_transactions")
        await producer.begin_transaction()
        futures = [await producer.enqueue(topic, f"t{i}".encode(), key=b"k") for i in range(10)]
        await within(producer.commit_transaction(), 30, "commit")
        results = await gather_within(futures, 10, "delivery")
    finally:
        await within(producer.close(), 30, "close")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    records = await read_back(
        secure_kafka.admin_bootstrap, topic, 10, isolation_level="read_committed"
    )
    assert [r.value for r in records] == [f"t{i}".encode() for i in range(10)]
