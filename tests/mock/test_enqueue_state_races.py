"""The producer's state moves on while ``enqueue()`` awaits a serializer's ``prepare()``.

A schema-aware serializer resolves its schema per topic (Schema Registry I/O)
before the first record of a topic is serialized; ``enqueue`` awaits it before
anything is appended. If ``close()`` or ``commit_transaction()`` runs in the
meantime, the record must not be appended afterwards: to a closed producer its
future would never resolve; after a commit it would land outside any
transaction (under v1 its partition is never registered, under v2 the leader
opens a transaction nobody ends). As Java's ``KafkaProducer`` checks again in
``maybeAddPartition`` after its waits, ``enqueue`` raises instead.

``prepare`` is held on an :class:`asyncio.Event`, so the race is made, not
hoped for. Every wait is bounded far above what it needs (BOUND).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.txn import TxnStatus
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

BOUND = 30.0
HELD = "held"  # the topic whose prepare() waits for the test
OTHER = "other"


class HeldSerializer:
    """A serializer with the schema-aware protocol (``prepare``/``for_topic``)
    whose ``prepare`` of :data:`HELD` waits until :attr:`release` is set."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def __call__(self, value: Any) -> bytes:
        return str(value).encode()

    async def prepare(self, topic: str) -> None:
        if topic == HELD:
            self.entered.set()
            await self.release.wait()

    def for_topic(self, topic: str) -> Callable[[Any], bytes]:
        return self


def _ongoing(cluster: MockCluster) -> list[Any]:
    return [t for t in cluster.coordinator.by_id.values() if t.status is TxnStatus.ONGOING]


async def test_close_while_prepare_waits_makes_enqueue_raise_closed() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic(HELD, partitions=1)
        serializer = HeldSerializer()
        producer = Producer(cluster.bootstrap_servers, value_serializer=serializer, linger_ms=0)
        await within(producer.start(), BOUND, "start")
        # The topic's metadata is known: enqueue's only wait is prepare().
        await within(producer.partitions_for(HELD), BOUND, "metadata")
        enqueue = asyncio.create_task(producer.enqueue(HELD, "stray"))
        await within(serializer.entered.wait(), BOUND, "prepare() entered")

        await within(producer.close(), BOUND, "close")
        serializer.release.set()

        # Before the fix, enqueue appended to the closed producer and returned
        # a future that never resolved.
        with pytest.raises(errors.ProducerClosedError):
            await within(enqueue, BOUND, "enqueue")
        assert cluster.records(HELD, include_uncommitted=True) == []


@pytest.mark.parametrize("then", ["close", "next transaction"])
@pytest.mark.parametrize("version", [1, 2])
async def test_commit_while_prepare_waits_makes_enqueue_raise_and_leaves_no_transaction(
    version: int, then: str
) -> None:
    async with MockCluster(brokers=1, transaction_version=version) as cluster:
        cluster.create_topic(HELD, partitions=1)
        cluster.create_topic(OTHER, partitions=1)
        serializer = HeldSerializer()
        producer = Producer(
            cluster.bootstrap_servers,
            value_serializer=serializer,
            transactional_id="races",
            linger_ms=0,
            max_block_ms=5000,
        )
        await within(producer.start(), BOUND, "start")
        await within(producer.init_transactions(), BOUND, "init_transactions")
        await within(producer.begin_transaction(), BOUND, "begin")
        await within(producer.send(OTHER, "committed"), BOUND, "send")
        await within(producer.partitions_for(HELD), BOUND, "metadata")
        enqueue = asyncio.create_task(producer.enqueue(HELD, "stray"))
        await within(serializer.entered.wait(), BOUND, "prepare() entered")

        await within(producer.commit_transaction(), BOUND, "commit")
        serializer.release.set()

        with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
            await within(enqueue, BOUND, "enqueue")
        expected = []
        if then == "next transaction":
            # The topic is prepared now: the next transaction commits what it sent, only that.
            await within(producer.begin_transaction(), BOUND, "begin again")
            sent = await within(producer.send(HELD, "next"), BOUND, "send to the prepared topic")
            await within(producer.commit_transaction(), BOUND, "commit again")
            assert sent.offset >= 0
            expected = [b"next"]
        await within(producer.close(), BOUND, "close")

        assert _ongoing(cluster) == []
        assert [r.value for r in cluster.records(HELD, include_uncommitted=True)] == expected
        assert [r.value for r in cluster.records(OTHER)] == [b"committed"]
