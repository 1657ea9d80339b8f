"""Too few replicas to acknowledge ``acks=all``: records wait, then land or fail saying why.

Three combined broker-and-controller nodes keep a controller majority with one
node lost, not two. So there are two ways to have too few replicas:

* the topic needs all three in sync (``min.insync.replicas=3``) and one node is
  down: the controller takes it out of the ISR and the leader refuses writes
  with NOT_ENOUGH_REPLICAS, checked before the append;
* two of three nodes are down: the controllers have no majority, the ISR cannot
  shrink, and the leader appends, then waits for replicas that never fetch
  (REQUEST_TIMED_OUT, the batch may be in the log).

Either way the producer keeps retrying within ``delivery_timeout_ms`` and
delivers each record once when a node returns; with a short delivery timeout
the records fail at it with an error naming the last cause.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from aioproducer import errors
from tests.cluster.settings import SETTINGS
from tests.cluster.stream import finish, streaming
from tests.support.aio import read_back, within
from tests.support.kafka_cluster import KafkaCluster
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

ALL_IN_SYNC = {"min.insync.replicas": "3"}


async def _kill_followers(cluster: KafkaCluster, topic: str, count: int) -> list[int]:
    """Kill ``count`` followers of partition 0 (one at a time, each out of the ISR first)."""
    leader = await asyncio.to_thread(cluster.leader, topic, 0)
    followers = [n for n in cluster.node_ids if n != leader][:count]
    for i, node in enumerate(followers):
        await asyncio.to_thread(cluster.kill, node)
        if i == 0:
            # Fenced by the controller: out of the ISR. A second loss leaves
            # no controller majority, so the ISR cannot shrink again.
            await asyncio.to_thread(cluster.wait_for_isr, topic, 2)
    return followers


async def test_isr_below_min_insync_records_wait_until_replica_returns(
    cluster: KafkaCluster, cluster_topic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer.engine.sender")
    topic = cluster_topic(1, config=ALL_IN_SYNC)
    async with streaming(cluster, topic, rate=500, compression="lz4") as stream:
        await stream.wait_acked(300, 60, "before a node is lost")
        [node] = await _kill_followers(cluster, topic, 1)
        # The leader now refuses every write: what was sent meanwhile waits.
        refused = "NOT_ENOUGH_REPLICAS"
        for _ in range(600):
            if any(refused in r.getMessage() for r in caplog.records):
                break
            stream.check_running()
            await asyncio.sleep(0.1)
        assert any(refused in r.getMessage() for r in caplog.records), "no write was refused"
        waiting = stream.sent - stream.acked
        assert stream.failed == 0
        await asyncio.to_thread(cluster.start, node)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(waiting + 300, 90, f"after node {node} came back")
        await finish(cluster, stream)


async def test_two_nodes_down_records_wait_until_one_returns(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(1)
    async with streaming(
        cluster, topic, rate=500, compression="zstd", request_timeout_ms=3000
    ) as stream:
        await stream.wait_acked(300, 60, "before nodes are lost")
        first, second = await _kill_followers(cluster, topic, 2)
        # Nothing can be acknowledged now; wait beyond several request timeouts.
        acked = stream.acked
        await asyncio.sleep(8)
        assert stream.acked - acked < 500  # at most what was in flight at the second kill
        assert stream.failed == 0
        waiting = stream.sent - stream.acked
        await asyncio.to_thread(cluster.start, first)
        await stream.wait_acked(waiting + 300, 90, f"after node {first} came back")
        await asyncio.to_thread(cluster.start, second)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await finish(cluster, stream)


async def test_isr_below_min_insync_fails_at_delivery_timeout_naming_the_cause(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(1, config=ALL_IN_SYNC)
    delivery_timeout_ms = 6000
    producer = make_producer(
        cluster, SETTINGS, request_timeout_ms=2000, delivery_timeout_ms=delivery_timeout_ms
    )
    await within(producer.start(), 30, "start")
    try:
        await within(producer.send(topic, b"before", key=b"k"), 30, "send before")
        [node] = await _kill_followers(cluster, topic, 1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        futures = []
        for i in range(200):
            futures.append(await producer.enqueue(topic, b"doomed-%d" % i, key=b"k"))
            await asyncio.sleep(0.01)
        results = await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), delivery_timeout_ms / 1000 + 30
        )
        took = loop.time() - started
        assert all(isinstance(r, errors.KafkaTimeoutError) for r in results), [
            r for r in results if not isinstance(r, errors.KafkaTimeoutError)
        ][:3]
        # At the delivery timeout (from each record's batch creation), not later.
        assert delivery_timeout_ms / 1000 <= took < delivery_timeout_ms / 1000 + 10
        unexplained = [r for r in results if "NOT_ENOUGH_REPLICAS" not in str(r)]
        assert not unexplained, f"{len(unexplained)} errors do not name the cause: {unexplained[0]}"
        await asyncio.to_thread(cluster.start, node)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        # The producer goes on: the same partition takes records again.
        after = await within(producer.send(topic, b"after", key=b"k"), 60, "send after")
    finally:
        await within(producer.close(), 60, "close")
    # A batch appended by the leader just before it saw the follower leave the
    # ISR (its request timed out in flight) is committed once the follower is
    # back: its error must then say it may be in the log. Nothing whose error
    # says it was not written may be there.
    maybe = [b"doomed-%d" % i for i, r in enumerate(results) if r.may_have_been_written]
    assert all(r.may_have_been_written is not None for r in results)
    # One partition, no transactions: offsets are dense up to ``after``.
    records = await read_back(
        cluster.bootstrap_servers, topic, after.offset + 1, timeout=60, grace=2.0
    )
    values = [r.value for r in records]
    assert values[0] == b"before" and values[-1] == b"after", values
    assert len(set(values)) == len(values), values  # each record once
    assert all(v in maybe for v in values[1:-1]), (values, maybe)
    assert values[1:-1] == sorted(values[1:-1], key=maybe.index)
    assert records[-1].offset == after.offset
