"""aioproducer's transactions on the mock cluster, whose transaction handling
librdkafka vouches for (test_mock_fidelity): aborted records stay invisible."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.protocol.generated import InitProducerIdResponse
from aioproducer.testing import MockCluster
from tests.support.aio import until

pytestmark = pytest.mark.asyncio


async def test_commit_visible_abort_hidden_and_context_manager() -> None:
    async with MockCluster(brokers=2, default_partitions=3) as cluster:
        cluster.create_topic("tx", partitions=3)
        async with Producer(cluster.bootstrap_servers, transactional_id="writer") as p:
            await asyncio.wait_for(p.init_transactions(), 10)
            async with p.transaction():
                for i in range(30):
                    await p.enqueue("tx", b"committed-%d" % i, key=b"%d" % i)
            await p.begin_transaction()
            for i in range(30):
                await p.enqueue("tx", b"aborted-%d" % i, key=b"%d" % i)
            await p.flush()  # on the broker, inside the open transaction
            await p.abort_transaction()
            with pytest.raises(ValueError):
                async with p.transaction():
                    await p.send("tx", b"aborted-by-exception", partition=0)
                    raise ValueError("handler failed")
        visible = sorted(r.value for r in cluster.records("tx"))
        everything = [r.value for r in cluster.records("tx", include_uncommitted=True)]
    assert visible == sorted(b"committed-%d" % i for i in range(30))
    assert sum(v.startswith(b"aborted") for v in everything) == 31  # written, then aborted


async def test_send_offsets_reach_the_group_coordinator() -> None:
    async with MockCluster(brokers=1) as cluster:
        async with Producer(cluster.bootstrap_servers, transactional_id="ctp") as p:
            await p.init_transactions()
            async with p.transaction():
                await p.send("out", b"derived")
                await p.send_offsets_to_transaction({("in", 0): 42, ("in", 1): 7}, "grp")
        committed = cluster.coordinator.committed_offsets
    assert committed == {"grp": {("in", 0): 42, ("in", 1): 7}}


async def test_injected_fencing_is_final() -> None:
    async with MockCluster(brokers=1) as cluster:
        async with Producer(cluster.bootstrap_servers, transactional_id="fenced") as first:
            await first.init_transactions()
            async with Producer(cluster.bootstrap_servers, transactional_id="fenced") as second:
                await second.init_transactions()
                await first.begin_transaction()
                with pytest.raises(errors.ProducerFencedError):
                    await asyncio.wait_for(first.send("t", b"zombie"), 10)
                with pytest.raises(errors.ProducerFencedError):
                    await first.begin_transaction()
        assert [r.value for r in cluster.records("t", include_uncommitted=True)] == []


async def test_retried_epoch_bump_whose_answer_was_lost_is_accepted() -> None:
    """KIP-360: InitProducerId naming the epoch before the last bump is a retry of
    that bump; the coordinator answers the current epoch instead of fencing."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        lost: list[tuple[int, int]] = []

        def lose_the_bump_answer(body: Any, ctx: Any) -> Any:
            if body.producer_id < 0 or lost:
                return None  # the first InitProducerId, or the retry: served normally
            code, pid, epoch = cluster.coordinator.init_producer_id(
                body.transactional_id,
                body.transaction_timeout_ms,
                body.producer_id,
                body.producer_epoch,
                ctx.api_version,
            )
            lost.append((pid, epoch))
            cluster.drop_connections(ctx.broker_id)  # the answer never arrives
            return InitProducerIdResponse(error_code=code, producer_id=pid, producer_epoch=epoch)

        cluster.intercept(22, lose_the_bump_answer)
        async with Producer(cluster.bootstrap_servers, transactional_id="bump", linger_ms=0) as p:
            await p.init_transactions()
            await p.begin_transaction()
            # A sequence error fails the batch: the abort moves to a new epoch.
            cluster.fail_produce("t", 0, errors.OutOfOrderSequenceNumberError.code)
            with pytest.raises(errors.OutOfOrderSequenceNumberError):
                await asyncio.wait_for(p.send("t", b"failed", partition=0), 5)
            await asyncio.wait_for(p.abort_transaction(), 10)
            assert lost == [(1000, 1)]
            async with p.transaction():
                await p.send("t", b"committed", partition=0)
        assert [r.value for r in cluster.records("t")] == [b"committed"]
        assert cluster.coordinator.by_id["bump"].producer_epoch == 1  # bumped once


async def test_a_batch_put_back_during_an_abort_is_aborted_not_sent_again() -> None:
    """A batch in flight when abort_transaction() starts, and answered with a
    retriable error, must not go out again: the abort marker would void a
    record reported sent (Java's Sender aborts undrained batches while
    aborting)."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("tx", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            transactional_id="abort-retry",
            linger_ms=0,
            retry_backoff_ms=10,
        ) as p:
            await asyncio.wait_for(p.init_transactions(), 10)
            await p.begin_transaction()
            await asyncio.wait_for(p.send("tx", b"first"), 10)  # the partition joined
            client, txn = p._running.client, p._running.txn
            assert client is not None and txn is not None
            produces = cluster.request_count(0)
            cluster.fail_produce("tx", 0, errors.NotEnoughReplicasError.code)  # retriable
            cluster.stall_broker(0)
            refused = await p.enqueue("tx", b"refused, then put back")
            await until(
                lambda: client.connections.in_flight(0) == 1,
                10,
                "the request to the stalled broker",
            )
            abort = asyncio.create_task(p.abort_transaction())
            await until(lambda: txn.state.name == "ABORTING", 10, "the abort under way")
            cluster.resume_broker(0)
            with pytest.raises(errors.TransactionAbortedError):
                await asyncio.wait_for(refused, 10)
            await asyncio.wait_for(abort, 10)
            assert cluster.request_count(0) == produces + 1  # never sent again
        assert cluster.records("tx") == []
        assert [r.value for r in cluster.records("tx", include_uncommitted=True)] == [b"first"]
