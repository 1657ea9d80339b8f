"""Two-phase commit: a transaction prepared by one producer, completed by another.

On Apache Kafka formatted with transaction.version 1 and 2 (KIP-890), read
back by librdkafka. While a prepared transaction is open, read_committed
consumers see nothing of it; once completed they see each record once
(commit) or none (abort). A transaction that a newer producer with the same
id fenced cannot be completed, and says so.
"""

from __future__ import annotations

import uuid

import pytest

from aioproducer import PreparedTransaction, Producer, errors
from tests.support.verify import read_records

pytestmark = pytest.mark.asyncio


def _tid() -> str:
    return f"tpc-{uuid.uuid4().hex[:10]}"


async def _prepare(
    bootstrap: str, tid: str, topic: str, values: list[bytes]
) -> PreparedTransaction:
    """Write ``values`` in a transaction, prepare it and close the producer."""
    async with Producer(bootstrap, transactional_id=tid, linger_ms=5) as p:
        await p.init_transactions()
        await p.begin_transaction()
        for i, value in enumerate(values):
            await p.enqueue(topic, value, key=b"k%d" % (i % 7))
        prepared = await p.prepare_transaction()
        with pytest.raises(errors.IllegalStateError, match="prepared"):
            await p.enqueue(topic, b"after prepare")
    return prepared


async def _commit_marker(bootstrap: str, topic: str) -> None:
    """A later committed record: read_committed readers get past any aborted one."""
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        async with p.transaction():
            await p.send(topic, b"marker", partition=0)


async def test_prepared_elsewhere_then_committed(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    topic = topic_factory(3, bootstrap=bootstrap)
    values = [b"v%d" % i for i in range(200)]
    prepared = await _prepare(bootstrap, _tid(), topic, values)
    assert prepared.transaction_version == version and not prepared.empty
    # Written and left open: in the log, but not yet visible to read_committed.
    assert len(read_records(bootstrap, topic, len(values), grace=0.5)) == len(values)
    assert (
        read_records(bootstrap, topic, 1, isolation_level="read_committed", timeout=3, grace=0)
        == []
    )
    async with Producer(bootstrap) as courier:  # not transactional at all
        await courier.complete_transaction(prepared, commit=True)
    records = read_records(
        bootstrap, topic, len(values), isolation_level="read_committed", grace=1.0
    )
    assert sorted(r.value for r in records) == sorted(values)  # each exactly once


async def test_prepared_elsewhere_then_aborted(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    prepared = await _prepare(bootstrap, _tid(), topic, [b"a%d" % i for i in range(20)])
    async with Producer(bootstrap) as courier:
        await courier.complete_transaction(prepared, commit=False)
    await _commit_marker(bootstrap, topic)
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed", grace=1.0)
    assert [r.value for r in records] == [b"marker"]


async def test_a_fenced_prepared_transaction_cannot_be_committed(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    prepared = await _prepare(bootstrap, tid, topic, [b"zombie%d" % i for i in range(20)])
    async with Producer(bootstrap, transactional_id=tid) as newer:
        await newer.init_transactions()  # fences the prepared one and aborts it
        async with newer.transaction():
            await newer.send(topic, b"newer")
    async with Producer(bootstrap) as courier:
        with pytest.raises(errors.TransactionNotCompletedError, match=tid):
            await courier.complete_transaction(prepared, commit=True)
        # The courier itself still works.
        await courier.send(topic, b"plain")
    records = read_records(bootstrap, topic, 2, isolation_level="read_committed", grace=1.0)
    assert sorted(r.value for r in records) == [b"newer", b"plain"]


async def test_committed_then_aborted_is_refused(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    prepared = await _prepare(bootstrap, _tid(), topic, [b"c%d" % i for i in range(5)])
    async with Producer(bootstrap) as courier:
        await courier.complete_transaction(prepared, commit=True)
        with pytest.raises(errors.TransactionNotCompletedError):
            await courier.complete_transaction(prepared, commit=False)
    records = read_records(bootstrap, topic, 5, isolation_level="read_committed", grace=1.0)
    assert sorted(r.value for r in records) == [b"c%d" % i for i in range(5)]


async def test_the_preparing_producer_completes_and_goes_on(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"first")
        prepared = await p.prepare_transaction()
        with pytest.raises(errors.IllegalStateError):
            await p.begin_transaction()
        await p.complete_transaction(prepared, commit=True)
        async with p.transaction():  # under v2 on the epoch EndTxn handed back
            await p.send(topic, b"second")
    records = read_records(bootstrap, topic, 2, isolation_level="read_committed", grace=1.0)
    assert [r.value for r in records] == [b"first", b"second"]


async def test_an_empty_prepared_transaction_is_marked_empty_and_completes(txn_broker) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        await p.begin_transaction()
        prepared = await p.prepare_transaction()
        assert prepared.empty
    async with Producer(bootstrap) as courier:
        await courier.complete_transaction(prepared, commit=True)
