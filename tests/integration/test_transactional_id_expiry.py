"""A transactional id the coordinator forgot (``transactional.id.expiration.ms``), on Apache Kafka.

A transactional producer left idle longer than the broker's
``transactional.id.expiration.ms`` (7 days by default) loses its id: the
coordinator drops the mapping to its producer id, and the next transaction's
first request is answered INVALID_PRODUCER_ID_MAPPING (AddPartitionsToTxn under
transactions v1; Produce v12, through the partition leader's check with the
coordinator, under v2). As in Java (TransactionManager: abortable, then an
InitProducerId without EndTxn), that transaction fails with an error naming
the expiry, and its abort gets a new producer id so that the producer goes on;
a newer producer that took the id meanwhile fences it instead.

The broker here forgets ids within seconds. Each test waits for the event
itself, polling DescribeTransactions until the coordinator no longer knows the
id, and reads back what was written with librdkafka (``read_committed``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.engine.transactions import TransactionManager
from aioproducer.protocol.apis import Api
from aioproducer.protocol.generated import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from aioproducer.protocol.generated.describe_transactions import TransactionState
from tests.conftest import _show_log_on_failure
from tests.support.kafka_broker import KafkaBroker
from tests.support.verify import read_records

pytestmark = pytest.mark.asyncio

# Short enough to wait for, long enough that no id expires between two steps
# of a transaction (an id only expires while no transaction is open).
EXPIRATION_MS = 5000
# Bounds of the waits for the coordinator: far above the seconds these take.
WAIT_BOUND_S = 120.0
EXPIRY_HINT = "transactional.id.expiration.ms"

# DescribeTransactions v0 (KIP-664), which the client never sends: here only to
# see the coordinator's view of an id without changing it.
DESCRIBE_TRANSACTIONS: Api[DescribeTransactionsRequest, DescribeTransactionsResponse] = Api(
    "DescribeTransactions", DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0
)


@pytest.fixture(scope="module", params=[1, 2], ids=["tv1", "tv2"])
def expiring_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, KafkaBroker]]:
    """(transaction.version, broker) of a broker that forgets idle transactional ids fast."""
    version = request.param
    request.getfixturevalue("kafka_libs")  # skips (fails in CI) without the jars
    broker = KafkaBroker(
        workdir=tmp_path_factory.mktemp(f"kafka-expiry-tv{version}"),
        features={"transaction.version": version},
        properties={
            "transactional.id.expiration.ms": str(EXPIRATION_MS),
            # Kafka looks for expired ids hourly and timed-out transactions every 10 s.
            "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        },
    ).start()
    try:
        yield version, broker
    finally:
        broker.stop()


@pytest.fixture
def broker(
    request: pytest.FixtureRequest, expiring_broker: tuple[int, KafkaBroker]
) -> tuple[int, KafkaBroker]:
    """The module's broker, its log tail shown if this test fails."""
    _show_log_on_failure(request, "Kafka broker (fast id expiry)", expiring_broker[1])
    return expiring_broker


def _tid() -> str:
    return f"expiry-{uuid.uuid4().hex[:10]}"


def _txn(p: Producer) -> TransactionManager:
    txn = p._running.txn
    assert txn is not None
    return txn


def _describe(broker: KafkaBroker, tid: str) -> TransactionState | None:
    """The coordinator's view of ``tid`` (a lone broker coordinates every id), or None."""
    request = DescribeTransactionsRequest(transactional_ids=[tid])
    body: DescribeTransactionsResponse | None = broker.request(DESCRIBE_TRANSACTIONS, 0, request)
    return None if body is None else body.transaction_states[0]


async def _wait_for(broker: KafkaBroker, tid: str, what: str, done: Any) -> None:
    """Poll the coordinator until ``done(state)`` holds; fail after WAIT_BOUND_S."""
    deadline = time.monotonic() + WAIT_BOUND_S
    while True:
        state = await asyncio.to_thread(_describe, broker, tid)
        if state is not None and done(state):
            return
        assert time.monotonic() < deadline, f"{tid!r}: not {what} after {WAIT_BOUND_S} s: {state}"
        await asyncio.sleep(0.25)


async def _wait_until_expired(broker: KafkaBroker, tid: str) -> None:
    not_found = errors.TransactionalIdNotFoundError.code
    await _wait_for(broker, tid, "expired", lambda s: s.error_code == not_found)


def _names_expiry(exc: BaseException | None) -> None:
    assert isinstance(exc, errors.KafkaError), repr(exc)
    assert EXPIRY_HINT in str(exc), str(exc)


async def test_expired_id_fails_the_transaction_and_the_abort_goes_on(
    broker, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    version, kafka = broker
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    async with Producer(bootstrap, transactional_id=tid) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"before")
        first_id = _txn(p).producer_identity[0]
        await _wait_until_expired(kafka, tid)

        await p.begin_transaction()
        lost = await p.enqueue(topic, b"lost")
        with pytest.raises(errors.KafkaError) as commit_error:
            await p.commit_transaction()
        _names_expiry(commit_error.value)

        await p.abort_transaction()  # no EndTxn: a new producer id instead
        assert lost.done()
        _names_expiry(lost.exception())
        if version >= 2:  # Produce v12 was answered with the error
            assert isinstance(lost.exception(), errors.InvalidProducerIdMappingError)
        else:  # AddPartitionsToTxn failed first: the record never went out
            assert isinstance(lost.exception(), errors.TransactionAbortedError)
        assert _txn(p).producer_identity[0] != first_id
        state = await asyncio.to_thread(_describe, kafka, tid)
        assert state is not None and state.error_code == 0, state  # known again

        async with p.transaction():
            await p.send(topic, b"after")
    records = read_records(bootstrap, topic, 2, isolation_level="read_committed")
    assert [r.value for r in records] == [b"before", b"after"]


async def test_expired_id_fails_send_offsets_and_the_abort_goes_on(broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _, kafka = broker
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    async with Producer(bootstrap, transactional_id=tid) as p:
        await p.init_transactions()
        await _wait_until_expired(kafka, tid)
        await p.begin_transaction()
        with pytest.raises(errors.InvalidProducerIdMappingError) as offsets_error:
            await p.send_offsets_to_transaction({(topic, 0): 1}, f"group-{tid}")
        _names_expiry(offsets_error.value)
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"after")
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed")
    assert [r.value for r in records] == [b"after"]


async def test_expired_id_taken_by_a_newer_producer_fences_the_old_one(
    broker, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    _, kafka = broker
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    async with Producer(bootstrap, transactional_id=tid) as old:
        await old.init_transactions()
        old_id = _txn(old).producer_identity[0]
        await _wait_until_expired(kafka, tid)
        async with Producer(bootstrap, transactional_id=tid) as newer:
            await newer.init_transactions()
            assert _txn(newer).producer_identity[0] != old_id  # a new mapping for the id

            await old.begin_transaction()
            zombie = await old.enqueue(topic, b"zombie")
            with pytest.raises(errors.KafkaError) as commit_error:
                await old.commit_transaction()
            _names_expiry(commit_error.value)
            # The abort's InitProducerId names the old producer id: fenced, not renewed.
            with pytest.raises(errors.ProducerFencedError):
                await old.abort_transaction()
            assert zombie.done() and zombie.exception() is not None

            async with newer.transaction():
                await newer.send(topic, b"newer")
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed")
    assert [r.value for r in records] == [b"newer"]


async def test_prepared_transaction_timed_out_then_expired(broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _, kafka = broker
    bootstrap = kafka.bootstrap_servers
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    async with Producer(bootstrap, transactional_id=tid, transaction_timeout_ms=4000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"prepared")
        prepared = await p.prepare_transaction()
        # The coordinator aborts it at its timeout; only then can the idle id expire.
        await _wait_until_expired(kafka, tid)

        with pytest.raises(errors.TransactionNotCompletedError) as not_completed:
            await p.complete_transaction(prepared, commit=True)
        _names_expiry(not_completed.value)
        assert _txn(p).producer_identity[0] != prepared.producer_id  # it goes on

        async with p.transaction():
            await p.send(topic, b"after")
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed")
    assert [r.value for r in records] == [b"after"]
