"""Records expire while their leader is down: typed failures, then the producer goes on.

The delivery timeout is shorter than the failover (the controller fences a
killed node only after its session timeout), so batches queued for, or in
flight to, the dead leader fail with KafkaTimeoutError. One that was in
flight may or may not have been written; its partition's sequence state is
then unresolved and the idempotent producer moves it to a new epoch
(KIP-360). Afterwards every record still goes in once, in order: nothing
acknowledged is lost, nothing duplicated, and what failed is at most once
in the log.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import RecordMetadata, errors
from tests.cluster.settings import SETTINGS
from tests.cluster.stream import SteadyStream, assert_exactly_once
from tests.support.aio import read_back, within
from tests.support.kafka_cluster import KafkaCluster
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("fault", ["kill", "pause"])
async def test_records_expiring_during_a_failover_fail_typed_and_the_rest_go_in_once(
    cluster: KafkaCluster, cluster_topic, fault: str
) -> None:
    topic = cluster_topic(3)
    producer = make_producer(
        cluster, SETTINGS, compression="lz4", request_timeout_ms=1500, delivery_timeout_ms=3000
    )
    await within(producer.start(), 30, "start")
    stream = SteadyStream(producer, topic, rate=1000).start()
    try:
        await stream.wait_acked(500, 60, "before the kill")
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        # SIGKILL: requests in flight fail at once (connection reset); SIGSTOP:
        # they time out unanswered, possibly appended and replicated.
        await asyncio.to_thread(getattr(cluster, fault), leader)
        await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_in={leader})
        # The records of the lost leader's partitions outlived their timeout.
        assert stream.failed > 0, "no record expired: the failover was quicker than the timeout"
        await stream.wait_acked(2000, 60, f"after node {leader} was lost ({fault})")
        if fault == "kill":
            await asyncio.to_thread(cluster.start, leader)
        else:
            await asyncio.to_thread(cluster.resume, leader)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(500, 60, f"after node {leader} came back")
        results = await stream.stop(timeout=60)
    finally:
        await within(producer.close(), 60, "close")
    failures = [r for r in results if not isinstance(r, RecordMetadata)]
    assert all(isinstance(r, errors.KafkaTimeoutError) for r in failures), {
        type(r).__name__ for r in failures
    }
    # Records sent after the recovery all succeeded.
    assert all(isinstance(r, RecordMetadata) for r in results[-200:])
    records = await read_back(
        cluster.bootstrap_servers, topic, len(results) - len(failures), timeout=60, grace=3.0
    )
    assert_exactly_once(stream.values, results, records, failed_ok=True, failed_may_be_written=True)
    print(f"\n{fault}: {len(results)} sent, {len(failures)} expired, {len(records)} read back")
