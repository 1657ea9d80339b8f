"""What transactions tell the caller is what happened, on Apache Kafka (transaction versions 1 and 2).

Read back by librdkafka (read_committed), not by the producer under test:

* a replayed completion of a prepared transaction never ends the producer's
  next transaction (under v1 both share one producer id and epoch unless the
  producer moves on to a new epoch, which it now does);
* close() after a commit that timed out (the broker stopped) finishes the
  commit: no transaction is left open to hold read_committed readers back;
* a record whose serializer's prepare() was still running when the transaction
  committed is refused, not written outside any transaction (under v2 the
  leader would open a transaction nobody ends).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from aioproducer import Producer, errors
from tests.mock.test_enqueue_state_races import HeldSerializer
from tests.support.aio import read_back, within
from tests.support.kafka_broker import KafkaBroker

pytestmark = pytest.mark.asyncio

BOUND = 60.0


def _tid() -> str:
    return f"truth-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=[1, 2], ids=["tv1", "tv2"])
def pausable_txn_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KafkaBroker]:
    """A dedicated broker formatted with ``transaction.version`` 1 or 2, which a test may pause."""
    request.getfixturevalue("kafka_libs")  # skips (fails in CI) without the jars
    broker = KafkaBroker(
        workdir=tmp_path / "kafka", features={"transaction.version": request.param}
    ).start()
    try:
        yield broker
    finally:
        if broker.is_paused:
            broker.resume()
        broker.stop()


async def test_a_replayed_completion_never_ends_a_later_transaction(  # type: ignore[no-untyped-def]
    txn_broker, topic_factory
) -> None:
    _version, bootstrap = txn_broker
    topic = topic_factory(1, bootstrap=bootstrap)
    async with (
        Producer(bootstrap, transactional_id=_tid(), max_block_ms=20_000) as p,
        Producer(bootstrap, max_block_ms=20_000) as courier,
    ):
        await within(p.init_transactions(), BOUND)
        await p.begin_transaction()
        await within(p.send(topic, b"first"), BOUND)
        prepared = await within(p.prepare_transaction(), BOUND)
        await within(p.complete_transaction(prepared, commit=True), BOUND)
        await p.begin_transaction()
        await within(p.send(topic, b"second"), BOUND)
        await within(p.complete_transaction(prepared, commit=True), BOUND)  # a no-op
        with pytest.raises(errors.TransactionNotCompletedError, match="already committed"):
            await within(p.complete_transaction(prepared, commit=False), BOUND)
        with pytest.raises(errors.TransactionNotCompletedError):
            await within(courier.complete_transaction(prepared, commit=False), BOUND)
        await within(p.commit_transaction(), BOUND)
    records = await read_back(bootstrap, topic, 2, isolation_level="read_committed", timeout=30)
    assert [r.value for r in records] == [b"first", b"second"]


async def test_close_after_a_commit_timed_out_finishes_the_commit(  # type: ignore[no-untyped-def]
    pausable_txn_broker, topic_factory
) -> None:
    broker = pausable_txn_broker
    bootstrap = broker.bootstrap_servers
    topic = topic_factory(1, bootstrap=bootstrap)
    p = Producer(
        bootstrap,
        transactional_id=_tid(),
        max_block_ms=4_000,
        request_timeout_ms=30_000,
        delivery_timeout_ms=120_000,
    )
    await within(p.start(), BOUND)
    try:
        await within(p.init_transactions(), BOUND)
        await p.begin_transaction()
        await within(p.send(topic, b"one"), BOUND)
        broker.pause()
        await p.enqueue(topic, b"two")
        with pytest.raises(errors.KafkaTimeoutError):
            await within(p.commit_transaction(), BOUND)
        broker.resume()
    finally:
        if broker.is_paused:
            broker.resume()
        await within(p.close(), BOUND)  # returns: the commit finished
    # A later transaction commits; read_committed reaches it only past a
    # transaction that is no longer open.
    async with Producer(bootstrap, transactional_id=_tid(), max_block_ms=20_000) as later:
        await within(later.init_transactions(), BOUND)
        async with later.transaction():
            await within(later.send(topic, b"later"), BOUND)
    records = await read_back(bootstrap, topic, 3, isolation_level="read_committed", timeout=30)
    assert [r.value for r in records] == [b"one", b"two", b"later"]


class HeldTopicSerializer(HeldSerializer):
    """:class:`HeldSerializer` whose ``prepare`` waits for the test on one given topic."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    async def prepare(self, topic: str) -> None:
        if topic == self.topic:
            self.entered.set()
            await self.release.wait()


async def test_a_commit_during_a_serializers_prepare_leaves_no_stray_record(  # type: ignore[no-untyped-def]
    txn_broker, topic_factory
) -> None:
    _version, bootstrap = txn_broker
    other = topic_factory(1, bootstrap=bootstrap)
    held = topic_factory(1, bootstrap=bootstrap)
    serializer = HeldTopicSerializer(held)
    async with Producer(
        bootstrap, value_serializer=serializer, transactional_id=_tid(), max_block_ms=20_000
    ) as p:
        await within(p.init_transactions(), BOUND)
        await p.begin_transaction()
        await within(p.send(other, "committed"), BOUND)
        await within(p.partitions_for(held), BOUND)
        enqueue = asyncio.ensure_future(p.enqueue(held, "stray"))
        await within(serializer.entered.wait(), BOUND)
        await within(p.commit_transaction(), BOUND)
        serializer.release.set()
        with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
            await within(enqueue, BOUND)
    # Nothing open is left: a later transaction's record is readable past it.
    async with Producer(bootstrap, transactional_id=_tid(), max_block_ms=20_000) as later:
        await within(later.init_transactions(), BOUND)
        async with later.transaction():
            await within(later.send(held, b"later"), BOUND)
    records = await read_back(bootstrap, held, 1, isolation_level="read_committed", timeout=30)
    assert [r.value for r in records] == [b"later"]
    everything = await read_back(bootstrap, held, 1, timeout=30)
    assert [r.value for r in everything] == [b"later"]  # the stray record was never written
