"""What transactions tell the caller is what happened: on MockCluster, through real sockets.

* a replayed completion of a prepared transaction never ends a later
  transaction of the same producer (v1 shares one producer id and epoch
  across transactions unless the producer moves on to a new epoch);
* completing one's own prepared transaction after it ended the other way
  raises TransactionNotCompletedError and the producer goes on;
* once a transaction failed, nothing more of it is sent, and no future of it
  reports success (a refusal found inside a sender pass; an acknowledgement
  that arrives after the failure);
* close() after a commit that timed out ends the transaction and says how.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.protocol.generated import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
)
from aioproducer.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)
from aioproducer.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.txn import TxnStatus
from tests.mock.test_sender_wakeups import wakeups_after_failure
from tests.security.client_matrix import USERS, plain_producer
from tests.support.aio import until, within

pytestmark = pytest.mark.asyncio

PRODUCE = 0
BOUND = 30.0  # far above the mock's milliseconds, far below a hang's forever


def _leaders(cluster: MockCluster, topic: str) -> dict[int, int]:
    """Broker id -> a partition it leads."""
    return {cluster.leader(topic, p): p for p in cluster.partitions(topic)}


async def _prepared(p: Producer, value: bytes) -> Any:
    """Initialize ``p``, write ``value`` in a transaction and prepare it."""
    await within(p.init_transactions(), BOUND)
    await p.begin_transaction()
    await within(p.send("tx", value), BOUND)
    return await within(p.prepare_transaction(), BOUND)


@pytest.mark.parametrize("version", [1, 2])
async def test_a_replayed_completion_never_ends_a_later_transaction(version: int) -> None:
    async with MockCluster(brokers=1, transaction_version=version) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with (
            Producer(cluster.bootstrap_servers, transactional_id="t", max_block_ms=10_000) as p,
            Producer(cluster.bootstrap_servers, max_block_ms=10_000) as courier,
        ):
            prepared = await _prepared(p, b"first")
            await within(p.complete_transaction(prepared, commit=True), BOUND)
            await p.begin_transaction()
            second = await within(p.send("tx", b"second"), BOUND)  # acknowledged, not committed yet
            # Replays: the same way on its own producer is a no-op, the other way
            # is refused with the real outcome; a courier is refused either way.
            await within(p.complete_transaction(prepared, commit=True), BOUND)
            with pytest.raises(errors.TransactionNotCompletedError, match="already committed"):
                await within(p.complete_transaction(prepared, commit=False), BOUND)
            for commit in (False, True):
                with pytest.raises(errors.TransactionNotCompletedError, match="no longer open"):
                    await within(courier.complete_transaction(prepared, commit=commit), BOUND)
            assert cluster.coordinator.by_id["t"].status is TxnStatus.ONGOING  # the second is open
            await within(p.commit_transaction(), BOUND)
        assert second.offset > 0
        assert [r.value for r in cluster.records("tx")] == [b"first", b"second"]


@pytest.mark.parametrize("version", [1, 2])
async def test_completing_ones_own_prepared_transaction_ended_the_other_way(version: int) -> None:
    async with MockCluster(brokers=1, transaction_version=version) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with (
            Producer(cluster.bootstrap_servers, transactional_id="t", max_block_ms=10_000) as p,
            Producer(cluster.bootstrap_servers, max_block_ms=10_000) as courier,
        ):
            prepared = await _prepared(p, b"aborted elsewhere")
            await within(courier.complete_transaction(prepared, commit=False), BOUND)
            with pytest.raises(
                errors.TransactionNotCompletedError, match="already aborted.*goes on"
            ):
                await within(p.complete_transaction(prepared, commit=True), BOUND)
            # Not stuck in PREPARED: the producer goes on.
            await p.begin_transaction()
            await within(p.send("tx", b"next"), BOUND)
            await within(p.commit_transaction(), BOUND)
        assert [r.value for r in cluster.records("tx")] == [b"next"]


async def test_a_refusal_found_inside_a_pass_stops_that_pass() -> None:
    """Broker B refuses the login when the pass finds both brokers' batches
    ready: the transaction fails there, and broker A's batch of it must not go
    out in the same pass (the abort would void a record reported written)."""
    users = dict(USERS)
    async with MockCluster(brokers=2, sasl_mechanisms=["PLAIN"], users=users) as cluster:
        cluster.create_topic("tx", partitions=4)
        coordinator = cluster.coordinator_for("t")
        leaders = _leaders(cluster, "tx")
        refusing = next(b for b in leaders if b != coordinator)
        healthy = next(b for b in leaders if b != refusing)
        producer = plain_producer(
            cluster,
            transactional_id="t",
            linger_ms=600_000,
            delivery_timeout_ms=700_000,
            max_block_ms=10_000,
        )
        async with producer as p:
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            joined = [
                await p.enqueue("tx", b"join", partition=leaders[b]) for b in (healthy, refusing)
            ]
            await within(p.flush(), BOUND)
            assert all(f.done() and f.exception() is None for f in joined)
            client = p._running.client
            assert client is not None
            # The password rotates and only the refusing broker's connection drops;
            # its reconnection is refused before the next records are queued.
            cluster.sasl_config.users["alice"] = "rotated-Password"
            cluster.drop_connections(refusing)
            await until(
                lambda: (
                    client.connections.ready_connection(refusing) is None
                    and client.connections.authentication_failure(refusing) is not None
                ),
                BOUND,
                "the refusal",
            )
            produces = cluster.request_count(PRODUCE, broker=healthy)
            to_healthy = await p.enqueue("tx", b"healthy", partition=leaders[healthy])
            to_refusing = await p.enqueue("tx", b"refused", partition=leaders[refusing])
            await within(p.flush(), BOUND)  # failures are the futures' to report
            for fut in (to_healthy, to_refusing):
                await within(asyncio.wait([fut]), BOUND)
            refused = to_refusing.exception()
            voided = to_healthy.exception()
            assert isinstance(refused, errors.SaslAuthenticationError), refused
            assert isinstance(voided, errors.TransactionAbortedError), voided
            assert (refused.may_have_been_written, voided.may_have_been_written) == (False, False)
            assert (
                cluster.request_count(PRODUCE, broker=healthy) == produces
            )  # nothing more went out
            await within(p.abort_transaction(), BOUND)
        assert [
            r.value for r in cluster.records("tx", include_uncommitted=True) if r.value != b"join"
        ] == []


async def test_an_acknowledgement_after_the_transaction_failed_reports_no_success() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("tx", partitions=4)
        leaders = _leaders(cluster, "tx")
        coordinator = cluster.coordinator_for("t")
        stalled = next(b for b in leaders if b != coordinator)
        failing = next(b for b in leaders if b != stalled)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="t", linger_ms=0, max_block_ms=10_000
        ) as p:
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            for b in (stalled, failing):
                await within(p.send("tx", b"join", partition=leaders[b]), BOUND)
            client, txn = p._running.client, p._running.txn
            assert client is not None and txn is not None
            cluster.stall_broker(stalled)
            in_flight = await p.enqueue("tx", b"in flight", partition=leaders[stalled])
            await until(
                lambda: client.connections.in_flight(stalled) == 1, BOUND, "the stalled request"
            )
            cluster.fail_produce("tx", leaders[failing], errors.InvalidRecordError.code)
            failed = await p.enqueue("tx", b"refused", partition=leaders[failing])
            await within(asyncio.wait([failed]), BOUND)
            assert isinstance(failed.exception(), errors.InvalidRecordError)
            assert failed.exception().may_have_been_written is False
            assert txn.state.name == "ABORTABLE_ERROR"
            cluster.resume_broker(stalled)  # its batch is written and acknowledged now
            await within(asyncio.wait([in_flight]), BOUND)
            voided = in_flight.exception()
            assert isinstance(voided, errors.TransactionAbortedError), voided
            assert voided.may_have_been_written is True  # in the log, voided by the abort
            await within(p.abort_transaction(), BOUND)
            await p.begin_transaction()
            await within(p.send("tx", b"after", partition=leaders[stalled]), BOUND)
            await within(p.commit_transaction(), BOUND)
        assert sorted(r.value for r in cluster.records("tx")) == [b"after"]


async def _commit_times_out(cluster: MockCluster, p: Producer) -> None:
    """Begin, write one record, then a commit whose flush outlasts max_block_ms."""
    await within(p.init_transactions(), BOUND)
    await p.begin_transaction()
    await within(p.send("tx", b"one"), BOUND)
    cluster.stall_broker(cluster.leader("tx", 0))
    await p.enqueue("tx", b"two")
    with pytest.raises(errors.KafkaTimeoutError):
        await within(p.commit_transaction(), BOUND)
    assert p._running.txn is not None and p._running.txn.state.name == "COMMITTING"


async def test_close_after_a_commit_timed_out_finishes_the_commit() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        p = Producer(cluster.bootstrap_servers, transactional_id="t", max_block_ms=3000)
        await within(p.start(), BOUND)
        await _commit_times_out(cluster, p)
        cluster.resume_broker(cluster.leader("tx", 0))
        await within(p.close(), BOUND)  # returns: the commit finished
        assert cluster.coordinator.by_id["t"].status is TxnStatus.COMPLETE_COMMIT
        assert [r.value for r in cluster.records("tx")] == [b"one", b"two"]


async def test_close_after_a_commit_timed_out_aborts_what_cannot_commit() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        p = Producer(cluster.bootstrap_servers, transactional_id="t", max_block_ms=3000)
        await within(p.start(), BOUND)
        await _commit_times_out(cluster, p)
        # The stalled record is refused once the broker answers: no commit then.
        cluster.fail_produce("tx", 0, errors.InvalidRecordError.code)
        cluster.resume_broker(cluster.leader("tx", 0))
        with pytest.raises(errors.TransactionAbortedError, match="aborted it"):
            await within(p.close(), BOUND)
        # Aborted, then moved on to a new epoch (the refused batch's sequences, KIP-360).
        assert cluster.coordinator.by_id["t"].status is not TxnStatus.ONGOING
        assert cluster.records("tx") == []
        assert [r.value for r in cluster.records("tx", include_uncommitted=True)] == [b"one"]


async def test_close_says_when_it_can_end_the_transaction_neither_way() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        p = Producer(cluster.bootstrap_servers, transactional_id="t", max_block_ms=3000)
        await within(p.start(), BOUND)
        await _commit_times_out(cluster, p)
        cluster.resume_broker(cluster.leader("tx", 0))
        # The coordinator stays unavailable: EndTxn is asked again until the bound.
        cluster.intercept(
            26,
            lambda body, ctx: EndTxnResponse(error_code=errors.CoordinatorNotAvailableError.code),
        )
        with pytest.raises(errors.TransactionNotCompletedError, match="could not end"):
            await within(p.close(timeout=2.0), BOUND)
        assert p._closed


async def test_an_abort_ends_a_transaction_whose_registration_was_never_answered() -> None:
    """The coordinator registered the partition, but the producer never heard so
    (its AddPartitionsToTxn kept being asked again until max_block_ms): the
    transaction is open there, and the abort must end it all the same."""
    async with MockCluster(brokers=1, transaction_version=1) as cluster:
        cluster.create_topic("tx", partitions=1)

        def registered_unanswered(body: Any, ctx: Any) -> AddPartitionsToTxnResponse:
            txn = cluster.coordinator.by_id["t"]
            cluster.coordinator.add_partitions(txn, [("tx", 0)])
            loading = errors.CoordinatorLoadInProgressError.code
            return AddPartitionsToTxnResponse(
                results_by_topic_v3_and_below=[
                    AddPartitionsToTxnTopicResult(
                        name="tx",
                        results_by_partition=[
                            AddPartitionsToTxnPartitionResult(
                                partition_index=0, partition_error_code=loading
                            )
                        ],
                    )
                ]
            )

        async with Producer(
            cluster.bootstrap_servers, transactional_id="t", max_block_ms=2000, retry_backoff_ms=20
        ) as p:
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            cluster.intercept(24, registered_unanswered)
            record = await p.enqueue("tx", b"never registered here")
            await within(asyncio.wait([record]), BOUND)
            assert isinstance(record.exception(), errors.KafkaError)
            assert record.exception().may_have_been_written is False
            assert cluster.coordinator.by_id["t"].status is TxnStatus.ONGOING  # open there
            cluster.intercept(24, None)
            await within(p.abort_transaction(), BOUND)
            assert cluster.coordinator.by_id["t"].status is not TxnStatus.ONGOING
            await p.begin_transaction()
            await within(p.send("tx", b"next"), BOUND)
            await within(p.commit_transaction(), BOUND)
        assert [r.value for r in cluster.records("tx")] == [b"next"]


async def test_a_failed_send_offsets_fails_the_queued_batches_at_once() -> None:
    """TxnOffsetCommit refused for good: the transaction can only be aborted, and
    its failure wakes the sender to fail a lingering batch now, not at its linger."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        refused = errors.GroupAuthorizationFailedError.code

        def refuse(body: Any, ctx: Any) -> TxnOffsetCommitResponse:
            return TxnOffsetCommitResponse(
                topics=[
                    TxnOffsetCommitResponseTopic(
                        name=t.name,
                        partitions=[
                            TxnOffsetCommitResponsePartition(
                                partition_index=q.partition_index, error_code=refused
                            )
                            for q in t.partitions
                        ],
                    )
                    for t in body.topics
                ]
            )

        async with Producer(
            cluster.bootstrap_servers,
            transactional_id="t",
            linger_ms=600_000,
            delivery_timeout_ms=700_000,
            max_block_ms=10_000,
        ) as p:
            sender, txn = p._running.sender, p._running.txn
            assert sender is not None and txn is not None
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            await within(p.flush(), BOUND)
            lingering = await p.enqueue("tx", b"lingers")
            woken_failed = wakeups_after_failure(sender, txn)
            cluster.intercept(28, refuse)
            with pytest.raises(errors.GroupAuthorizationFailedError):
                await within(p.send_offsets_to_transaction({("in", 0): 5}, "group"), BOUND)
            assert any(woken_failed), woken_failed  # the failure itself rang
            await within(asyncio.wait([lingering]), BOUND)
            assert isinstance(lingering.exception(), errors.TransactionAbortedError)
            assert lingering.exception().may_have_been_written is False
            await within(p.abort_transaction(), BOUND)
        assert cluster.records("tx", include_uncommitted=True) == []


async def test_a_v2_abort_of_records_never_sent_ends_cleanly() -> None:
    """Under v2 a partition counts as added at its first record; aborted before
    that record went out, the coordinator has nothing open, and Kafka 4's
    coordinator aborts an empty transaction all the same (bumping the epoch)."""
    async with MockCluster(brokers=1, transaction_version=2) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            transactional_id="t",
            linger_ms=600_000,
            delivery_timeout_ms=700_000,
        ) as p:
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            lingering = await p.enqueue("tx", b"never sent")
            await within(p.abort_transaction(), BOUND)
            assert isinstance(lingering.exception(), errors.TransactionAbortedError)
            assert lingering.exception().may_have_been_written is False
            await p.begin_transaction()
            await p.enqueue("tx", b"next")
            await within(p.commit_transaction(), BOUND)
        assert [r.value for r in cluster.records("tx", include_uncommitted=True)] == [b"next"]


async def test_a_completion_that_committed_says_so_though_the_new_epoch_was_refused() -> None:
    """v1: EndTxn commits, then a newer producer with the id starts before this
    producer's epoch bump: the completion succeeded (the caller must not redo
    the work); the producer is fenced for what comes next."""
    async with MockCluster(brokers=1, transaction_version=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, transactional_id="t", max_block_ms=5000
        ) as p:
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()
            await within(p.send("tx", b"payload"), BOUND)
            prepared = await within(p.prepare_transaction(), BOUND)

            def newer_producer_first(body: Any, ctx: Any) -> None:
                if body.producer_id >= 0:  # this producer's bump after EndTxn
                    cluster.intercept(22, None)
                    cluster.coordinator.init_producer_id("t", 60_000, -1, -1, ctx.api_version)

            cluster.intercept(22, newer_producer_first)
            await within(p.complete_transaction(prepared, commit=True), BOUND)
            await within(p.complete_transaction(prepared, commit=True), BOUND)  # a replay: no-op
            with pytest.raises(errors.ProducerFencedError):
                await p.begin_transaction()
        assert [r.value for r in cluster.records("tx")] == [b"payload"]


async def test_a_prepare_after_an_unanswered_registration_is_not_empty() -> None:
    """AddOffsetsToTxn registered the group, but its answer never came: the
    prepared transaction is open on the coordinator and its completion ends it."""
    async with MockCluster(brokers=1, transaction_version=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with (
            Producer(
                cluster.bootstrap_servers,
                transactional_id="t",
                max_block_ms=1000,
                retry_backoff_ms=20,
            ) as p,
            Producer(cluster.bootstrap_servers, max_block_ms=5000) as courier,
        ):
            await within(p.init_transactions(), BOUND)
            await p.begin_transaction()

            def registered_unanswered(body: Any, ctx: Any) -> AddOffsetsToTxnResponse:
                cluster.coordinator.add_offsets(cluster.coordinator.by_id["t"], body.group_id)
                return AddOffsetsToTxnResponse(
                    error_code=errors.CoordinatorLoadInProgressError.code
                )

            cluster.intercept(25, registered_unanswered)
            with pytest.raises(errors.KafkaTimeoutError):
                await within(p.send_offsets_to_transaction({("in", 0): 5}, "g"), BOUND)
            cluster.intercept(25, None)
            prepared = await within(p.prepare_transaction(), BOUND)
            assert not prepared.empty
            await within(courier.complete_transaction(prepared, commit=False), BOUND)
            assert cluster.coordinator.by_id["t"].status is not TxnStatus.ONGOING
