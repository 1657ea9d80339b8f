"""Transactions on Apache Kafka formatted with transaction.version 1 and 2 (KIP-890).

The same scenarios run on both brokers and are read back by librdkafka with
read_committed. Each test also checks which protocol was really used: under
v2 no AddPartitionsToTxn / AddOffsetsToTxn is sent (the brokers add the
partitions themselves) and every EndTxn bumps the epoch; under v1 the
partitions are added by the client and the epoch stays.
"""

from __future__ import annotations

import asyncio
import uuid

import confluent_kafka
import pytest

from aioproducer import Producer, errors
from aioproducer.engine.transactions import TransactionManager
from tests.support.verify import read_records

pytestmark = pytest.mark.asyncio


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def _txn(p: Producer) -> TransactionManager:
    txn = p._running.txn
    assert txn is not None
    return txn


def _check_protocol(p: Producer, version: int, ends: int, start_epoch: int) -> None:
    """The v1 or v2 path was taken; ``ends`` EndTxn requests have succeeded."""
    txn = _txn(p)
    assert p._running.client.connections.finalized_features.get("transaction.version") == version
    assert txn.v2 is (version >= 2)
    epoch = txn.producer_identity[1]
    if version >= 2:
        assert txn.requests_sent["AddPartitionsToTxn"] == 0
        assert txn.requests_sent["AddOffsetsToTxn"] == 0
        assert epoch == start_epoch + ends  # one bump per commit or abort
    else:
        assert txn.requests_sent["AddPartitionsToTxn"] >= 1
        assert epoch == start_epoch
    assert txn.requests_sent["EndTxn"] >= ends  # attempts; a retry is possible


async def test_commit(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    topic = topic_factory(3, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        async with p.transaction():
            futures = [await p.enqueue(topic, b"v%d" % i, key=b"k%d" % i) for i in range(30)]
        assert all(f.done() and f.exception() is None for f in futures)
        async with p.transaction():
            await p.send(topic, b"second")
        _check_protocol(p, version, ends=2, start_epoch=start[1])
        assert _txn(p).producer_identity[0] == start[0]
    records = read_records(bootstrap, topic, 31, isolation_level="read_committed")
    assert sorted(r.value for r in records) == sorted([b"v%d" % i for i in range(30)] + [b"second"])


async def test_abort_then_commit(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    topic = topic_factory(2, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        await p.begin_transaction()
        await p.send(topic, b"aborted", partition=0)
        await p.send(topic, b"aborted too", partition=1)
        await p.abort_transaction()
        async with p.transaction():
            await p.send(topic, b"committed", partition=0)
        _check_protocol(p, version, ends=2, start_epoch=start[1])
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed", grace=2.0)
    assert [r.value for r in records] == [b"committed"]


async def test_context_manager_aborts_on_exception(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        with pytest.raises(RuntimeError, match="boom"):
            async with p.transaction():
                await p.send(topic, b"sent-then-aborted")
                raise RuntimeError("boom")
        async with p.transaction():
            await p.send(topic, b"after")
        _check_protocol(p, version, ends=2, start_epoch=start[1])
    records = read_records(bootstrap, topic, 1, isolation_level="read_committed", grace=2.0)
    assert [r.value for r in records] == [b"after"]


async def test_send_offsets_to_transaction(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    source, sink = topic_factory(1, bootstrap=bootstrap), topic_factory(1, bootstrap=bootstrap)
    group = f"group-{uuid.uuid4().hex[:8]}"
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        async with p.transaction():
            await p.send(sink, b"derived")
            await p.send_offsets_to_transaction({(source, 0): 5}, group)
        # Offsets alone make a transaction too (nothing produced in it).
        async with p.transaction():
            await p.send_offsets_to_transaction({(source, 0): 9}, group)
        _check_protocol(p, version, ends=2, start_epoch=start[1])
        # Attempts are counted: the coordinator may answer CONCURRENT_TRANSACTIONS
        # right after the previous EndTxn, and the request is sent again.
        if version == 1:
            assert _txn(p).requests_sent["AddOffsetsToTxn"] >= 2
        assert _txn(p).requests_sent["TxnOffsetCommit"] >= 2
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (committed,) = await asyncio.to_thread(
            consumer.committed, [confluent_kafka.TopicPartition(source, 0)], timeout=10
        )
    finally:
        consumer.close()
    assert committed.offset == 9
    records = read_records(bootstrap, sink, 1, isolation_level="read_committed", grace=1.0)
    assert [r.value for r in records] == [b"derived"]


async def test_many_transactions_in_a_row(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    version, bootstrap = txn_broker
    topic = topic_factory(3, bootstrap=bootstrap)
    rounds = 12
    async with Producer(bootstrap, transactional_id=_tid(), linger_ms=5) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        for i in range(rounds):
            await p.begin_transaction()
            futures = [
                await p.enqueue(topic, b"r%d-%d" % (i, j), partition=j % 3) for j in range(5)
            ]
            if i % 3 == 2:
                # Written first, so the abort has something to hide.
                await asyncio.wait_for(asyncio.gather(*futures), 30)
                await p.abort_transaction()
            else:
                await p.commit_transaction()
        _check_protocol(p, version, ends=rounds, start_epoch=start[1])
    expected = sorted(b"r%d-%d" % (i, j) for i in range(rounds) if i % 3 != 2 for j in range(5))
    records = read_records(
        bootstrap, topic, len(expected), isolation_level="read_committed", grace=2.0
    )
    assert sorted(r.value for r in records) == expected  # each once, nothing aborted


async def test_empty_transaction_sends_no_end_txn(txn_broker) -> None:  # type: ignore[no-untyped-def]
    _version, bootstrap = txn_broker
    async with Producer(bootstrap, transactional_id=_tid()) as p:
        await p.init_transactions()
        start = _txn(p).producer_identity
        async with p.transaction():
            pass
        assert _txn(p).requests_sent["EndTxn"] == 0
        assert _txn(p).producer_identity == start
        with pytest.raises(errors.IllegalStateError, match="no transaction"):
            await p.abort_transaction()


async def test_zombie_is_fenced(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    """Under v2 the zombie hears of it from the partition leader (stale epoch on
    Produce v12), under v1 from the coordinator (AddPartitionsToTxn): fenced both ways
    once it aborts."""
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    tid = _tid()
    async with Producer(bootstrap, transactional_id=tid) as first:
        await first.init_transactions()
        async with first.transaction():
            await first.send(topic, b"first")
        async with Producer(bootstrap, transactional_id=tid) as second:
            await second.init_transactions()
            await first.begin_transaction()
            # v1: the coordinator refuses AddPartitionsToTxn (PRODUCER_FENCED, fatal);
            # v2: the partition leader answers INVALID_PRODUCER_EPOCH, abortable as in
            # Java (KIP-588), and the abort's EndTxn meets PRODUCER_FENCED.
            with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
                await asyncio.wait_for(first.send(topic, b"zombie"), 30)
            with pytest.raises(errors.ProducerFencedError):
                await asyncio.wait_for(first.abort_transaction(), 30)
            with pytest.raises(errors.ProducerFencedError):
                await first.begin_transaction()
            async with second.transaction():
                await second.send(topic, b"second")
    records = read_records(bootstrap, topic, 2, isolation_level="read_committed", grace=2.0)
    assert sorted(r.value for r in records) == [b"first", b"second"]


async def test_abort_before_any_record_was_sent(txn_broker, topic_factory) -> None:  # type: ignore[no-untyped-def]
    """Records still lingering when the transaction is aborted never reach a broker;
    under v2 the broker then knows of no transaction, yet the producer goes on."""
    version, bootstrap = txn_broker
    topic = topic_factory(2, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid(), linger_ms=60_000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        lingering = [await p.enqueue(topic, b"never sent", partition=i % 2) for i in range(4)]
        await asyncio.wait_for(p.abort_transaction(), 30)
        for future in lingering:
            with pytest.raises(errors.TransactionAbortedError):
                await future
        async with p.transaction():  # commit flushes what lingers
            after = await p.enqueue(topic, b"after", partition=0)
        assert after.done() and after.exception() is None
        await p.begin_transaction()
        await p.enqueue(topic, b"never sent either", partition=1)
        await asyncio.wait_for(p.abort_transaction(), 30)
        async with p.transaction():
            await p.enqueue(topic, b"last", partition=1)
    records = read_records(bootstrap, topic, 2, isolation_level="read_committed", grace=1.0)
    assert sorted(r.value for r in records) == [b"after", b"last"]


async def test_a_timed_out_transaction_is_aborted_then_the_producer_goes_on_under_v2(
    txn_broker, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    """The coordinator aborts a transaction older than transaction_timeout_ms and bumps
    the epoch. The next record gets INVALID_PRODUCER_EPOCH (abortable, KIP-588). Under
    v2 the abort succeeds and the producer continues on a new epoch; under v1 the
    coordinator answers the abort with PRODUCER_FENCED, and the producer is done."""
    version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    async with Producer(bootstrap, transactional_id=_tid(), transaction_timeout_ms=1000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"timed out", partition=0)
        # The brokers check for timed-out transactions every 500 ms (the fixture's
        # setting): the coordinator has aborted it well before 60 s.
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            try:
                await asyncio.wait_for(p.send(topic, b"probe", partition=0), 30)
            except errors.InvalidProducerEpochError:
                break
            assert asyncio.get_running_loop().time() < deadline, (
                "the coordinator never timed it out"
            )
            await asyncio.sleep(0.5)
        if version >= 2:
            await asyncio.wait_for(p.abort_transaction(), 30)
            async with p.transaction():
                await p.send(topic, b"after", partition=0)
        else:
            with pytest.raises(errors.ProducerFencedError):
                await asyncio.wait_for(p.abort_transaction(), 30)
    if version >= 2:
        records = read_records(bootstrap, topic, 1, isolation_level="read_committed", grace=1.0)
        assert [r.value for r in records] == [b"after"]
