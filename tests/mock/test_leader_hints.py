"""KIP-951: a batch refused by a former leader goes to the new one at once.

Since Kafka 3.7 a Produce v10 refusal with NOT_LEADER_OR_FOLLOWER names the
partition's current leader and its address. The producer takes it: the batch
is retried on the new leader with no metadata round trip and no retry backoff.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer.protocol.generated import MetadataRequest, MetadataResponse
from aioproducer.protocol.generated.metadata import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from tests.support.aio import until, within
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

METADATA = 3
PRODUCE = 0


SETTINGS: dict[str, Any] = {
    "linger_ms": 0,
    # A retry that waited its backoff would outlast the test's bound.
    "retry_backoff_ms": 60_000,
    "retry_backoff_max_ms": 60_000,
    "request_timeout_ms": 30_000,
    "delivery_timeout_ms": 300_000,
}


def _lagging_metadata(cluster: MockCluster, topic: str, leader: int, epoch: int) -> Any:
    """A Metadata handler answering as a broker whose metadata has not seen the move."""

    def answer(body: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
        state = cluster.topic_states[topic]
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=[
                MetadataResponseBroker(node_id=n, host=cluster.host, port=server.port, rack=None)
                for n, server in sorted(cluster.servers.items())
            ],
            cluster_id=cluster.cluster_id,
            controller_id=0,
            topics=[
                MetadataResponseTopic(
                    error_code=0,
                    name=topic,
                    topic_id=state.topic_id,
                    is_internal=False,
                    partitions=[
                        MetadataResponsePartition(
                            error_code=0,
                            partition_index=p.index,
                            leader_id=leader if p.index == 0 else p.leader,
                            leader_epoch=epoch if p.index == 0 else p.leader_epoch,
                            replica_nodes=list(p.replicas),
                            isr_nodes=list(p.replicas),
                            offline_replicas=[],
                        )
                        for p in state.partitions
                    ],
                )
            ],
        )

    return answer


async def test_batches_follow_the_leader_hint_at_once() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=2)
        async with make_producer(cluster, SETTINGS) as producer:
            await within(producer.send("t", b"before", partition=0), 10, "warm-up")
            await within(producer.send("t", b"before", partition=1), 10, "warm-up")
            old = cluster.leader("t", 0)
            epoch = cluster.topic_states["t"].partitions[0].leader_epoch
            new = cluster.move_leader("t", 0)
            # Metadata lags behind (as it does on a real cluster for a while):
            # only the refusal's leader hint says where the partition went.
            cluster.intercept(METADATA, _lagging_metadata(cluster, "t", old, epoch))
            refused_before = cluster.request_count(PRODUCE, broker=old)
            futures = [await producer.enqueue("t", b"after-%d" % i, partition=0) for i in range(5)]
            results = await within(asyncio.gather(*futures), 10, "records after the leader moved")
            assert cluster.request_count(PRODUCE, broker=old) > refused_before
            assert cluster.request_count(PRODUCE, broker=new) >= 1
            # Refreshes that answer the old leader do not send batches back.
            await within(producer.send("t", b"later", partition=0), 10, "a later record")
            await within(producer.send("t", b"other", partition=1), 10, "partition 1")
            cluster.intercept(METADATA, None)
        values = [r.value for r in cluster.records("t") if r.partition == 0]
        assert values == [b"before"] + [b"after-%d" % i for i in range(5)] + [b"later"]
        assert [md.offset for md in results] == [1, 2, 3, 4, 5]


async def test_without_hints_the_producer_still_follows_through_metadata() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.leader_hints = False  # a broker before Kafka 3.7
        cluster.create_topic("t", partitions=1)
        async with make_producer(
            cluster, SETTINGS, retry_backoff_ms=50, retry_backoff_max_ms=200
        ) as producer:
            await within(producer.send("t", b"before"), 10, "warm-up")
            new = cluster.move_leader("t", 0)
            metadata_before = cluster.request_count(METADATA)
            await within(producer.send("t", b"after"), 20, "after the leader moved")
            assert cluster.request_count(METADATA) > metadata_before
            assert cluster.request_count(PRODUCE, broker=new) >= 1
        assert [r.value for r in cluster.records("t")] == [b"before", b"after"]


async def test_hints_switched_off_leave_the_move_to_metadata() -> None:
    """``use_leader_hints = False`` (what the failover benchmark compares against) ignores them."""
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(
            cluster, SETTINGS, retry_backoff_ms=50, retry_backoff_max_ms=200
        ) as producer:
            await within(producer.send("t", b"before"), 10, "warm-up")
            assert producer._running.client is not None
            producer._running.client.use_leader_hints = False
            old = cluster.leader("t", 0)
            epoch = cluster.topic_states["t"].partitions[0].leader_epoch
            new = cluster.move_leader("t", 0)
            cluster.intercept(METADATA, _lagging_metadata(cluster, "t", old, epoch))
            refused = cluster.request_count(PRODUCE, broker=old)
            fut = await producer.enqueue("t", b"after")
            # The refusal names the new leader, but only Metadata may say so now.
            await until(
                lambda: cluster.request_count(PRODUCE, broker=old) > refused,
                10,
                "a refusal by the old leader",
            )
            await asyncio.sleep(0.5)
            assert not fut.done()
            assert cluster.request_count(PRODUCE, broker=new) == 0
            cluster.intercept(METADATA, None)
            await within(fut, 20, "the record after Metadata named the new leader")
            assert cluster.request_count(PRODUCE, broker=new) >= 1
        assert [r.value for r in cluster.records("t")] == [b"before", b"after"]
