"""The ISR shrinks below ``min.insync.replicas`` while ``acks=all`` writes wait for it.

A topic needs all three replicas in sync (``min.insync.replicas=3``); a
follower stalls (SIGSTOP) with batches appended on the leader and waiting in
its purgatory for the follower, and the controller takes it out of the ISR
while they wait. Kafka answers those batches after their append, so the
producer must treat them as possibly written (``engine/retry.py``'s table):
keep their sequence numbers, hold the partition's later batches behind them,
and retry them as they were stamped once the follower is back.

What the leader answers is REQUEST_TIMED_OUT, not NOT_ENOUGH_REPLICAS_AFTER_APPEND:
since Kafka 3.7 (KAFKA-15583, part of KIP-966, whether or not eligible leader
replicas are enabled) the high watermark does not advance while the ISR is
below the minimum, and ``Partition.checkEnoughReplicasReachOffset`` answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND only for a batch the high watermark already
passed. So the waiting batches expire in the purgatory at the Produce
timeout, and later ones are refused before the append (NOT_ENOUGH_REPLICAS).
The test runs on the cluster formatted without eligible leader replicas, and
checks both answers and that every record is read back once, in order.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter

import pytest

from aioproducer import RecordMetadata, errors
from tests.cluster.stream import assert_exactly_once, streaming
from tests.support.aio import read_back
from tests.support.kafka_cluster import KafkaCluster

pytestmark = pytest.mark.asyncio

_ANSWER = re.compile(r"\(([A-Z_]+), code (\d+)\)")


def _answers(caplog: pytest.LogCaptureFixture) -> Counter[str]:
    """Kafka error names of the Produce answers the sender retried, counted."""
    seen: Counter[str] = Counter()
    for record in caplog.records:
        if "retrying" in record.getMessage():
            seen.update(m.group(1) for m in _ANSWER.finditer(record.getMessage()))
    return seen


@pytest.mark.parametrize("cluster", ["tv1"], indirect=True)
async def test_isr_shrinks_below_min_insync_while_acks_all_writes_wait(
    cluster: KafkaCluster, cluster_topic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer.engine.sender")
    topic = cluster_topic(1, config={"min.insync.replicas": "3"})
    async with streaming(
        cluster,
        topic,
        rate=500,
        compression="zstd",
        # Outlasts the controller fencing the stalled node (5 s): the ISR
        # shrinks while the batches wait. The delivery timeout lets the first
        # of them fail while the node is still stalled.
        request_timeout_ms=8000,
        delivery_timeout_ms=14_000,
    ) as stream:
        await stream.wait_acked(300, 60, "before the follower stalls")
        finalized = stream.producer._running.client.connections.finalized_features
        assert finalized.get("eligible.leader.replicas.version", 0) == 0, finalized
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        follower = next(n for n in cluster.node_ids if n != leader)
        await asyncio.to_thread(cluster.pause, follower)
        try:
            # The controller fences the stalled node: out of the ISR, below the
            # minimum, while the batches appended since the stall still wait.
            await asyncio.to_thread(cluster.wait_for_isr, topic, 2, timeout=60)
            for _ in range(600):  # bounded: 60 s
                seen = _answers(caplog)
                if seen["REQUEST_TIMED_OUT"] and seen["NOT_ENOUGH_REPLICAS"] and stream.failed:
                    break
                stream.check_running()
                await asyncio.sleep(0.1)
            seen = _answers(caplog)
            print(f"\nanswers while node {follower} was stalled: {dict(seen)}")
            # Appended, then still waiting at the request timeout: possibly written.
            assert seen["REQUEST_TIMED_OUT"], f"no appended write timed out: {dict(seen)}"
            # Refused before the append once the ISR is below the minimum.
            assert seen["NOT_ENOUGH_REPLICAS"], f"no write was refused: {dict(seen)}"
            assert stream.failed, "no record failed at the delivery timeout"
        finally:
            await asyncio.to_thread(cluster.resume, follower)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(300, 90, f"after node {follower} resumed", partitions={0})
        results = await stream.stop(timeout=120)
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert all(isinstance(r, errors.KafkaTimeoutError) for r in failed), failed[:3]
    # At least the acknowledged records; the grace picks up failed ones written.
    records = await read_back(
        cluster.bootstrap_servers, topic, len(results) - len(failed), timeout=60, grace=3.0
    )
    # The batches that failed after waiting on the leader are in the log: the
    # follower fetched them once back, and the high watermark passed them.
    got = {r.value for r in records}
    written = [v for v, r in zip(stream.values, results) if r in failed and v in got]
    print(
        f"{len(failed)} records failed, {len(written)} of them written; "
        f"{len(records)} read back of {stream.sent} sent"
    )
    assert written, "no record that failed after its append was read back"
    # Each is there once and in order, and every acknowledged record where its
    # metadata says: the producer neither renumbered a batch the broker held
    # nor let a later one pass it.
    assert_exactly_once(stream.values, results, records, failed_ok=True, failed_may_be_written=True)
