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

from aioproducer.testing.kafka_cluster import KafkaCluster
from tests.cluster.stream import finish, streaming

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
    request_timeout_ms = 10_000  # outlasts the controller fencing the stalled node (5 s)
    async with streaming(
        cluster, topic, rate=500, compression="zstd", request_timeout_ms=request_timeout_ms
    ) as stream:
        await stream.wait_acked(300, 60, "before the follower stalls")
        finalized = stream.producer._client.finalized_features
        assert finalized.get("eligible.leader.replicas.version", 0) == 0, finalized
        seq = stream.producer._sender._seq
        identity = (seq.producer_id, seq.epoch)
        leader = await asyncio.to_thread(cluster.leader, topic, 0)
        follower = next(n for n in cluster.node_ids if n != leader)
        await asyncio.to_thread(cluster.pause, follower)
        try:
            # The controller fences the stalled node: out of the ISR, below the
            # minimum, while the batches appended since the stall still wait.
            await asyncio.to_thread(cluster.wait_for_isr, topic, 2, timeout=60)
            for _ in range(600):  # bounded: 60 s
                seen = _answers(caplog)
                if seen["REQUEST_TIMED_OUT"] and seen["NOT_ENOUGH_REPLICAS"]:
                    break
                stream.check_running()
                await asyncio.sleep(0.1)
            seen = _answers(caplog)
            print(f"\nanswers while node {follower} was stalled: {dict(seen)}")
            # Appended, then expired in the purgatory: possibly written.
            assert seen["REQUEST_TIMED_OUT"], f"no appended write timed out: {dict(seen)}"
            # Refused before the append once the ISR is below the minimum.
            assert seen["NOT_ENOUGH_REPLICAS"], f"no write was refused: {dict(seen)}"
            assert stream.failed == 0
            waiting = stream.sent - stream.acked
        finally:
            await asyncio.to_thread(cluster.resume, follower)
        await asyncio.to_thread(cluster.wait_for_isr, topic, 3)
        await stream.wait_acked(
            waiting + 300, 90, f"after node {follower} resumed", partitions={0}
        )
        # The possibly written batches were retried with their own sequences
        # (the leader matched them as duplicates): no new epoch was needed.
        assert (seq.producer_id, seq.epoch) == identity
        assert not _answers(caplog)["OUT_OF_ORDER_SEQUENCE_NUMBER"]
        # finish: each acknowledged record is where its metadata says, once.
        await finish(cluster, stream)
