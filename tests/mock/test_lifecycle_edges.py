"""Start, close and cancellation at the edges: concurrent starts, an open
transaction at close, and an enqueue() cancelled before or after its append."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer, errors
from aioproducer.protocol.apis import INIT_PRODUCER_ID
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.txn import TxnStatus
from tests.support.aio import until

pytestmark = pytest.mark.asyncio


def _live_senders() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "aioproducer-sender" and not t.done()]


async def test_concurrent_starts_make_one_sender_and_close_stops_everything() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("s", partitions=1)
        before = len(_live_senders())
        p = Producer(cluster.bootstrap_servers)
        await asyncio.gather(p.start(), p.start(), p.start())
        assert len(_live_senders()) == before + 1
        await asyncio.wait_for(p.send("s", b"v"), 5)
        assert cluster.request_count(INIT_PRODUCER_ID.key) == 1
        await p.close()
        assert len(_live_senders()) == before
        server = cluster.servers[0]
        await until(
            lambda: not server.connections, 10, "the broker noticing the closed connections"
        )
        with pytest.raises(errors.ProducerClosedError):
            await p.start()


async def test_close_aborts_an_open_transaction() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        p = Producer(cluster.bootstrap_servers, transactional_id="closing")
        await p.start()
        await p.init_transactions()
        await p.begin_transaction()
        for i in range(4):
            await asyncio.wait_for(p.send("t", b"v%d" % i, partition=i % 2), 5)
        assert cluster.coordinator.by_id["closing"].status is TxnStatus.ONGOING
        await asyncio.wait_for(p.close(timeout=5), 10)
        assert cluster.coordinator.by_id["closing"].status is TxnStatus.COMPLETE_ABORT
        assert cluster.records("t") == []  # hidden from read_committed readers
        assert len(cluster.records("t", include_uncommitted=True)) == 4


async def test_close_with_an_unresponsive_coordinator_keeps_to_its_timeout() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        p = Producer(cluster.bootstrap_servers, transactional_id="stuck", max_block_ms=30_000)
        await p.start()
        await p.init_transactions()
        await p.begin_transaction()
        await asyncio.wait_for(p.send("t", b"v"), 5)
        cluster.stall_broker(0)
        # Without the bound, the abort would wait max_block_ms (30 s). The
        # transaction stays open, and close() says so once it has shut down.
        with pytest.raises(errors.TransactionNotCompletedError, match="could not end"):
            await asyncio.wait_for(p.close(timeout=0.5), 10)
        assert p._closed
        cluster.resume_broker(0)
        assert cluster.coordinator.by_id["stuck"].status is TxnStatus.ONGOING


async def test_close_leaves_a_committed_transaction_alone() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with Producer(cluster.bootstrap_servers, transactional_id="done") as p:
            await p.init_transactions()
            async with p.transaction():
                await p.send("t", b"kept")
        assert cluster.coordinator.by_id["done"].status is TxnStatus.COMPLETE_COMMIT
        assert [r.value for r in cluster.records("t")] == [b"kept"]


async def test_cancelled_enqueue_appended_nothing_or_returned_its_future() -> None:
    """Whatever the moment of cancellation, a cancelled enqueue() stored nothing,
    and one that was not cancelled stored its record."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("c", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, batch_size=64) as p:
            await p.send("c", b"warm-up")
            outcomes: dict[bytes, str] = {}
            for i in range(40):
                value = b"r%02d" % i
                task = asyncio.create_task(p.enqueue("c", value * 10, partition=0))
                # Cancel at each step of the call in turn: before it ran, at its
                # first suspension, or after it returned.
                for _ in range(i % 3):
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    fut = await task
                except asyncio.CancelledError:
                    outcomes[value * 10] = "cancelled"
                else:
                    await asyncio.wait_for(fut, 5)
                    outcomes[value * 10] = "returned"
            await asyncio.wait_for(p.flush(), 5)
            assert p._pool.available == p._pool.total  # a cancelled call holds no memory
        stored = {r.value for r in cluster.records("c")}
        assert "cancelled" in outcomes.values() and "returned" in outcomes.values()
        for value, outcome in outcomes.items():
            assert (value in stored) == (outcome == "returned"), (value, outcome)


async def test_enqueue_cancelled_while_waiting_for_metadata_appends_nothing() -> None:
    async with MockCluster(brokers=1, auto_create_topics=False) as cluster:
        # max_block_ms far beyond the check below, even on a slow machine.
        async with Producer(cluster.bootstrap_servers, max_block_ms=5000) as p:
            task = asyncio.create_task(p.enqueue("later", b"v"))
            await asyncio.sleep(0.05)
            assert not task.done()  # the topic does not exist yet
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except errors.KafkaTimeoutError:
                # Python 3.11's asyncio.wait_for can lose a cancellation that
                # races the metadata update it waits for; the call then ends at
                # max_block_ms, having appended nothing either way.
                pass
            cluster.create_topic("later", partitions=1)
            cluster.create_topic("other", partitions=1)
            await asyncio.wait_for(p.send("other", b"after"), 5)
            await asyncio.wait_for(p.flush(), 5)
            assert p._pool.available == p._pool.total
        assert cluster.records("later") == []
        assert [r.value for r in cluster.records("other")] == [b"after"]
