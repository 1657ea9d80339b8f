"""Sequence and epoch bookkeeping of the idempotent producer, without a loop."""

from __future__ import annotations

from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.idempotence import MAX_SEQUENCE, SequenceState, _Partition, sequence_before
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches


def batch(partition: int = 0, records: int = 3, topic: str = "t") -> ProducerBatch:
    b = ProducerBatch(
        topic, partition, codec=Codec.NONE, batch_size=1 << 20, now=0.0, delivery_timeout=60
    )
    for i in range(records):
        b.try_append(1000 + i, None, b"v%d" % i, None, 0)
    return b


def stamped(s: SequenceState, *sizes: int) -> list[ProducerBatch]:
    """Batches of partition 0 with ``sizes`` records each, stamped in order."""
    batches = [batch(0, n) for n in sizes]
    for b in batches:
        s.stamp(b)
    return batches


def ready_state(pid: int = 7, epoch: int = 0) -> SequenceState:
    s = SequenceState()
    assert not s.ready
    s.reset(pid, epoch)
    assert s.ready
    return s


def test_sequences_are_consecutive_per_partition_and_kept_across_retries() -> None:
    s = ready_state()
    a, b, c = batch(0, 3), batch(0, 2), batch(1, 4)
    for x in (a, b, c):
        s.stamp(x)
    assert (a.base_sequence, b.base_sequence, c.base_sequence) == (0, 3, 0)
    assert (a.producer_id, a.producer_epoch) == (7, 0)
    s.stamp(a)  # a retry: the same sequence
    assert a.base_sequence == 0
    d = batch(0, 1)
    s.stamp(d)
    assert d.base_sequence == 5


def test_first_pending_follows_completion() -> None:
    s = ready_state()
    a, b = batch(0), batch(0)
    s.stamp(a)
    s.stamp(b)
    assert s.is_first_pending(a) and not s.is_first_pending(b)
    s.finished(a)
    assert s.is_first_pending(b)


def test_bump_holds_only_its_partition_then_renumbers_it_from_zero() -> None:
    s = ready_state(pid=7, epoch=0)
    done, a, b, other = batch(0, 3), batch(0, 2), batch(0, 4), batch(1, 1)
    for x in (done, a, b, other):
        s.stamp(x)
    a.payload = a.builder.build(producer_id=7, producer_epoch=0, base_sequence=a.base_sequence)
    s.finished(done)
    s.request_bump("expired", ("t", 0))
    s.request_bump("second reason is ignored", ("t", 0))
    # KIP-360: only the broken partition waits for the new id
    assert s.ready and s.bump_needed and s.bump_reason == "expired"
    assert s.waiting_for_id() == {("t", 0)}
    renumbered = s.reset(7, 1)
    assert not s.bump_needed and s.waiting_for_id() == set()
    assert renumbered == [a, b]
    assert (a.base_sequence, b.base_sequence) == (0, 2)
    assert all(x.producer_epoch == 1 for x in (a, b))
    assert (other.producer_epoch, other.base_sequence) == (0, 0)
    # the built payload was re-stamped in place of a rebuild
    (parsed,) = parse_record_batches(a.payload)
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (7, 1, 0)
    new = batch(0, 1)
    s.stamp(new)
    assert new.base_sequence == 6


def test_new_producer_id_restamps_even_stamped_batches() -> None:
    s = ready_state(pid=7)
    a = batch(0)
    s.stamp(a)
    s.reset(9, 0)
    assert (a.producer_id, a.base_sequence) == (9, 0)


def test_sequence_wraps_after_int32_max() -> None:
    s = ready_state()
    s._parts[("t", 0)] = _Partition(7, 0, next=MAX_SEQUENCE - 1)  # white-box: near the wrap
    a, b = batch(0, 3), batch(0, 1)
    s.stamp(a)
    s.stamp(b)
    # MAX-1, MAX, 0 are taken by a: b starts at 1
    assert (a.base_sequence, b.base_sequence) == (MAX_SEQUENCE - 1, 1)


def test_bump_renumbers_only_the_partition_that_broke() -> None:
    """Elsewhere a pending batch may be written already: it keeps its old stamp (KIP-360)."""
    s = ready_state(pid=7, epoch=0)
    broken, elsewhere = batch(0, 2), batch(1, 3)
    s.stamp(broken)
    s.stamp(elsewhere)
    s.request_bump("out of order", ("t", 0))
    renumbered = s.reset(7, 1)
    assert renumbered == [broken] and (broken.producer_epoch, broken.base_sequence) == (1, 0)
    assert (elsewhere.producer_epoch, elsewhere.base_sequence) == (0, 0)
    assert s.stale == {("t", 1)}  # new batches there wait for the old-epoch one
    s.finished(elsewhere)
    assert s.stale == set()
    new = batch(1, 1)
    s.stamp(new)
    assert (new.producer_epoch, new.base_sequence) == (1, 0)


def test_a_batch_that_may_be_written_is_never_renumbered() -> None:
    """A timed-out retry keeps its stamp even in the partition that broke."""
    s = ready_state(pid=7, epoch=0)
    expired, ambiguous = batch(0, 1), batch(0, 1)
    s.stamp(expired)
    s.stamp(ambiguous)
    ambiguous.answered(maybe_written=True)  # its request timed out
    s.failed(expired, may_have_landed=False)  # its sequence is a gap: the partition breaks
    assert s.reset(9, 0) == []
    assert (ambiguous.producer_id, ambiguous.base_sequence) == (7, 1)
    assert s.stale == {("t", 0)}
    # The broker then answers OUT_OF_ORDER for it: proven unwritten, renumbered next time.
    ambiguous.answered(maybe_written=False)
    s.request_bump("out of order", ("t", 0))
    assert s.reset(10, 0) == [ambiguous]
    assert (ambiguous.producer_id, ambiguous.base_sequence) == (10, 0)


def test_sequence_before_across_the_wrap() -> None:
    assert sequence_before(1, 2) and not sequence_before(2, 1) and not sequence_before(3, 3)
    assert sequence_before(MAX_SEQUENCE, 0) and not sequence_before(0, MAX_SEQUENCE)
    assert sequence_before(MAX_SEQUENCE - 5, 4)


def test_failed_batch_that_may_have_landed_leaves_the_partition_unresolved() -> None:
    """Later pending batches keep their stamps; a later acknowledgement resolves it."""
    s = ready_state()
    b1, b2 = stamped(s, 2, 2)
    s.failed(b1, may_have_landed=True)
    assert s.is_unresolved(("t", 0)) and s.held() == {("t", 0)}
    assert not s.bump_needed  # no renumbering: b1 may be in the log
    s.acknowledged(b2)  # b2 follows b1: the broker holds b1 too
    assert not s.is_unresolved(("t", 0)) and not s.bump_needed and s.held() == set()
    b3 = batch(0, 1)
    s.stamp(b3)
    assert (b3.producer_id, b3.base_sequence) == (7, 4)  # the sequence carries on


def test_unresolved_partition_whose_later_batches_all_fail_needs_a_new_id() -> None:
    s = ready_state()
    b1, b2 = stamped(s, 2, 2)
    s.failed(b1, may_have_landed=True)
    s.failed(b2, may_have_landed=True)
    assert s.waiting_for_id() == {("t", 0)} and not s.is_unresolved(("t", 0))
    s.reset(9, 0)
    b3 = batch(0, 1)
    s.stamp(b3)
    assert (b3.producer_id, b3.base_sequence) == (9, 0)


def test_acknowledging_an_earlier_batch_does_not_resolve() -> None:
    s = ready_state()
    b0, b1 = stamped(s, 1, 1)
    s.failed(b1, may_have_landed=True)
    assert not s.bump_needed
    s.acknowledged(b0)  # before b1: says nothing about it
    assert s.waiting_for_id() == {("t", 0)}


def test_failure_that_certainly_did_not_land_renumbers_the_rest() -> None:
    s = ready_state()
    b1, b2 = stamped(s, 2, 3)
    s.failed(b1, may_have_landed=False)
    assert s.waiting_for_id() == {("t", 0)}
    assert s.reset(9, 0) == [b2] and (b2.producer_id, b2.base_sequence) == (9, 0)
