"""A partition leader cut off by the network, not killed: from the controllers, or from its clients.

Each node of a cluster of its own runs in its own network namespace
(:class:`~tests.support.netns.NamespaceNetwork`), so links can be cut
while every process keeps running:

* a leader cut off from the controllers but still reachable by the producer
  is fenced and replaced, yet still believes it leads (it no longer hears
  the metadata log). The records the producer sends it wait: its followers
  left it. The producer must reach the new leader: when its requests time
  out and a metadata refresh from another node names it (the cut node's own
  Metadata is stale and must not win), or, when the cut heals first, from the
  old leader's NOT_LEADER_OR_FOLLOWER answer and its leader hint (KIP-951);
* a leader cut off from the producer only: its answers are lost while what
  the producer sent may still be written; the other partitions must keep
  flowing, and once leadership moves the retries (some already written) land
  on the new leader exactly once.

Each test ends with every record acknowledged exactly once, read back with
confluent-kafka: nothing lost, nothing duplicated, each partition in send
order; idempotent ``acks=all``, keyed, compressed. Without the rights to make
namespaces (root, ``ip``) these tests skip saying why; in CI they fail.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.cluster.conftest import heal
from tests.cluster.settings import SETTINGS
from tests.cluster.stream import SteadyStream, finish
from tests.conftest import _kafka_libs_or_skip, _show_log_on_failure
from tests.support.aio import within
from tests.support.kafka_broker import probe_metadata
from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import NamespaceNetwork, unavailable_reason
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio


def _namespaces_or_skip() -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"network partition tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def netns_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three nodes, each in a network namespace of its own; gone after this module."""
    _kafka_libs_or_skip()
    _namespaces_or_skip()
    network = NamespaceNetwork([1, 2, 3])
    cluster = KafkaCluster(workdir=tmp_path_factory.mktemp("kafka-netns"), network=network)
    try:
        cluster.start()
        print(
            f"\nKafka cluster in network namespaces serving after {cluster.startup_seconds:.1f} s"
        )
        yield cluster
    finally:
        cluster.stop()
        network.delete()


@pytest.fixture
def partitionable(
    request: pytest.FixtureRequest, netns_cluster: KafkaCluster
) -> Iterator[KafkaCluster]:
    """The namespaced cluster, whole; links healed and every node listed again after the test."""
    for node, broker in netns_cluster.brokers.items():
        _show_log_on_failure(request, f"Kafka node {node}", broker)
    try:
        yield netns_cluster
    finally:
        assert netns_cluster.network is not None
        netns_cluster.network.heal()
        heal(netns_cluster)
        netns_cluster.wait_for_nodes(timeout=90)


@pytest.fixture
def make_topic(request: pytest.FixtureRequest, partitionable: KafkaCluster) -> Callable[[int], str]:
    def make(partitions: int = 3) -> str:
        from tests.support.verify import create_topic

        name = f"netns-{request.node.name[5:40]}-{uuid.uuid4().hex[:8]}".replace("_", "-")
        create_topic(partitionable.bootstrap_servers, name, partitions, replication_factor=3)
        partitionable.wait_for_isr(name, 3)
        return name

    return make


def _network(cluster: KafkaCluster) -> NamespaceNetwork:
    assert cluster.network is not None
    return cluster.network


def _leader_as_seen_by(cluster: KafkaCluster, node: int, topic: str, partition: int) -> int:
    """The leader node ``node`` itself names (stale on a node cut off from the controllers)."""
    b = cluster.broker(node)
    body = probe_metadata(b.port, 5.0, [topic], host=b.host, source=b.probe_source)
    assert body is not None, f"node {node} did not answer Metadata"
    (found,) = [
        p
        for t in body.topics
        if t.name == topic
        for p in t.partitions
        if p.partition_index == partition
    ]
    return int(found.leader_id)


async def _heal(cluster: KafkaCluster, topic: str) -> None:
    _network(cluster).heal()
    await asyncio.to_thread(cluster.wait_for_nodes, timeout=90)
    await asyncio.to_thread(cluster.wait_for_isr, topic, 3)


async def test_leader_cut_off_from_controllers_is_left_for_the_new_leader(
    partitionable: KafkaCluster, make_topic
) -> None:
    """The old leader still claims the partition; a metadata refresh elsewhere names the new one."""
    cluster, net = partitionable, _network(partitionable)
    topic = make_topic(3)
    producer = make_producer(cluster, SETTINGS, compression="lz4", request_timeout_ms=3000)
    await within(producer.start(), 30, "start")
    stream = SteadyStream(producer, topic, rate=1000).start()
    try:
        await stream.wait_acked(500, 60, "before the cut")
        old = await asyncio.to_thread(cluster.leader, topic, 0)
        net.cut_controllers(old)
        new = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={old}, timeout=90)
        await stream.wait_acked(
            500, 60, f"partition 0 after node {old} was cut off and {new} elected", partitions={0}
        )
        # Split brain, really: the producer moved although the old leader,
        # still reachable, still names itself.
        still = await asyncio.to_thread(_leader_as_seen_by, cluster, old, topic, 0)
        assert still == old, f"node {old}, cut off, names {still} as the leader: it was not cut off"
        await _heal(cluster, topic)
        await stream.wait_acked(300, 60, "after the cut healed")
        await finish(cluster, stream)
    finally:
        await within(producer.close(), 60, "close")


async def test_leader_cut_off_from_controllers_answers_not_leader_when_it_hears_again(
    partitionable: KafkaCluster, make_topic, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests wait at the old leader until the cut heals; its refusal names the new leader."""
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    cluster, net = partitionable, _network(partitionable)
    topic = make_topic(3)
    # Long enough that nothing times out while the controller fences the old
    # leader and elects another: the requests are still waiting at the old
    # leader when it hears the quorum again.
    producer = make_producer(
        cluster,
        SETTINGS,
        compression="zstd",
        request_timeout_ms=60_000,
        delivery_timeout_ms=180_000,
    )
    await within(producer.start(), 30, "start")
    stream = SteadyStream(producer, topic, rate=1000).start()
    try:
        await stream.wait_acked(500, 60, "before the cut")
        old = await asyncio.to_thread(cluster.leader, topic, 0)
        net.cut_controllers(old)
        new = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={old}, timeout=90)
        caplog.clear()
        await _heal(cluster, topic)
        await stream.wait_acked(
            500, 60, f"partition 0 after node {old} heard of {new}", partitions={0}
        )
        messages = [r.getMessage() for r in caplog.records]
        refused = [m for m in messages if "NOT_LEADER_OR_FOLLOWER" in m and f"{topic}-0" in m]
        assert refused, f"node {old} never answered NOT_LEADER_OR_FOLLOWER for {topic}-0"
        hinted = [
            m for m in messages if f"{topic}-0: new leader {new} " in m and "produce answer" in m
        ]
        assert hinted, (
            f"no produce answer named node {new} as the new leader of {topic}-0 (KIP-951)"
        )
        await finish(cluster, stream)
    finally:
        await within(producer.close(), 60, "close")


async def test_leader_cut_off_from_the_producer_only(
    partitionable: KafkaCluster, make_topic
) -> None:
    """Answers lost, writes kept: other partitions flow; after the move, retries land once."""
    cluster, net = partitionable, _network(partitionable)
    topic = make_topic(3)
    request_timeout_ms = 3000
    producer = make_producer(
        cluster, SETTINGS, compression="lz4", request_timeout_ms=request_timeout_ms
    )
    await within(producer.start(), 30, "start")
    stream = SteadyStream(producer, topic, rate=1000).start()
    loop = asyncio.get_running_loop()
    try:
        await stream.wait_acked(500, 60, "before the cut")
        leaders = await asyncio.to_thread(cluster.leaders, topic)
        cut = leaders[0]
        its = {p for p, n in leaders.items() if n == cut}
        others = set(leaders) - its
        assert others, f"node {cut} leads every partition: {leaders}"
        net.cut_clients(cut)
        cut_at = loop.time()
        await asyncio.sleep(1.0)  # answers already on the wire arrive
        stalled = sum(stream.acked_on[p] for p in its)
        await stream.wait_acked(500, 60, f"partitions not led by node {cut}", partitions=others)
        # Hold the cut past two request timeouts: requests in flight time
        # out and are retried, though the cut node may have written them.
        await asyncio.sleep(max(0.0, 2 * request_timeout_ms / 1000 - (loop.time() - cut_at)))
        assert sum(stream.acked_on[p] for p in its) == stalled, "answers crossed the cut"
        # Move the cut node's partitions to another leader; it stays a replica.
        for p in sorted(its):
            replicas = await asyncio.to_thread(cluster.replicas, topic, p)
            order = [n for n in replicas if n != cut] + [cut]
            await asyncio.to_thread(cluster.reassign, topic, {p: order})
            await asyncio.to_thread(cluster.wait_for_replicas, topic, p, order)
        await asyncio.to_thread(cluster.elect_preferred_leaders, topic, sorted(its))
        for p in sorted(its):
            await asyncio.to_thread(cluster.wait_for_leader, topic, p, not_in={cut})
        await stream.wait_acked(
            500, 60, f"partitions {sorted(its)} moved away from node {cut}", partitions=its
        )
        await _heal(cluster, topic)
        await stream.wait_acked(300, 60, "after the cut healed")
        await finish(cluster, stream)
    finally:
        await within(producer.close(), 60, "close")
