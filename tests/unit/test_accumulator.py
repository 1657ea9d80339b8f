"""The accumulator's decisions, driven with an explicit clock and no event loop."""

from __future__ import annotations

from aioproducer.engine.accumulator import RecordAccumulator
from aioproducer.engine.batch import ProducerBatch, RecordMetadata, pack_sizes
from aioproducer.engine.idempotence import MAX_SEQUENCE
from aioproducer.engine.record_handle import RecordHandle
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches


def make(
    batch_size: int = 1000, linger_ms: float = 10, delivery_timeout_ms: int = 5000
) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        codec=Codec.NONE,
        delivery_timeout_ms=delivery_timeout_ms,
    )


def leaders(topic: str, partition: int) -> int | None:
    return {0: 1, 1: 2, 2: 1}.get(partition)


def fill(acc: RecordAccumulator, tp: tuple[str, int], n: int, now: float, size: int = 100) -> None:
    for _ in range(n):
        acc.append(tp, 1000, None, b"x" * size, None, now)


def enqueue(
    acc: RecordAccumulator,
    tp: tuple[str, int],
    timestamp_ms: int,
    key: bytes | None,
    value: bytes,
    now: float,
) -> tuple[ProducerBatch, RecordHandle]:
    """Append a record as ``Producer.enqueue`` does: to the open batch, or to a new one; with its handle."""
    sizes = pack_sizes(-1 if key is None else len(key), len(value))
    batch = acc.open_batch(tp)
    handle = None if batch is None else batch.try_append(timestamp_ms, key, value, None, sizes)
    if batch is None or handle is None:
        batch = acc.new_batch(tp, now)
        handle = batch.try_append(timestamp_ms, key, value, None, sizes)
    assert handle is not None
    return batch, handle


def test_not_ready_before_linger_then_ready() -> None:
    acc = make()
    fill(acc, ("t", 0), 1, now=0.0)
    r = acc.ready(0.005, leaders)
    assert r.nodes == set() and abs(r.next_check - 0.005) < 1e-9
    r = acc.ready(0.010, leaders)
    assert r.nodes == {1}


def test_full_batch_is_ready_at_once() -> None:
    acc = make(batch_size=500)
    fill(acc, ("t", 0), 6, now=0.0)  # overflows into a second batch
    assert acc.queued_batches() == 2
    assert acc.ready(0.0, leaders).nodes == {1}


def test_flush_and_memory_pressure_make_everything_ready() -> None:
    acc = make()
    fill(acc, ("t", 1), 1, now=0.0)
    assert acc.ready(0.0, leaders).nodes == set()
    assert acc.ready(0.0, leaders, memory_exhausted=True).nodes == {2}
    acc.flushing += 1
    assert acc.ready(0.0, leaders).nodes == {2}


def test_unknown_leader_reported() -> None:
    acc = make()
    fill(acc, ("t", 7), 1, now=0.0)
    r = acc.ready(1.0, leaders)
    assert r.nodes == set() and r.unknown_leader_topics == {"t"}


def test_drain_respects_max_request_size_and_rotates() -> None:
    acc = make(batch_size=300)
    for p in (0, 2):
        fill(acc, ("t", p), 2, now=0.0)  # one ~250-byte batch per partition
    ready = acc.ready(1.0, leaders)
    first = acc.drain(1.0, ready, max_request_size=300)
    assert [b.partition for b in first[1]] == [0]
    fill(acc, ("t", 0), 2, now=1.0)
    ready = acc.ready(2.0, leaders)
    second = acc.drain(2.0, ready, max_request_size=300)
    # The partition left out last time goes first now.
    assert [b.partition for b in second[1]] == [2]


def test_first_batch_always_drains_even_if_larger_than_request() -> None:
    acc = make(batch_size=100)
    fill(acc, ("t", 0), 1, now=0.0, size=5000)
    drained = acc.drain(1.0, acc.ready(1.0, leaders), max_request_size=100)
    assert len(drained[1]) == 1 and drained[1][0].sealed


def test_retried_batch_goes_to_front_and_backs_off() -> None:
    acc = make(batch_size=200)
    fill(acc, ("t", 0), 1, now=0.0)
    (batch,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1]
    fill(acc, ("t", 0), 1, now=1.0)
    acc.reenqueue(batch, now=1.0, backoff=0.1)
    r = acc.ready(1.05, leaders)
    assert r.nodes == set() and abs(r.next_check - 0.05) < 1e-9
    drained = acc.drain(1.2, acc.ready(1.2, leaders), 10**6)[1]
    assert drained[0] is batch and batch.attempts == 1


def test_a_retry_backoff_sets_the_next_check_even_when_its_leader_is_ready() -> None:
    acc = make(batch_size=200)
    fill(acc, ("t", 2), 1, now=0.0)
    (batch,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1]
    fill(acc, ("t", 0), 1, now=1.0)  # same leader, lingers 10 ms: makes node 1 ready
    acc.reenqueue(batch, now=1.0, backoff=0.1)  # visited after partition 0
    r = acc.ready(1.02, leaders)
    assert r.nodes == {1}
    assert abs(r.next_check - 0.08) < 1e-9  # partition 0 may be muted: wake for the retry
    drained = acc.drain(1.02, r, 10**6, muted={("t", 0)})
    assert drained.get(1, []) == []


def test_muted_partition_is_skipped() -> None:
    acc = make()
    fill(acc, ("t", 0), 1, now=0.0)
    fill(acc, ("t", 2), 1, now=0.0)
    drained = acc.drain(1.0, acc.ready(1.0, leaders), 10**6, muted={("t", 0)})
    assert [b.partition for b in drained[1]] == [2]


def test_expired_removes_only_past_deadline() -> None:
    acc = make(batch_size=150, delivery_timeout_ms=1000)
    fill(acc, ("t", 0), 1, now=0.0)
    fill(acc, ("t", 0), 1, now=0.5)
    assert acc.expired(0.9) == []
    gone = acc.expired(1.2)
    assert len(gone) == 1 and gone[0].created == 0.0
    assert acc.queued_batches() == 1
    assert acc.next_expiry() == 1.5


def test_a_record_goes_to_the_open_batch_or_starts_the_next() -> None:
    acc = make(batch_size=150)
    assert acc.open_batch(("t", 0)) is None and acc.queued_batches() == 0  # nothing to append to
    first = acc.append(("t", 0), 1, None, b"x" * 50, None, 0.0, reserve=300, bound=80)
    assert acc.open_batch(("t", 0)) is first and acc.queued_batches() == 1
    assert first.try_append(1, None, b"y", None, pack_sizes(-1, 1), 300, 40) is not None
    assert (
        first.try_append(1, None, b"z" * 120, None, pack_sizes(-1, 120), 400, 150) is None
    )  # no room
    second = acc.new_batch(("t", 0), 0.0)
    assert second.try_append(1, None, b"z" * 120, None, pack_sizes(-1, 120), 400, 150) is not None
    assert first.sealed and not second.sealed and acc.queued_batches() == 2
    assert acc.open_batch(("t", 0)) is second
    # append() does the same: a record the open batch has no room for starts the next one.
    third = acc.append(("t", 0), 1, None, b"w" * 120, None, 0.0, reserve=400, bound=150)
    assert third is not second and second.sealed and acc.open_batch(("t", 0)) is third
    # The batch holds the memory reserved for its records and their largest bound.
    assert (first.reserved, first.max_record_size, first.record_count) == (600, 80, 2)
    assert (second.reserved, second.max_record_size, second.record_count) == (400, 150, 1)
    assert (third.reserved, third.max_record_size, third.record_count) == (400, 150, 1)


def test_batches_hold_what_was_appended() -> None:
    acc = make(batch_size=10_000)
    for i in range(5):
        acc.append(("t", 0), 1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 0.0)
    (batch,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1]
    (parsed,) = parse_record_batches(batch.builder.build())
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in parsed.records] == [
        (b"k%d" % i, b"v%d" % i, 1000 + i, [("h", b"%d" % i)]) for i in range(5)
    ]


def test_handles_answer_for_the_records_they_were_appended_with() -> None:
    acc = make(batch_size=10_000)
    appended = [enqueue(acc, ("t", 0), 1000 + i, b"k%d" % i, b"v" * i, 0.0) for i in range(5)]
    batch = appended[0][0]
    assert all(b is batch for b, _ in appended) and not any(h.done() for _, h in appended)
    batch.complete(70)
    assert [h.result() for _, h in appended] == [
        RecordMetadata("t", 0, 70 + i, 1000 + i, 2, i) for i in range(5)
    ]


def test_retries_requeue_in_sequence_order_ahead_of_new_batches() -> None:
    """Idempotence: batches failing out of order still go back in sequence order."""
    acc = make(batch_size=150)
    for _ in range(3):
        fill(acc, ("t", 0), 1, now=0.0)
    sent = []
    for step in range(3):
        (b,) = acc.drain(1.0 + step, acc.ready(1.0 + step, leaders), 10**6)[1]
        b.base_sequence = step * 10
        sent.append(b)
    fill(acc, ("t", 0), 1, now=2.0)  # a new batch behind them
    # Responses arrive in reverse order; each is re-enqueued.
    for b in reversed(sent):
        acc.reenqueue(b, now=3.0, backoff=0.0)
    order = []
    while acc.queued_batches():
        (b,) = acc.drain(4.0, acc.ready(4.0, leaders), 10)[1]
        order.append(b.base_sequence)
    assert order == [0, 10, 20, -1]


def test_retries_straddling_the_sequence_wrap_requeue_in_send_order() -> None:
    """Sequences wrap after 2**31-1: the batch at 0 was sent after the one at MAX-1."""
    acc = make(batch_size=150)
    for _ in range(3):
        fill(acc, ("t", 0), 1, now=0.0)
    sent = []
    for step, sequence in enumerate((MAX_SEQUENCE - 1, MAX_SEQUENCE, 0)):
        (b,) = acc.drain(1.0 + step, acc.ready(1.0 + step, leaders), 10**6)[1]
        b.base_sequence = sequence
        b.producer_id = 7
        sent.append(b)
    for b in (sent[2], sent[0], sent[1]):  # responses in any order
        acc.reenqueue(b, now=3.0, backoff=0.0)
    order = []
    while acc.queued_batches():
        (b,) = acc.drain(4.0, acc.ready(4.0, leaders), 10)[1]
        order.append(b.base_sequence)
    assert order == [MAX_SEQUENCE - 1, MAX_SEQUENCE, 0]


def test_retried_heads_lists_partitions_whose_next_batch_is_a_retry() -> None:
    acc = make()
    fill(acc, ("t", 0), 1, now=0.0)
    fill(acc, ("t", 2), 1, now=0.0)
    (first, _) = sorted(
        acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1], key=lambda b: b.partition
    )
    fill(acc, ("t", 2), 1, now=1.0)
    acc.reenqueue(first, now=1.0, backoff=0.0)
    assert acc.retried_heads() == [("t", 0)]


def test_split_keeps_records_handles_deadline_and_memory_and_queues_parts_first() -> None:
    """KIP-126: each part at most half the refused batch, records in order."""
    acc = make(batch_size=100_000)
    appended = [
        enqueue(acc, ("t", 0), 1000 + i, None, b"%d" % i + b"x" * 99, 0.0) for i in range(10)
    ]
    handles = [h for _, h in appended]
    (big,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1]
    assert all(b is big for b, _ in appended)
    big.reserved = 1000
    big.payload = big.builder.build()
    fill(acc, ("t", 0), 1, now=2.0)  # a newer batch behind it
    parts = acc.split(big)
    assert len(parts) >= 2 and all(
        p.builder.size_in_bytes <= big.builder.size_in_bytes // 2 for p in parts
    )
    records = [r for p in parts for r in parse_record_batches(p.builder.build())[0].records]
    assert [r.timestamp_ms for r in records] == [1000 + i for i in range(10)]
    assert [r.value[:1] for r in records] == [b"%d" % i for i in range(10)]
    assert all(p.deadline == big.deadline for p in parts)
    assert sum(p.reserved for p in parts) == 1000 and big.reserved == 0
    assert big.done and big not in acc.incomplete and set(parts) <= acc.incomplete
    assert not any(h.done() for h in handles)  # moved, not decided
    acc.reenqueue_split(parts, now=3.0)
    order = []
    while acc.queued_batches():
        (b,) = acc.drain(4.0, acc.ready(4.0, leaders), 10)[1]
        order.append(b)
    assert order[: len(parts)] == parts and order[-1].created == 2.0
    # The original handles follow their records: each answers from its part's
    # completion, at its offset there; completing the last part decides only its own.
    parts[-1].complete(100 * (len(parts) - 1))
    assert [h.done() for h in handles] == [i >= 10 - parts[-1].record_count for i in range(10)]
    for k, part in enumerate(parts[:-1]):
        part.complete(100 * k)
    expected, first = [], 0
    for k, part in enumerate(parts):
        expected += [(100 * k + j, 1000 + first + j, -1, 100) for j in range(part.record_count)]
        first += part.record_count
    assert [h.result()[2:] for h in handles] == expected


def test_only_partitions_with_queued_batches_are_visited() -> None:
    acc = make(batch_size=200, linger_ms=0)
    for p in range(3):
        fill(acc, ("t", p), 1, now=0.0)
    assert sorted(acc.nonempty_partitions()) == [("t", 0), ("t", 1), ("t", 2)]
    drained = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)
    batches = [b for bs in drained.values() for b in bs]
    assert len(batches) == 3 and acc.nonempty_partitions() == []
    # Every partition ever written still has its (empty) queue; none is visited.
    assert acc.ready(2.0, leaders).partitions == {} and acc.next_expiry() == float("inf")
    # A retry puts its partition back; expiry takes it out again.
    acc.reenqueue(batches[0], now=2.0, backoff=0.0)
    assert acc.nonempty_partitions() == [(batches[0].topic, batches[0].partition)]
    assert acc.retried_heads() == acc.nonempty_partitions()
    assert acc.expired(100.0) == [batches[0]] and acc.nonempty_partitions() == []
    fill(acc, ("t", 1), 3, now=3.0)
    assert acc.nonempty_partitions() == [("t", 1)] and acc.queued_batches() == 3
    assert acc.take_all() and acc.nonempty_partitions() == [] and acc.queued_batches() == 0


def test_forget_topic_keeps_topics_with_pending_batches() -> None:
    acc = make()
    fill(acc, ("a", 0), 1, now=0.0)
    fill(acc, ("b", 0), 1, now=0.0)
    (batch,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1][:1] or [None]
    assert batch is not None
    assert acc.forget_topic(batch.topic) is False  # in flight: still incomplete
    acc.finished(batch)
    assert acc.forget_topic(batch.topic) is True


def test_queue_sizes_and_unavailable_nodes_for_the_partitioner() -> None:
    acc = make(batch_size=150, linger_ms=0)
    fill(acc, ("t", 0), 3, now=0.0)  # one record per batch: 3 batches on node 1
    fill(acc, ("t", 1), 1, now=0.0)  # node 2
    assert acc.queue_sizes("t", [0, 1, 2, 5]) == [3, 1, 0, 0]
    ready = acc.ready(1.0, leaders)
    ready.nodes.discard(1)  # node 1 has no connection: not drained
    acc.drain(1.0, ready, 10**6)
    acc.ready(1.5, leaders)
    assert acc.unavailable_nodes(0.4) == {1}
    assert acc.unavailable_nodes(0.6) == set()


def test_split_parts_take_no_new_records() -> None:
    """A part's sequence range is fixed by the refused batch: a record appended
    after the split opens a new batch instead of growing the last part."""
    acc = make(batch_size=100_000)
    for i in range(10):
        acc.append(("t", 0), 1000 + i, None, b"%d" % i + b"x" * 99, None, 0.0)
    (big,) = acc.drain(1.0, acc.ready(1.0, leaders), 10**6)[1]
    big.payload = big.builder.build()
    parts = acc.split(big)
    acc.reenqueue_split(parts, now=3.0)
    counts = [p.record_count for p in parts]
    batch = acc.append(("t", 0), 2000, None, b"late", None, 4.0)
    assert batch is not None and batch not in parts
    assert [p.record_count for p in parts] == counts


def test_only_the_tail_of_a_queue_takes_records() -> None:
    # The producer appends unkeyed records straight to the batch it last
    # filled while that batch is unsealed: a batch with another one behind it,
    # or out of its queue (expired, taken, aborted), must be sealed.
    acc = make(batch_size=150, delivery_timeout_ms=1000)
    fill(acc, ("t", 0), 1, now=0.0)
    first = acc.open_batch(("t", 0))
    assert first is not None and not first.sealed
    second = acc.new_batch(("t", 0), 0.5)
    assert first.sealed and not second.sealed
    assert first.try_append(1, None, b"x", None, pack_sizes(-1, 1)) is None

    (expired,) = acc.expired(1.2)
    assert expired is first and not second.sealed
    fill(acc, ("t", 1), 1, now=1.2)
    taken = acc.take_partitions([("t", 0)])
    assert taken == [second] and second.sealed
    (rest,) = acc.take_all()
    assert rest.partition == 1 and rest.sealed


def test_sendable_from_is_when_ready_first_finds_a_new_batch_sendable() -> None:
    """The sender skips waking for a new batch it would only find lingering:
    sendable_from must agree with ready(), or a batch could wait past its linger."""
    acc = make(batch_size=500, linger_ms=10)
    alone = acc.new_batch(("t", 0), 2.0)
    fill(acc, ("t", 0), 1, now=2.0)
    assert acc.sendable_from(alone, leaders) == 2.010
    assert acc.ready(2.0099, leaders).nodes == set()
    assert acc.ready(2.010, leaders).nodes == {1}
    # Urgent: a flush, a close or a caller waiting for memory sends it at once.
    assert acc.sendable_from(alone, leaders, memory_exhausted=True) == float("-inf")
    assert acc.ready(2.0, leaders, memory_exhausted=True).nodes == {1}
    acc.flushing += 1
    assert acc.sendable_from(alone, leaders) == float("-inf")
    acc.flushing -= 1
    acc.closing = True
    assert acc.sendable_from(alone, leaders) == float("-inf")
    acc.closing = False
    # Behind a full batch (the record that did not fit opened it): the one
    # ahead of it is sendable now.
    fill(acc, ("t", 2), 5, now=3.0)  # 5 x ~100 B: the fifth opens a second batch
    behind = acc.open_batch(("t", 2))
    assert behind is not None and acc.queued_batches() == 3
    assert acc.sendable_from(behind, leaders) == float("-inf")
    assert acc.ready(3.0, leaders).nodes == {1}
    # A batch full as it opens (one record as large as the batch).
    big = acc.new_batch(("t", 1), 4.0)
    acc.append(("t", 1), 1000, None, b"x" * 600, None, 4.0)
    assert big.is_full() and acc.sendable_from(big, leaders) == float("-inf")
    assert 2 in acc.ready(4.0, leaders).nodes
    # A partition without a known leader: the pass asks for metadata at once.
    stranded = acc.new_batch(("t", 3), 5.0)
    fill(acc, ("t", 3), 1, now=5.0)
    assert acc.sendable_from(stranded, leaders) == float("-inf")
    assert acc.ready(5.0, leaders).unknown_leader_topics == {"t"}
