"""Leadership moved on purpose while producing: preferred-leader election, reassignment.

Nothing fails here: the operator moves a partition's leadership (ElectLeaders,
KIP-460) or its replicas (AlterPartitionReassignments, KIP-455, dropping the
leader's replica and adding it back, which copies the log to it). The old
leader answers NOT_LEADER_OR_FOLLOWER; the producer finds the new one and every
record is still written once, in order. The refusal names the new leader
(KIP-951), and the producer takes it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.cluster.stream import finish, streaming
from tests.support.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.asyncio


async def test_preferred_leader_election_while_producing(
    cluster: KafkaCluster, cluster_topic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer.net.client")
    topic = cluster_topic(3)
    async with streaming(cluster, topic, rate=1000, compression="lz4") as stream:
        await stream.wait_acked(500, 60, "before leadership moves")
        preferred = (await asyncio.to_thread(cluster.replicas, topic, 0))[0]
        assert await asyncio.to_thread(cluster.leader, topic, 0) == preferred
        # A controlled shutdown moves leadership away; after the restart the
        # preferred replica follows until an election gives it back.
        await asyncio.to_thread(cluster.stop, preferred)
        interim = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={preferred})
        await asyncio.to_thread(cluster.start, preferred)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(500, 60, f"while node {interim} leads")
        assert await asyncio.to_thread(cluster.leader, topic, 0) == interim
        await asyncio.to_thread(cluster.elect_preferred_leaders, topic)
        await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={interim})
        assert await asyncio.to_thread(cluster.leader, topic, 0) == preferred
        await stream.wait_acked(1000, 60, f"after node {preferred} was elected again")
        # The former leader's refusal named the new one (KIP-951, Produce v10).
        hint = f"{topic}-0: new leader {preferred} "
        assert any(hint in r.getMessage() for r in caplog.records), "no leader hint taken"
        await finish(cluster, stream)


async def test_reassignment_drops_and_readds_the_leader_while_producing(
    cluster: KafkaCluster, cluster_topic
) -> None:
    topic = cluster_topic(1)
    async with streaming(cluster, topic, rate=1000, compression="zstd") as stream:
        await stream.wait_acked(500, 60, "before the reassignment")
        replicas = await asyncio.to_thread(cluster.replicas, topic, 0)
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        rest = [n for n in replicas if n != leader]
        # The leader's replica goes: leadership moves to one of the others.
        await asyncio.to_thread(cluster.reassign, topic, {0: rest})
        await asyncio.to_thread(cluster.wait_for_replicas, topic, 0, rest)
        assert await asyncio.to_thread(cluster.leader, topic, 0) in rest
        await stream.wait_acked(1000, 60, "after the leader's replica was removed")
        # It comes back, last: it copies the log while records keep arriving.
        await asyncio.to_thread(cluster.reassign, topic, {0: [*rest, leader]})
        await asyncio.to_thread(cluster.wait_for_replicas, topic, 0, [*rest, leader])
        await stream.wait_acked(500, 60, "after the replica was added back")
        await finish(cluster, stream)
