"""Metadata refreshes: paced and shared (KIP-580), sent to the least loaded node,
partitions added and topics forgotten, rebootstrap (KIP-899).

Storm tests count the Metadata requests the mock received over a window and
compare them with what the backoff allows: at most one refresh per
``retry_backoff_ms`` (growing towards ``retry_backoff_max_ms``), plus slack.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer import errors
from aioproducer.protocol.generated import MetadataRequest
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from tests.support.aio import until
from tests.support.producers import make_producer

METADATA = 3
BACKOFF_MS = 100
WINDOW = 1.5


SETTINGS: dict[str, Any] = {
    "linger_ms": 0,
    "retry_backoff_ms": BACKOFF_MS,
    "retry_backoff_max_ms": 1000,
}


def _bound(window: float) -> int:
    """Refreshes the backoff allows in ``window`` seconds (jitter is at most -20%), plus slack."""
    return int(window / (BACKOFF_MS * 0.8 / 1000)) + 3


async def _metadata_during(cluster: MockCluster, window: float) -> int:
    before = cluster.request_count(METADATA)
    await asyncio.sleep(window)
    return cluster.request_count(METADATA) - before


@pytest.mark.asyncio
async def test_missing_topic_without_auto_create_is_refreshed_with_backoff() -> None:
    async with (
        MockCluster(brokers=1, auto_create_topics=False) as cluster,
        make_producer(cluster, SETTINGS, max_block_ms=int(WINDOW * 1000) + 1000) as producer,
    ):
        waiters = [asyncio.create_task(producer.enqueue("missing", b"v")) for _ in range(20)]
        count = await _metadata_during(cluster, WINDOW)
        # 20 callers share one refresh at a time, paced by the backoff.
        assert count <= _bound(WINDOW), count
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(r, errors.KafkaTimeoutError) for r in results), results


@pytest.mark.asyncio
async def test_deleted_topic_with_queued_batches_is_refreshed_with_backoff() -> None:
    async with MockCluster(brokers=1, auto_create_topics=False) as cluster:
        cluster.create_topic("gone", partitions=2)
        async with make_producer(
            cluster, SETTINGS, delivery_timeout_ms=3000, request_timeout_ms=1000, max_block_ms=2500
        ) as producer:
            await producer.send("gone", b"first")
            cluster.delete_topic("gone")
            # Batches already queued: the broker refuses them, metadata drops the topic ...
            futures = [await producer.enqueue("gone", b"v", partition=p) for p in (0, 1)]
            client = producer._running.client
            assert client is not None
            await until(
                lambda: not client.snapshot.topics["gone"].partitions,
                10,
                "metadata without the topic",
            )
            # ... and new records wait for it to come back.
            waiting = [asyncio.create_task(producer.enqueue("gone", b"w")) for _ in range(5)]
            count = await _metadata_during(cluster, WINDOW)
            assert count <= _bound(WINDOW), count
            results = await asyncio.gather(*futures, *waiting, return_exceptions=True)
            assert all(isinstance(r, errors.KafkaError) for r in results), results


@pytest.mark.asyncio
async def test_leaderless_partition_with_traffic_elsewhere_is_refreshed_with_backoff() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        async with make_producer(
            cluster, SETTINGS, delivery_timeout_ms=30_000, request_timeout_ms=1000
        ) as producer:
            await producer.send("t", b"warm", partition=0)
            await producer.send("t", b"warm", partition=1)
            cluster.topic_states["t"].partitions[0].leader = -1  # election under way
            stuck = await producer.enqueue("t", b"waits", partition=0)

            async def traffic() -> tuple[int, float]:
                # At least WINDOW, and at least 20 sends however slow the machine:
                # every response wakes the sender, plenty of chances to storm.
                sent = 0
                start = time.monotonic()
                while time.monotonic() - start < WINDOW or sent <= 20:
                    await producer.send("t", b"x", partition=1)
                    sent += 1
                return sent, time.monotonic() - start

            before = cluster.request_count(METADATA)
            sent, window = await traffic()
            count = cluster.request_count(METADATA) - before
            assert count <= _bound(window), (count, sent, window)
            cluster.topic_states["t"].partitions[0].leader = 0  # elected
            assert (await asyncio.wait_for(stuck, 10)).partition == 0


@pytest.mark.asyncio
async def test_metadata_goes_to_the_least_loaded_node_not_a_stalled_one() -> None:
    """A leader moves between two healthy brokers while a third is stalled.

    The refresh that follows NOT_LEADER must not wait on the stalled broker
    (which has a request stuck in flight); recovery is quick in every trial.
    The request timeout is long so that "quick" (under half of it) cannot be
    missed by a slow machine, only by a refresh stuck on the stalled broker.
    """
    request_timeout = 20.0
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=3)  # partition i led by broker i
        async with make_producer(
            cluster,
            SETTINGS,
            request_timeout_ms=int(request_timeout * 1000),
            delivery_timeout_ms=60000,
            retry_backoff_ms=10,
            retry_backoff_max_ms=50,
        ) as producer:
            for p in range(3):
                await producer.send("t", b"warm", partition=p)
            cluster.stall_broker(2)
            stuck = await producer.enqueue("t", b"stuck", partition=2)
            client = producer._running.client
            assert client is not None
            await until(
                lambda: client.connections.in_flight(2) > 0, 10, "the request to the stalled broker"
            )
            for trial in range(12):
                cluster.move_leader("t", 0, to_broker=1 if trial % 2 == 0 else 0)
                start = time.monotonic()
                await asyncio.wait_for(producer.send("t", b"moved", partition=0), 30)
                elapsed = time.monotonic() - start
                assert elapsed < request_timeout / 2, f"trial {trial}: {elapsed:.2f} s"
            cluster.resume_broker(2)
            assert (await asyncio.wait_for(stuck, 30)).partition == 2
        assert len(cluster.records("t")) == 3 + 12 + 1


@pytest.mark.asyncio
async def test_least_loaded_node_prefers_idle_live_connections() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=3)
        async with make_producer(cluster, SETTINGS) as producer:
            for p in range(3):
                await producer.send("t", b"warm", partition=p)
            client = producer._running.client
            assert client is not None
            # The bootstrap connection is gone once real node ids are known.
            assert all(node >= 0 for node in client.connections.throttle_stats())
            cluster.stall_broker(1)
            pending = [await producer.enqueue("t", b"x", partition=1) for _ in range(3)]
            await until(
                lambda: client.connections.in_flight(1) > 0, 10, "a request to the stalled broker"
            )
            assert {client.connections.least_loaded_node() for _ in range(30)} <= {0, 2}
            cluster.resume_broker(1)
            await asyncio.gather(*pending)


@pytest.mark.asyncio
async def test_send_to_a_partition_just_added_refreshes_metadata() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        async with make_producer(cluster, SETTINGS, max_block_ms=3000) as producer:
            await producer.send("t", b"a", partition=1)
            cluster.add_partitions("t", 4)
            md = await asyncio.wait_for(producer.send("t", b"b", partition=3), 10)
            assert md.partition == 3
            # A partition that never appears still fails, after max_block_ms.
            with pytest.raises(errors.InvalidPartitionError, match="9"):
                await asyncio.wait_for(producer.send("t", b"c", partition=9), 10)
        assert [r.value for r in cluster.records("t")] == [b"a", b"b"]


@pytest.mark.asyncio
async def test_close_wakes_an_enqueue_waiting_for_metadata() -> None:
    async with MockCluster(brokers=1, auto_create_topics=False) as cluster:
        producer = make_producer(cluster, SETTINGS, max_block_ms=60000)
        await producer.start()
        waiting = asyncio.create_task(producer.enqueue("missing", b"v"))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await asyncio.wait_for(producer.close(), 10)
        with pytest.raises(errors.ProducerClosedError):
            await asyncio.wait_for(waiting, 2)


@pytest.mark.asyncio
async def test_auto_created_topic_passes_through_leader_not_available() -> None:
    async with MockCluster(brokers=2) as cluster:
        async with make_producer(cluster, SETTINGS) as producer:
            before = cluster.request_count(METADATA)
            md = await asyncio.wait_for(producer.send("fresh", b"v"), 10)
            # The creating request (LEADER_NOT_AVAILABLE), then the one with leaders.
            assert cluster.request_count(METADATA) - before >= 2
        assert md.topic == "fresh"
        assert [r.value for r in cluster.records("fresh")] == [b"v"]


@pytest.mark.asyncio
async def test_idle_topics_are_forgotten_and_not_recreated() -> None:
    requested: list[set[str]] = []

    def record(body: MetadataRequest, ctx: RequestContext) -> None:
        requested.append({t.name for t in body.topics or ()})  # then the default answer

    async with MockCluster(brokers=2) as cluster:
        for name in ("old", "busy", "stuck"):
            cluster.create_topic(name, partitions=2)
        busy = next(p for p in (0, 1) if cluster.leader("busy", p) == 0)
        stuck = next(p for p in (0, 1) if cluster.leader("stuck", p) == 1)
        cluster.intercept(METADATA, record)
        async with make_producer(
            cluster, SETTINGS, metadata_max_idle_ms=300, request_timeout_ms=5000
        ) as producer:
            await producer.send("old", b"once")
            await producer.send("stuck", b"warm", partition=stuck)
            cluster.stall_broker(1)
            pending = await producer.enqueue("stuck", b"in flight", partition=stuck)
            client = producer._running.client
            assert client is not None
            await until(
                lambda: client.connections.in_flight(1) > 0, 10, "the write to the stalled broker"
            )
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                await asyncio.wait_for(producer.send("busy", b"x", partition=busy), 5)
                await asyncio.sleep(0.02)
            assert "old" not in client.topics and "old" not in client.snapshot.topics
            # A topic with a record in flight is never forgotten.
            assert "stuck" in client.topics
            assert "busy" in client.topics
            cluster.delete_topic("old")
            requested.clear()
            client.request_update()
            await until(lambda: bool(requested), 10, "the requested metadata refresh")
            await asyncio.sleep(0.3)  # any further refresh would show here too
            assert all("old" not in names for names in requested)
            assert "old" not in cluster.topic_states  # no refresh re-created it
            cluster.resume_broker(1)
            assert (await asyncio.wait_for(pending, 10)).partition == stuck
            # The forgotten topic comes back on demand.
            cluster.create_topic("old", partitions=1)
            await asyncio.wait_for(producer.send("old", b"again"), 10)


@pytest.mark.asyncio
async def test_rebootstrap_when_every_known_broker_moved() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        alias = await cluster.add_bootstrap_listener()
        settings = {
            "metadata_recovery_rebootstrap_trigger_ms": 300,
            "reconnect_backoff_max_ms": 200,
            "request_timeout_ms": 1000,
        }
        # Time enough to find the brokers again, however slow the machine.
        async with make_producer(
            alias, SETTINGS, delivery_timeout_ms=30_000, **settings
        ) as producer:
            await producer.send("t", b"before", partition=1)
            await cluster.move_brokers()
            md = await asyncio.wait_for(producer.send("t", b"after", partition=1), 40)
            assert md.partition == 1
        async with make_producer(
            alias, SETTINGS, metadata_recovery_strategy="none", delivery_timeout_ms=4000, **settings
        ) as producer:
            await producer.send("t", b"before", partition=1)
            await cluster.move_brokers()
            # Without rebootstrap, the old addresses are all the producer knows.
            with pytest.raises(errors.KafkaTimeoutError):
                await asyncio.wait_for(producer.send("t", b"lost", partition=1), 10)
        assert [r.value for r in cluster.records("t")] == [b"before", b"after", b"before"]
