"""The transaction coordinator's node is lost mid-transaction.

A transactional producer writes keyed, compressed records at a steady rate in
consecutive transactions while the node coordinating its transactional id is
killed: during a transaction, and just before a commit. Each commit either
succeeds or fails with a typed error, and then the transaction can be aborted;
a ``read_committed`` consumer (confluent-kafka) sees every record of every
committed transaction once, in order, and nothing of an aborted one.

Each test runs on a cluster formatted with ``transaction.version`` 2 (Kafka's
default: records add their partition to the transaction, every EndTxn bumps
the epoch, KIP-890 part 2) and on one formatted with version 1.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from aioproducer import Producer, RecordMetadata, errors
from tests.cluster.settings import CLUSTERS, SETTINGS, TRANSACTION_VERSION
from tests.cluster.stream import SteadyStream, assert_exactly_once
from tests.support.aio import read_back, within
from tests.support.kafka_cluster import KafkaCluster
from tests.support.producers import make_producer

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.parametrize("cluster", CLUSTERS, indirect=True),
]


def _check_transaction_version(producer: Producer, request: pytest.FixtureRequest) -> None:
    """The producer speaks the transaction protocol its cluster was formatted with."""
    which = request.node.callspec.params["cluster"]
    finalized = producer._running.client.connections.finalized_features
    assert finalized.get("transaction.version") == TRANSACTION_VERSION[which], finalized


class Transactions:
    """Runs transactions one after another, keeping what each one's fate was."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.committed: list[tuple[bytes, RecordMetadata | BaseException]] = []
        self.aborted = 0
        self.commit_errors: list[BaseException] = []
        self._next = 0

    async def begin(self, acked: int, what: str) -> SteadyStream:
        """Begin a transaction streaming records; return once ``acked`` of them are acknowledged."""
        await self.producer.begin_transaction()
        stream = SteadyStream(self.producer, self.topic, rate=800, first=self._next).start()
        await stream.wait_acked(acked, 60, what)
        return stream

    async def end(self, stream: SteadyStream, *, commit: bool = True) -> bool:
        """Stop the stream, commit (abort if the commit fails, or if not ``commit``).

        True if committed.
        """
        results = await stream.stop(timeout=120)
        self._next = stream.first + stream.sent
        failed = [r for r in results if not isinstance(r, RecordMetadata)]
        if not commit:
            await self._abort()
            return False
        try:
            await within(self.producer.commit_transaction(), 120, "commit")
        except errors.KafkaError as exc:
            # A record failed, or the commit could not reach a coordinator in
            # max_block_ms: typed, and the transaction can still be aborted.
            self.commit_errors.append(exc)
            await self._abort()
            return False
        assert not failed, f"committed although {len(failed)} records failed: {failed[0]!r}"
        self.committed.extend(zip(stream.values, results))
        return True

    async def _abort(self) -> None:
        for _ in range(5):
            try:
                await within(self.producer.abort_transaction(), 120, "abort")
            except errors.KafkaTimeoutError:
                continue  # the coordinator was still moving: abort again, as documented
            self.aborted += 1
            return
        raise AssertionError("the transaction could not be aborted")

    async def check_committed(self, bootstrap: str) -> None:
        """What a ``read_committed`` consumer reads is every committed record, once, in
        order (a stray would be a record of an aborted transaction)."""
        values = [v for v, _ in self.committed]
        results = [r for _, r in self.committed]
        records = await read_back(
            bootstrap,
            self.topic,
            len(values),
            timeout=60,
            grace=2.0,
            isolation_level="read_committed",
        )
        assert_exactly_once(values, results, records)


async def _kill_coordinator(cluster: KafkaCluster, txn_id: str) -> int:
    node = await asyncio.to_thread(cluster.coordinator, txn_id)
    await asyncio.to_thread(cluster.kill, node)
    return node


async def _restore(cluster: KafkaCluster, node: int, topic: str) -> None:
    await asyncio.to_thread(cluster.start, node)
    await asyncio.to_thread(cluster.wait_for_isr, topic, 3)


async def test_coordinator_killed_mid_transaction_and_before_commit(
    cluster: KafkaCluster, cluster_topic, request: pytest.FixtureRequest
) -> None:
    topic = cluster_topic(3)
    txn_id = f"cluster-txn-{uuid.uuid4().hex[:8]}"
    producer = make_producer(
        cluster, SETTINGS, compression="zstd", transactional_id=txn_id, max_block_ms=60_000
    )
    await within(producer.start(), 30, "start")
    txns = Transactions(producer, topic)
    try:
        await within(producer.init_transactions(), 60, "init_transactions")
        _check_transaction_version(producer, request)

        # A transaction with every node up.
        stream = await txns.begin(300, "first transaction")
        assert await txns.end(stream), txns.commit_errors

        # The coordinator dies while records of the transaction flow.
        stream = await txns.begin(300, "before the coordinator is killed")
        killed = await _kill_coordinator(cluster, txn_id)
        await asyncio.to_thread(cluster.coordinator, txn_id, not_in={killed})
        await stream.wait_acked(300, 60, f"after coordinator {killed} was killed")
        await txns.end(stream)
        await _restore(cluster, killed, topic)

        # The coordinator dies mid-transaction and the application aborts:
        # none of those records may be read as committed.
        stream = await txns.begin(300, "before the coordinator is killed")
        killed = await _kill_coordinator(cluster, txn_id)
        await stream.wait_acked(300, 60, f"after coordinator {killed} was killed")
        assert not await txns.end(stream, commit=False)
        await _restore(cluster, killed, topic)

        # The coordinator dies just before the commit: EndTxn finds the new one.
        stream = await txns.begin(300, "before the commit")
        killed = await _kill_coordinator(cluster, txn_id)
        await txns.end(stream)
        await _restore(cluster, killed, topic)

        # And the producer carries on.
        stream = await txns.begin(300, "last transaction")
        assert await txns.end(stream), txns.commit_errors
    finally:
        await within(producer.close(), 60, "close")

    print(
        f"\ncommitted records {len(txns.committed)}, aborted transactions {txns.aborted}, "
        f"commit errors {txns.commit_errors}"
    )
    await txns.check_committed(cluster.bootstrap_servers)
    assert txns.aborted >= 1


async def test_transaction_with_records_expired_in_a_failover_aborts_and_the_next_commits(
    cluster: KafkaCluster, cluster_topic, request: pytest.FixtureRequest
) -> None:
    """Records of a transaction expire while their leader is down: the transaction
    can only be aborted; after the abort (and a new epoch) the next one commits."""
    topic = cluster_topic(3)
    txn_id = f"cluster-txn-{uuid.uuid4().hex[:8]}"
    producer = make_producer(
        cluster,
        SETTINGS,
        compression="lz4",
        transactional_id=txn_id,
        request_timeout_ms=1500,
        delivery_timeout_ms=3000,
    )
    await within(producer.start(), 30, "start")
    txns = Transactions(producer, topic)
    try:
        await within(producer.init_transactions(), 60, "init_transactions")
        _check_transaction_version(producer, request)
        stream = await txns.begin(300, "first transaction")
        assert await txns.end(stream), txns.commit_errors

        stream = await txns.begin(300, "before the kill")
        coordinator = await asyncio.to_thread(cluster.coordinator, txn_id)
        leaders = await asyncio.to_thread(cluster.leaders, topic)
        # A partition leader that does not coordinate: only records fail here.
        victim = next(n for n in leaders.values() if n != coordinator)
        await asyncio.to_thread(cluster.kill, victim)
        for _ in range(600):  # bounded: 60 s
            if stream.failed or stream.enqueue_error is not None:
                break
            await asyncio.sleep(0.1)
        assert stream.failed, "no record of the transaction expired"
        assert not await txns.end(stream)
        assert isinstance(txns.commit_errors[-1], errors.KafkaError)
        await _restore(cluster, victim, topic)

        stream = await txns.begin(300, "after the abort")
        assert await txns.end(stream), txns.commit_errors
    finally:
        await within(producer.close(), 60, "close")
    await txns.check_committed(cluster.bootstrap_servers)
    assert txns.aborted == 1
