"""Sequence and epoch bookkeeping of the idempotent producer, without a loop."""

from __future__ import annotations

from aioproducer.batch import ProducerBatch
from aioproducer.idempotence import MAX_SEQUENCE, SequenceState
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import parse_record_batches


def batch(partition: int = 0, records: int = 3, topic: str = "t") -> ProducerBatch:
    b = ProducerBatch(topic, partition, codec=Codec.NONE, batch_size=1 << 20, now=0.0, delivery_timeout=60)
    for i in range(records):
        b.try_append(1000 + i, None, b"v%d" % i, None, object(), 0)
    return b


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


def test_bump_blocks_until_reset_then_renumbers_pending_from_zero() -> None:
    s = ready_state(pid=7, epoch=0)
    done, a, b, other = batch(0, 3), batch(0, 2), batch(0, 4), batch(1, 1)
    for x in (done, a, b, other):
        s.stamp(x)
    a.payload = a.builder.build(producer_id=7, producer_epoch=0, base_sequence=a.base_sequence)
    s.finished(done)
    s.request_bump("expired")
    s.request_bump("second reason is ignored")
    assert not s.ready and s.bump_reason == "expired"
    renumbered = s.reset(7, 1)
    assert s.ready and set(renumbered) == {a, b, other}
    assert (a.base_sequence, b.base_sequence, other.base_sequence) == (0, 2, 0)
    assert all(x.producer_epoch == 1 for x in (a, b, other))
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
    s._next[("t", 0)] = MAX_SEQUENCE - 1  # white-box: start near the wrap
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
    ambiguous.maybe_written = True  # its request timed out
    s.finished(expired)  # failed: its sequence is lost, the partition breaks
    s.request_bump("expired", ("t", 0))
    assert s.reset(9, 0) == []
    assert (ambiguous.producer_id, ambiguous.base_sequence) == (7, 1)
    assert s.stale == {("t", 0)}
    # The broker then answers OUT_OF_ORDER for it: proven unwritten, renumbered next time.
    ambiguous.maybe_written = False
    s.request_bump("out of order", ("t", 0))
    assert s.reset(10, 0) == [ambiguous]
    assert (ambiguous.producer_id, ambiguous.base_sequence) == (10, 0)
