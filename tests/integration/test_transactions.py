"""Transactions against Apache Kafka, checked with a librdkafka consumer."""

from __future__ import annotations

import asyncio
import uuid

import confluent_kafka
import pytest

from aioproducer import Producer, errors
from tests.support.verify import read_records

pytestmark = pytest.mark.asyncio


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


async def test_committed_records_are_visible_to_read_committed(
    kafka_bootstrap, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(3)
    async with Producer(kafka_bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        async with p.transaction():
            futures = [await p.enqueue(topic, b"v%d" % i, key=b"k%d" % i) for i in range(50)]
        assert all(f.done() and f.exception() is None for f in futures)  # commit flushed them
        async with p.transaction():
            await p.send(topic, b"second")
    records = read_records(kafka_bootstrap, topic, 51, isolation_level="read_committed")
    assert sorted(r.value for r in records) == sorted([b"v%d" % i for i in range(50)] + [b"second"])


async def test_aborted_records_are_hidden(kafka_bootstrap, topic_factory) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(2)
    async with Producer(kafka_bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"aborted", partition=0)
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"committed", partition=0)
    records = read_records(kafka_bootstrap, topic, 1, isolation_level="read_committed", grace=2.0)
    assert [r.value for r in records] == [b"committed"]


async def test_context_manager_aborts_on_exception(kafka_bootstrap, topic_factory) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap, transactional_id=_tid(), linger_ms=10_000) as p:
        await p.init_transactions()
        with pytest.raises(RuntimeError, match="boom"):
            async with p.transaction():
                pending = await p.enqueue(topic, b"never-sent")
                raise RuntimeError("boom")
        # The record was still buffered (long linger): the abort failed it.
        with pytest.raises(errors.TransactionAbortedError):
            await asyncio.wait_for(pending, 5)
        # The producer goes on with a new transaction.
        async with p.transaction():
            md = await p.send(topic, b"after")
    assert md.offset >= 0
    records = read_records(kafka_bootstrap, topic, 1, isolation_level="read_committed")
    assert b"after" in [r.value for r in records]
    assert b"never-sent" not in [r.value for r in records]


async def test_second_producer_fences_the_first(kafka_bootstrap, topic_factory) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(1)
    tid = _tid()
    async with Producer(kafka_bootstrap, transactional_id=tid) as first:
        await first.init_transactions()
        async with first.transaction():
            await first.send(topic, b"first")
        async with Producer(kafka_bootstrap, transactional_id=tid) as second:
            await second.init_transactions()
            await first.begin_transaction()
            # On a transaction.version 2 cluster (Kafka 4's default) the partition
            # leader answers the zombie INVALID_PRODUCER_EPOCH, abortable (KIP-588);
            # its abort then meets PRODUCER_FENCED at the coordinator.
            with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
                await asyncio.wait_for(first.send(topic, b"zombie"), 30)
            with pytest.raises(errors.ProducerFencedError):
                await asyncio.wait_for(first.abort_transaction(), 30)
            # Fenced is final: every later call says so.
            with pytest.raises(errors.ProducerFencedError):
                await first.send(topic, b"again")
            with pytest.raises(errors.ProducerFencedError):
                await first.begin_transaction()
            async with second.transaction():
                await second.send(topic, b"second")
    values = [
        r.value for r in read_records(kafka_bootstrap, topic, 2, isolation_level="read_committed")
    ]
    assert b"first" in values and b"second" in values and b"zombie" not in values


async def test_misuse_is_a_clear_state_error(kafka_bootstrap, topic_factory) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap, transactional_id=_tid()) as p:
        with pytest.raises(errors.IllegalStateError, match="init_transactions"):
            await p.begin_transaction()
        await p.init_transactions()
        with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
            await p.send(topic, b"outside")
        with pytest.raises(errors.IllegalStateError, match="no transaction"):
            await p.commit_transaction()
        with pytest.raises(errors.IllegalStateError, match="no transaction"):
            await p.abort_transaction()
        with pytest.raises(errors.IllegalStateError, match="already"):
            await p.init_transactions()
    async with Producer(kafka_bootstrap) as plain:
        with pytest.raises(errors.IllegalStateError, match="transactional_id"):
            await plain.begin_transaction()


async def test_send_offsets_to_transaction(kafka_bootstrap, topic_factory) -> None:  # type: ignore[no-untyped-def]
    """Consume-transform-produce: offsets commit with the transaction."""
    source, sink = topic_factory(1), topic_factory(1)
    group = f"group-{uuid.uuid4().hex[:8]}"
    async with Producer(kafka_bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(sink, b"derived")
            await p.send_offsets_to_transaction({(source, 0): 5}, group)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        (committed,) = consumer.committed([confluent_kafka.TopicPartition(source, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == 5
