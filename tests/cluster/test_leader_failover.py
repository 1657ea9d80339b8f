"""The leader of the partitions being written is lost mid-stream: killed, stopped, stalled.

Each test produces keyed, compressed records at a steady rate with an
idempotent ``acks=all`` producer while it takes a leader away, and ends with
every record acknowledged exactly once: read back with confluent-kafka,
nothing lost, nothing duplicated, each partition in send order.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.cluster.stream import finish, streaming
from tests.support.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.asyncio


async def _led_by(cluster: KafkaCluster, topic: str, node: int) -> set[int]:
    """The partitions of ``topic`` that ``node`` leads now."""
    leaders = await asyncio.to_thread(cluster.leaders, topic)
    led = {p for p, leader in leaders.items() if leader == node}
    assert led, f"node {node} leads no partition of {topic}: {leaders}"
    return led


async def test_sigkill_leader_three_times_while_producing(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(3)
    async with streaming(cluster, topic, rate=1000, compression="lz4") as stream:
        await stream.wait_acked(500, 60, "before the first kill")
        for cycle in range(3):
            leader = await asyncio.to_thread(cluster.leader, topic, 0)
            assert leader in cluster.live_nodes()
            led = await _led_by(cluster, topic, leader)
            await asyncio.to_thread(cluster.kill, leader)
            new = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={leader})
            assert new != leader
            # The partitions the dead node led take records again.
            await stream.wait_acked(
                1000, 60, f"cycle {cycle}: after node {leader} was killed", partitions=led
            )
            await asyncio.to_thread(cluster.start, leader)
            await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
            await stream.wait_acked(300, 60, f"cycle {cycle}: after node {leader} came back")
        await finish(cluster, stream)


async def test_controlled_shutdown_of_leader_while_producing(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(3)
    async with streaming(cluster, topic, rate=1000, compression="zstd") as stream:
        await stream.wait_acked(500, 60, "before the shutdown")
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        led = await _led_by(cluster, topic, leader)
        # SIGTERM: the node hands its leaderships over before it goes.
        await asyncio.to_thread(cluster.stop, leader)
        assert not cluster.broker(leader).is_running
        new = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={leader})
        assert new != leader
        await stream.wait_acked(1000, 60, f"after node {leader} shut down", partitions=led)
        await asyncio.to_thread(cluster.start, leader)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(300, 60, f"after node {leader} came back")
        await finish(cluster, stream)


async def test_leader_paused_beyond_request_timeout_while_producing(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(3)
    request_timeout_ms = 3000
    loop = asyncio.get_running_loop()
    async with streaming(
        cluster, topic, rate=1000, compression="zstd", request_timeout_ms=request_timeout_ms
    ) as stream:
        await stream.wait_acked(500, 60, "before the pause")
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        led = await _led_by(cluster, topic, leader)
        await asyncio.to_thread(cluster.pause, leader)
        paused_at = loop.time()
        try:
            # Requests to the stalled node time out; once the controller fences
            # it, the partition is led elsewhere and the records go there.
            new = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={leader})
            assert new != leader
            # The stall lasts twice the request timeout at least, whatever the
            # fencing took: requests written before it must have timed out.
            await asyncio.sleep(max(0.0, 2 * request_timeout_ms / 1000 - (loop.time() - paused_at)))
            await stream.wait_acked(1000, 60, f"while node {leader} is paused", partitions=led)
        finally:
            await asyncio.to_thread(cluster.resume, leader)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(300, 60, f"after node {leader} resumed")
        await finish(cluster, stream)


async def test_rolling_restart_of_every_node_while_producing(
    cluster: KafkaCluster, cluster_topic
) -> None:
    """An upgrade as operators do it: each node in turn shut down and started again."""
    topic = cluster_topic(6)
    async with streaming(cluster, topic, rate=1500, keys=48, compression="zstd") as stream:
        await stream.wait_acked(500, 60, "before the rolling restart")
        for node in cluster.node_ids:
            before = await asyncio.to_thread(cluster.leaders, topic)
            await asyncio.to_thread(cluster.stop, node)
            led = await asyncio.to_thread(cluster.leaders, topic)
            assert node not in led.values(), f"node {node} still leads after its shutdown: {led}"
            # The partitions it led (if any) take records again.
            moved = {p for p, leader in before.items() if leader == node}
            await stream.wait_acked(500, 60, f"while node {node} is down", partitions=moved or None)
            await asyncio.to_thread(cluster.start, node)
            await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
            await stream.wait_acked(300, 60, f"after node {node} came back")
        await finish(cluster, stream)
