"""Sequence numbers of the idempotent producer when a batch's fate is unknown.

A batch that failed while the broker may hold it (answered after the append,
or expired in flight) leaves its partition *unresolved*: the later batches keep
their producer id and sequences until one of them is acknowledged (the failed
batch landed) or all of them fail; only then does the partition move to a new
producer id (Java's ``markSequenceUnresolved``). A new id is asked for without
stopping the partitions whose sequences are fine (KIP-360), and retries keep
their order across the sequence wrap at 2**31-1.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import errors
from aioproducer.engine.idempotence import MAX_SEQUENCE
from tests.reliability.harness import FAST, PRODUCE_KEY, Tracker, within
from tests.support.aio import until

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=3, default_partitions=3, auto_create_topics=True),
]

NOT_ENOUGH_REPLICAS = errors.NotEnoughReplicasError.code
AFTER_APPEND = errors.NotEnoughReplicasAfterAppendError.code
NOT_LEADER = errors.NotLeaderOrFollowerError.code
UNKNOWN_PRODUCER = errors.UnknownProducerIdError.code


def _count(cluster: Any, topic: str, value: bytes) -> int:
    return sum(1 for r in cluster.records(topic) if r.value == value)


async def _appended_then_refused(
    cluster: Any, p: Any, topic: str, *, hold: float, gap: float
) -> tuple[Any, Any]:
    """B1 and B2 to partition 0: both written and answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, then every retry NOT_ENOUGH_REPLICAS.

    B1's answer is held back ``hold`` s, so that B2, enqueued ``gap`` s later,
    goes out behind it (pipelined); created later, B2 outlives B1.
    """
    cluster.fail_produce(topic, 0, AFTER_APPEND, count=2, after_append=True)
    cluster.fail_produce(topic, 0, NOT_ENOUGH_REPLICAS, count=1_000_000)
    cluster.delay_responses(hold, api_key=PRODUCE_KEY, count=1)
    b1 = await p.enqueue(topic, b"b1", partition=0)
    await asyncio.sleep(gap)
    b2 = await p.enqueue(topic, b"b2", partition=0)
    return b1, b2


async def test_appended_batches_refused_until_one_expires_are_stored_once(
    kafka_cluster: Any, producer: Any
) -> None:
    """B1 and B2 are written but answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, then
    NOT_ENOUGH_REPLICAS while the ISR is short; B1 runs out its delivery timeout.
    B2 must keep its sequence: renumbered under a new id it would be written twice.

    B2 outlives B1 by the gap between them (1 s): time enough, on a slow
    machine too, to bring the ISR back before B2 expires as well."""
    topic = "after-append"
    kafka_cluster.create_topic(topic, partitions=1)
    p = await producer(
        **dict(
            FAST,
            linger_ms=0,
            request_timeout_ms=2000,
            delivery_timeout_ms=2000,
            retry_backoff_ms=20,
            retry_backoff_max_ms=50,
        )
    )
    await within(p.send(topic, b"warm-up"), 10, "warm-up")

    b1, b2 = await _appended_then_refused(kafka_cluster, p, topic, hold=1.3, gap=1.0)

    with pytest.raises(errors.KafkaTimeoutError):
        await within(b1, 10, "B1")
    kafka_cluster.clear_faults()  # the ISR is back
    meta = await within(b2, 10, "B2")
    await within(p.send(topic, b"after", partition=0), 10, "a later record")

    assert _count(kafka_cluster, topic, b"b1") == 1  # written by its first attempt
    assert _count(kafka_cluster, topic, b"b2") == 1, "B2 was written twice"
    assert [r.value for r in kafka_cluster.records(topic)] == [b"warm-up", b"b1", b"b2", b"after"]
    assert meta.offset == 2  # the offset of its first write, acknowledged as a duplicate


async def test_unresolved_partition_with_every_batch_failed_moves_to_a_new_id(
    kafka_cluster: Any, producer: Any
) -> None:
    """Nothing after the failed batch was acknowledged: new records start a new id
    at sequence 0, and nothing already written is written again."""
    topic = "all-failed"
    kafka_cluster.create_topic(topic, partitions=1)
    p = await producer(
        **dict(
            FAST,
            linger_ms=0,
            request_timeout_ms=500,
            delivery_timeout_ms=1000,
            retry_backoff_ms=20,
            retry_backoff_max_ms=50,
        )
    )
    first = await within(p.send(topic, b"warm-up"), 10, "warm-up")
    b1, b2 = await _appended_then_refused(kafka_cluster, p, topic, hold=0.2, gap=0.1)
    for fut in (b1, b2):
        with pytest.raises(errors.KafkaTimeoutError):
            await within(fut, 10, "an expiring batch")
    kafka_cluster.clear_faults()
    await within(p.send(topic, b"after", partition=0), 10, "a later record")

    records = kafka_cluster.records(topic)
    assert [r.value for r in records] == [b"warm-up", b"b1", b"b2", b"after"]
    after = records[-1]
    assert after.sequence == 0 and after.producer_id != records[0].producer_id
    assert first.offset == 0


async def test_healthy_partition_keeps_flowing_while_another_waits_for_a_new_id(
    kafka_cluster: Any, producer: Any
) -> None:
    """Partition A's leader is stalled with a request in flight; partition B (on a
    healthy broker) needs a new producer id. B's records go through long before
    A's request times out (KIP-360: the wait is scoped to B)."""
    topic = "scoped-bump"
    kafka_cluster.create_topic(topic, partitions=3)
    stalled_part, bumped_part = 0, 1
    stalled = kafka_cluster.leader(topic, stalled_part)
    assert kafka_cluster.leader(topic, bumped_part) != stalled
    p = await producer(**dict(FAST, request_timeout_ms=20_000, delivery_timeout_ms=60_000))
    tracker = Tracker(topic)
    for part in range(3):
        await within(
            (await tracker.enqueue(p, b"p%d" % part, partition=part)).future, 10, "warm-up"
        )

    kafka_cluster.stall_broker(stalled)
    stuck = await tracker.enqueue(p, b"p%d" % stalled_part, partition=stalled_part)
    client = p._running.client
    await until(
        lambda: client.connections.in_flight(stalled) > 0, 10, "the request to the stalled broker"
    )
    kafka_cluster.fail_produce(topic, bumped_part, UNKNOWN_PRODUCER)
    flowing = [
        await tracker.enqueue(p, b"p%d" % bumped_part, partition=bumped_part) for _ in range(5)
    ]
    # Without the scoping this waits for the stalled request: 20 s.
    await within(asyncio.gather(*(s.future for s in flowing)), 8, "the healthy partition")
    assert not stuck.future.done()
    bumped = [r for r in kafka_cluster.records(topic) if r.partition == bumped_part]
    assert bumped[-1].producer_id != bumped[0].producer_id  # it did move to a new id

    kafka_cluster.resume_broker(stalled)
    await tracker.wait_all(30)
    tracker.check_exactly_once(kafka_cluster)


async def test_new_batches_wait_until_old_id_retries_of_their_partition_are_done(
    kafka_cluster: Any, producer: Any
) -> None:
    """After a new id, a partition still retrying a batch under the old one sends
    its new records only once that batch is done, then under the new id."""
    topic = "stale-gate"
    kafka_cluster.create_topic(topic, partitions=3)
    old_part, bump_part = 0, 1
    assert kafka_cluster.leader(topic, old_part) != kafka_cluster.leader(topic, bump_part)
    # The old-id batch stays pending for a request timeout: the new id has that
    # long to arrive and be used, on a slow machine too.
    request_timeout_ms = 3000
    p = await producer(**dict(FAST, request_timeout_ms=request_timeout_ms))
    tracker = Tracker(topic)
    for part in (old_part, bump_part):
        await within(
            (await tracker.enqueue(p, b"p%d" % part, partition=part)).future, 10, "warm-up"
        )
    # The old-id batch: written, answered after the request timeout, so it is
    # retried with an unknown outcome (and kept on the old id).
    old_leader = kafka_cluster.leader(topic, old_part)
    kafka_cluster.delay_responses(
        request_timeout_ms * 1.5 / 1000, broker=old_leader, api_key=PRODUCE_KEY, count=1
    )
    kafka_cluster.fail_produce(topic, bump_part, UNKNOWN_PRODUCER)
    old = await tracker.enqueue(p, b"p%d" % old_part, partition=old_part)
    client = p._running.client
    await until(
        lambda: client.connections.in_flight(old_leader) > 0, 10, "the old-id batch's request"
    )
    bumped = await tracker.enqueue(p, b"p%d" % bump_part, partition=bump_part)
    await within(bumped.future, 10, "the record that caused the new id")
    assert not old.future.done(), "the old-id batch should still be pending"
    new = await tracker.enqueue(p, b"p%d" % old_part, partition=old_part)
    await tracker.wait_all(20)

    tracker.check_exactly_once(kafka_cluster)
    by_value = {r.value: r for r in kafka_cluster.records(topic)}
    old_rec, new_rec, bump_rec = by_value[old.value], by_value[new.value], by_value[bumped.value]
    assert new_rec.offset > old_rec.offset
    # The gate: the new record waited for the old-id batch, then used the new id.
    assert (new_rec.producer_id, new_rec.sequence) == (bump_rec.producer_id, 0)
    assert old_rec.producer_id != bump_rec.producer_id


async def test_retries_straddling_the_sequence_wrap_keep_their_order(
    kafka_cluster: Any, producer: Any
) -> None:
    topic = "wrap"
    kafka_cluster.create_topic(topic, partitions=1)
    p = await producer(**dict(FAST, linger_ms=0, delivery_timeout_ms=5000))
    await within(p.send(topic, b"warm-up"), 10, "warm-up")
    # White-box: move both sides of partition 0 close to the wrap.
    seq = p._running.sender._seq
    from aioproducer.engine.idempotence import _Partition

    seq._parts[(topic, 0)] = _Partition(seq.producer_id, seq.epoch, next=MAX_SEQUENCE - 1)
    kafka_cluster.topic_states[topic].partitions[0].log.seed_producer(
        seq.producer_id, seq.epoch, MAX_SEQUENCE - 2
    )
    kafka_cluster.fail_produce(topic, 0, NOT_LEADER, count=2)
    kafka_cluster.delay_responses(0.3, api_key=PRODUCE_KEY, count=1)
    before = await p.enqueue(topic, b"at-max-1", key=b"k", partition=0)
    await p.enqueue(topic, b"at-max", key=b"k", partition=0)
    await asyncio.sleep(0.1)
    after = await p.enqueue(topic, b"at-0", key=b"k", partition=0)
    await within(asyncio.gather(before, after), 10, "the batches around the wrap")

    records = kafka_cluster.records(topic)
    assert [(r.value, r.sequence) for r in records[1:]] == [
        (b"at-max-1", MAX_SEQUENCE - 1),
        (b"at-max", MAX_SEQUENCE),
        (b"at-0", 0),
    ]
