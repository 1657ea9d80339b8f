"""One fault at a time: what the producer guarantees while the cluster misbehaves.

With idempotence (the default) every acknowledged record is stored exactly
once, each key's records keep their order and every future resolves once, under
leader moves, NOT_LEADER bursts, connections dropped mid-response, responses
delayed past the request timeout, and sequence errors from the broker. Without
idempotence nothing is lost and duplicates appear only where a retry happened.
A batch that expires in flight moves the producer to a new epoch, and a cluster
that never answers fails every record within the delivery timeout.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from aioproducer import errors
from tests.reliability.harness import FAST, PRODUCE_KEY, RetryLog, Tracker, within
from tests.support.aio import until

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=3, default_partitions=6, auto_create_topics=True),
]

PARTITIONS = 6
RECORDS = 1500
NOT_LEADER = errors.NotLeaderOrFollowerError.code
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.code
UNKNOWN_PRODUCER = errors.UnknownProducerIdError.code
# Key of the records sent to an explicit partition: keys keep their order per partition.
PINNED = b"pinned"
# A response held this long is past FAST's request timeout: the producer gives
# up on it, closes the connection and sends the batch again.
PAST_REQUEST_TIMEOUT = FAST["request_timeout_ms"] * 1.5 / 1000

Injector = Callable[[Any, str, random.Random], None]


def move_every_leader(cluster: Any, topic: str, rng: random.Random) -> None:
    for partition in range(PARTITIONS):
        cluster.move_leader(topic, partition)


def not_leader_bursts(cluster: Any, topic: str, rng: random.Random) -> None:
    for partition in range(PARTITIONS):
        cluster.fail_produce(topic, partition, NOT_LEADER, count=3)


def drop_mid_response(cluster: Any, topic: str, rng: random.Random) -> None:
    cluster.drop_connections(mid_response=True)


def drop_after_requests(cluster: Any, topic: str, rng: random.Random) -> None:
    cluster.drop_connections(rng.choice(list(cluster.broker_ids)), after_requests=2)


def delay_past_request_timeout(cluster: Any, topic: str, rng: random.Random) -> None:
    cluster.delay_responses(PAST_REQUEST_TIMEOUT, api_key=PRODUCE_KEY, count=2)


def delay_with_duplicate_sequence_errors(cluster: Any, topic: str, rng: random.Random) -> None:
    # Brokers before Kafka 2.x answer a retried, already written batch with
    # DUPLICATE_SEQUENCE_NUMBER instead of its first offset.
    cluster.duplicate_error_code = errors.DuplicateSequenceNumberError.code
    delay_past_request_timeout(cluster, topic, rng)


def out_of_order_sequence(cluster: Any, topic: str, rng: random.Random) -> None:
    cluster.fail_produce(topic, rng.randrange(PARTITIONS), OUT_OF_ORDER)


def unknown_producer_id(cluster: Any, topic: str, rng: random.Random) -> None:
    cluster.fail_produce(topic, rng.randrange(PARTITIONS), UNKNOWN_PRODUCER)


FAULTS: dict[str, Injector] = {
    "leader-moves": move_every_leader,
    "not-leader-bursts": not_leader_bursts,
    "drop-mid-response": drop_mid_response,
    "drop-after-requests": drop_after_requests,
    "delay-past-request-timeout": delay_past_request_timeout,
    "delay-answered-duplicate-sequence": delay_with_duplicate_sequence_errors,
    "out-of-order-sequence": out_of_order_sequence,
    "unknown-producer-id": unknown_producer_id,
}


async def produce_through(
    cluster: Any,
    producer: Any,
    tracker: Tracker,
    inject: Injector,
    *,
    records: int = RECORDS,
    at: tuple[float, ...] = (0.2, 0.45, 0.7),
    seed: int = 0,
) -> None:
    """Enqueue ``records`` keyed records, injecting the fault at the given fractions."""
    rng = random.Random(seed)
    marks = {int(records * f) for f in at}
    for i in range(records):
        if i in marks:
            inject(cluster, tracker.topic, rng)
        await tracker.enqueue(producer)
        if i % 50 == 49:
            # Spread the records over time so that faults meet batches in
            # every state: queued, in flight, being retried.
            await asyncio.sleep(0.01)
    await tracker.wait_all(60)


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_exactly_once_and_in_order_under(
    fault: str, kafka_cluster: Any, producer: Any, scenario: Callable[[str], None], monkeypatch: Any
) -> None:
    topic = f"faults-{fault}"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    p = await producer(**FAST)
    await p.partitions_for(topic)
    tracker = Tracker(topic)
    retries = RetryLog(monkeypatch, tracker)
    requests_before = kafka_cluster.request_count(api_key=PRODUCE_KEY)

    await produce_through(kafka_cluster, p, tracker, FAULTS[fault])

    records = tracker.check_exactly_once(kafka_cluster)
    generations = sorted({(r.producer_id, r.producer_epoch) for r in records})
    scenario(
        f"{fault}: {len(records)} records exactly once, {retries.batches} batch retries, "
        f"{kafka_cluster.request_count(api_key=PRODUCE_KEY) - requests_before} produce "
        f"requests, producer (id, epoch) used: {generations}"
    )


@pytest.mark.parametrize(
    "code", [OUT_OF_ORDER, UNKNOWN_PRODUCER], ids=["out-of-order", "unknown-pid"]
)
async def test_sequence_error_moves_to_a_new_epoch_without_restart(
    code: int, kafka_cluster: Any, producer: Any, scenario: Callable[[str], None]
) -> None:
    topic = f"sequence-error-{code}"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    p = await producer(**FAST)
    tracker = Tracker(topic)
    for _ in range(200):
        await tracker.enqueue(p)
    await tracker.wait_all(20)
    before = {(r.producer_id, r.producer_epoch) for r in tracker.stored(kafka_cluster)}
    assert len(before) == 1

    # The next batch for partition 0 is refused as if the broker had lost
    # track of this producer's sequence (it is the only batch pending there).
    kafka_cluster.fail_produce(topic, 0, code)
    hit = await tracker.enqueue(p, PINNED, partition=0)
    md = await within(hit.future, 10, "the send hit by the sequence error")
    for _ in range(200):
        await tracker.enqueue(p)
    await tracker.wait_all(20)

    records = tracker.check_exactly_once(kafka_cluster)
    stored = {(r.partition, r.offset): r for r in records}
    after = stored[(md.partition, md.offset)]
    assert (after.producer_id, after.producer_epoch) not in before, (
        f"the record sent after error {code} still carries {before}"
    )
    last = next(r for r in records if r.value == tracker.sent[-1].value)
    assert (last.producer_id, last.producer_epoch) == (after.producer_id, after.producer_epoch)
    scenario(
        f"error {code} on partition 0: recovered without restart, "
        f"(id, epoch) {min(before)} -> {(after.producer_id, after.producer_epoch)}, "
        f"{len(records)} records exactly once"
    )


async def test_batch_expired_in_flight_moves_to_a_new_epoch(
    kafka_cluster: Any, producer: Any, scenario: Callable[[str], None]
) -> None:
    topic = "expired-in-flight"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    # The doomed batch is refused once, so that its retry goes out 1 s after
    # the batch was created; that retry's response is held back, and the
    # batch's delivery timeout (3 s) runs out while the request is still
    # within its own timeout (2.5 s): the batch expires in flight. The margins
    # (1 s to hold the retry's response, 2 s for the retry to go out before the
    # expiry) are wide enough for a slow or busy machine.
    p = await producer(
        linger_ms=0,
        request_timeout_ms=2500,
        delivery_timeout_ms=3000,
        retry_backoff_ms=1000,
        retry_backoff_max_ms=1000,
        reconnect_backoff_ms=10,
        reconnect_backoff_max_ms=100,
    )
    tracker = Tracker(topic)
    for _ in range(50):
        await tracker.enqueue(p)
    await tracker.wait_all(10)
    first = tracker.stored(kafka_cluster)[0]
    leader = kafka_cluster.leader(topic, 0)

    produce_requests = kafka_cluster.request_count(api_key=PRODUCE_KEY, broker=leader)
    kafka_cluster.fail_produce(topic, 0, NOT_LEADER)
    doomed = await tracker.enqueue(p, PINNED, partition=0)

    def first_attempt_answered() -> bool:
        return kafka_cluster.request_count(api_key=PRODUCE_KEY, broker=leader) > produce_requests

    await until(first_attempt_answered, 5, "the first attempt of the doomed batch")
    kafka_cluster.delay_responses(10.0, broker=leader, api_key=PRODUCE_KEY, count=1)
    with pytest.raises(errors.KafkaTimeoutError, match="in flight"):
        await within(doomed.future, 15, "the doomed batch")
    # Records sent after the expiry, to the same partition and to the others,
    # once the held response's request has timed out (0.5 s after the expiry):
    # records sent into that connection before would wait behind it.
    client = p._running.client
    await until(lambda: client.connections.in_flight(leader) == 0, 15, "the held request's timeout")
    for i in range(100):
        await tracker.enqueue(
            p, PINNED if i % 4 == 0 else None, partition=0 if i % 4 == 0 else None
        )
    await tracker.wait_all(20)

    records = tracker.check_exactly_once(kafka_cluster, allow_failed=[doomed.value])
    by_value = {r.value: r for r in records}
    new = by_value[next(s.value for s in reversed(tracker.sent) if s.key == PINNED)]
    assert (new.producer_id, new.producer_epoch) != (first.producer_id, first.producer_epoch), (
        "records after a batch expired in flight must use a new epoch or producer id there"
    )
    scenario(
        f"expired in flight: the batch failed with KafkaTimeoutError, "
        f"(id, epoch) {(first.producer_id, first.producer_epoch)} -> "
        f"{(new.producer_id, new.producer_epoch)}; doomed record stored "
        f"{sum(1 for r in records if r.value == doomed.value)} time(s); "
        f"{len(records)} records stored, each exactly once"
    )


async def test_epoch_bump_elsewhere_does_not_rewrite_a_written_batch(
    kafka_cluster: Any, producer: Any
) -> None:
    topic = "bump-elsewhere"
    kafka_cluster.create_topic(topic, partitions=3)
    assert kafka_cluster.leader(topic, 0) != kafka_cluster.leader(topic, 1)
    p = await producer(**FAST)
    tracker = Tracker(topic)
    for partition in (0, 1):
        await within(
            (await tracker.enqueue(p, b"p%d" % partition, partition=partition)).future,
            10,
            "warm-up",
        )
    # Partition 0: the batch is written, its response comes after the request
    # timeout, so the producer retries it with an unknown outcome. Meanwhile
    # partition 1 answers UNKNOWN_PRODUCER_ID, which bumps the epoch.
    kafka_cluster.delay_responses(
        PAST_REQUEST_TIMEOUT, broker=kafka_cluster.leader(topic, 0), api_key=PRODUCE_KEY, count=1
    )
    kafka_cluster.fail_produce(topic, 1, UNKNOWN_PRODUCER)
    await tracker.enqueue(p, b"p0", partition=0)
    await tracker.enqueue(p, b"p1", partition=1)
    # A later record for partition 0, sent while its old-id retry is pending:
    # stored once, after the retried one (per-key order).
    await asyncio.sleep(0.05)
    await tracker.enqueue(p, b"p0", partition=0)
    await tracker.wait_all(10)

    # exactly once, and per key (p0) in send order
    tracker.check_exactly_once(kafka_cluster)


async def test_without_idempotence_nothing_is_lost_and_duplicates_come_from_retries(
    kafka_cluster: Any, producer: Any, scenario: Callable[[str], None], monkeypatch: Any
) -> None:
    topic = "at-least-once"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    p = await producer(**FAST, enable_idempotence=False)
    await p.partitions_for(topic)
    tracker = Tracker(topic)
    retries = RetryLog(monkeypatch, tracker)

    # One fault per injection point, so that each meets written requests: a
    # response delayed past the request timeout or cut mid-way belongs to a
    # write that happened, and its retry writes the records again.
    rotation = iter([drop_mid_response, not_leader_bursts, delay_past_request_timeout])

    def next_fault(cluster: Any, topic: str, rng: random.Random) -> None:
        next(rotation)(cluster, topic, rng)

    await produce_through(kafka_cluster, p, tracker, next_fault)

    tracker.check_resolved_once()
    failed = tracker.failures()
    assert not failed, f"{len(failed)} records failed, e.g. {failed[:3]}"
    counts = Counter(r.value for r in tracker.stored(kafka_cluster))
    missing = [s.value for s in tracker.sent if s.value not in counts]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:5]}"
    duplicated = {v for v, c in counts.items() if c > 1}
    retried = retries.values()
    assert duplicated <= retried, (
        f"records stored twice although never retried: {sorted(duplicated - retried)[:5]}"
    )
    # The faults above do cause duplicates without idempotence; none would
    # mean the scenario did not exercise what it claims to.
    assert duplicated, "no record was written twice: the faults missed the written requests"
    scenario(
        f"idempotence off: {len(tracker.sent)} records, none lost; {len(duplicated)} duplicated, "
        f"all among the {len(retried)} records of {retries.batches} retried batches"
    )


async def test_cluster_that_never_answers_fails_everything_within_delivery_timeout(
    kafka_cluster: Any, producer: Any, scenario: Callable[[str], None]
) -> None:
    topic = "stalled"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    delivery_timeout = 1.5
    p = await producer(
        linger_ms=5,
        request_timeout_ms=500,
        delivery_timeout_ms=int(delivery_timeout * 1000),
        retry_backoff_ms=10,
        retry_backoff_max_ms=100,
        reconnect_backoff_ms=10,
        reconnect_backoff_max_ms=100,
    )
    tracker = Tracker(topic)
    await (await tracker.enqueue(p)).future  # metadata and producer id are known
    delivered = len(tracker.sent)

    for broker in kafka_cluster.broker_ids:
        kafka_cluster.stall_broker(broker)
    try:
        started = time.monotonic()
        for _ in range(100):
            await tracker.enqueue(p)
        await tracker.wait_all(delivery_timeout + 6.0)  # a bound, with room for a slow machine
        elapsed = time.monotonic() - started
        await within(p.close(), 10, "close() with a stalled cluster")
    finally:
        for broker in kafka_cluster.broker_ids:
            kafka_cluster.resume_broker(broker)

    tracker.check_resolved_once()
    outcomes = Counter(type(s.future.exception()).__name__ for s in tracker.sent[delivered:])
    assert outcomes == {"KafkaTimeoutError": 100}, outcomes
    scenario(
        f"stalled cluster: 100/100 records failed with KafkaTimeoutError within "
        f"{elapsed:.2f} s (delivery_timeout {delivery_timeout} s); close() returned"
    )
