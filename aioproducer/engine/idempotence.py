"""Producer id, epoch and per-partition sequence numbers of an idempotent producer.

The broker keeps, per (producer id, partition), the sequence numbers of the last
five batches it wrote; a batch whose sequence it has already written is answered
as a duplicate and not written again, one that skips a number is refused with
OUT_OF_ORDER_SEQUENCE_NUMBER (KIP-98). So a batch keeps the sequence it was
given at its first send across every retry, and batches of a partition carry
consecutive sequences.

:class:`SequenceState` is the bookkeeping, pure and loop-free. Invariants:

* each partition's sequences belong to one (producer id, epoch), its own: after
  a new id arrives, a partition still holding batches stamped with the old one
  stays on it (it is *stale*) until they are done, and only then restarts at
  sequence 0 under the new id (Java's ``hasStaleProducerIdAndEpoch``);
* a stamped batch that failed while the broker may hold it makes its partition
  *unresolved* (Java's ``markSequenceUnresolved``): the later pending batches
  keep their stamps, no new batch is stamped there, until a later batch is
  acknowledged (the failed one landed: carry on) or answered OUT_OF_ORDER as
  the first pending one, or nothing is pending any more (it may not have landed:
  new id for that partition);
* only the partitions whose sequence state broke wait for a new id (KIP-360);
  every other partition keeps sending meanwhile.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from .batch import ProducerBatch

__all__ = ["MAX_SEQUENCE", "SequenceState", "held_in_order", "sequence_before"]

TopicPartition = tuple[str, int]
MAX_SEQUENCE = (1 << 31) - 1  # sequences wrap to 0 after Int32.MAX_VALUE
_SPACE = MAX_SEQUENCE + 1


def _add(sequence: int, count: int) -> int:
    return (sequence + count) % _SPACE


def sequence_before(a: int, b: int) -> bool:
    """Whether sequence ``a`` comes before ``b``, across the wrap at 2**31-1.

    Pending sequences of a partition span far less than half the space, so the
    shorter way round the circle says which is first.
    """
    return a != b and (b - a) % _SPACE < _SPACE // 2


def last_sequence(batch: ProducerBatch) -> int:
    return _add(batch.base_sequence, batch.record_count - 1)


@dataclass(slots=True)
class _Partition:
    """One partition's sequence state under its own producer id and epoch."""

    producer_id: int
    epoch: int
    next: int = 0
    # Stamped batches not yet completed or failed, in sequence order.
    pending: list[ProducerBatch] = field(default_factory=list)
    # Last sequence of a failed batch the broker may hold; None when resolved.
    unresolved: int | None = None
    # Whether the broker acknowledged a batch of this id and epoch here: until
    # then it holds no state for us and would take any sequence (see opening()).
    acknowledged: bool = False


class SequenceState:
    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._parts: dict[TopicPartition, _Partition] = {}
        self.bump_reason: str | None = None
        # Partitions waiting for a new producer id before anything more is sent.
        self._rewrite: set[TopicPartition] = set()
        # Partitions still holding batches stamped with an older id or epoch.
        self.stale: set[TopicPartition] = set()
        # Partitions with a failed batch that may have landed, and batches pending.
        self._unresolved: set[TopicPartition] = set()

    def __repr__(self) -> str:
        pending = sum(len(p.pending) for p in self._parts.values())
        bump = f" bump needed: {self.bump_reason}" if self.bump_reason else ""
        return f"<SequenceState pid={self.producer_id} epoch={self.epoch} pending={pending}{bump}>"

    @property
    def ready(self) -> bool:
        """True once a producer id is known: batches may be stamped."""
        return self.producer_id >= 0

    @property
    def bump_needed(self) -> bool:
        return self.bump_reason is not None

    # -- what may be sent ------------------------------------------------------

    def waiting_for_id(self) -> set[TopicPartition]:
        """Partitions that send nothing until the new producer id arrives."""
        return self._rewrite

    def held(self) -> set[TopicPartition]:
        """Partitions where only already stamped batches (retries) may go out.

        New batches wait while the partition's sequence state is unresolved,
        or while it still holds batches stamped with an older id or epoch: a
        new batch would start the new id at 0 and could be written before them.
        """
        return self.stale | self._unresolved

    def is_unresolved(self, tp: TopicPartition) -> bool:
        return tp in self._unresolved

    def opening(self, tp: TopicPartition) -> bool:
        """True while no batch of ``tp`` under its id and epoch has been acknowledged.

        The broker holds no state for us there yet, and Kafka accepts *any*
        sequence from a producer it has none for (``ProducerAppendInfo``: its
        state may have been removed by retention). A second batch in flight
        could then be written before a first one refused for a moment
        (NOT_LEADER_OR_FOLLOWER on a topic just created), and the first could
        only follow it. So the sender keeps one batch in flight here until the
        first acknowledgement: one round trip per partition and producer epoch.
        """
        p = self._parts.get(tp)
        if p is None or not p.acknowledged:
            return True
        # Nothing pending under an older id: the next batch starts a new stream.
        return not p.pending and (p.producer_id, p.epoch) != (self.producer_id, self.epoch)

    # -- stamping ------------------------------------------------------------

    def stamp(self, batch: ProducerBatch) -> None:
        """Give a batch its producer id, epoch and base sequence, once.

        A batch keeps its sequence across retries; only :meth:`reset` gives a
        pending batch a new one. A partition with nothing pending moves to the
        current id (at sequence 0) when its next batch is stamped.
        """
        if batch.base_sequence >= 0:
            return
        tp = (batch.topic, batch.partition)
        p = self._parts.get(tp)
        if p is None or (
            not p.pending and (p.producer_id, p.epoch) != (self.producer_id, self.epoch)
        ):
            p = self._parts[tp] = _Partition(self.producer_id, self.epoch)
        sequence = p.next
        p.next = _add(sequence, batch.record_count)
        batch.stamp(p.producer_id, p.epoch, sequence)
        p.pending.append(batch)

    def is_first_pending(self, batch: ProducerBatch) -> bool:
        """Is this the lowest-sequence unfinished batch of its partition?"""
        p = self._parts.get((batch.topic, batch.partition))
        return p is None or not p.pending or p.pending[0] is batch

    # -- outcomes ------------------------------------------------------------

    def acknowledged(self, batch: ProducerBatch) -> None:
        """The broker holds ``batch``: every sequence before it landed too."""
        p = self._remove(batch)
        if p is not None and (p.producer_id, p.epoch) == (batch.producer_id, batch.producer_epoch):
            p.acknowledged = True
        if p is not None and p.unresolved is not None:
            if sequence_before(p.unresolved, batch.base_sequence):
                p.unresolved = None  # the failed batch was written after all
                self._unresolved.discard((batch.topic, batch.partition))
            else:
                self._check_resolved(batch)

    def failed(self, batch: ProducerBatch, may_have_landed: bool) -> None:
        """A stamped batch failed for good.

        If the broker may hold it, the partition is unresolved until a later
        batch tells; if the broker certainly does not, its sequences are a
        gap no later batch can pass, so the partition needs a new id.
        """
        p = self._remove(batch)
        if p is None:
            return
        tp = (batch.topic, batch.partition)
        if may_have_landed:
            last = last_sequence(batch)
            if p.unresolved is None or sequence_before(p.unresolved, last):
                p.unresolved = last
            self._unresolved.add(tp)
            self._check_resolved(batch)
        else:
            self.request_bump(f"{tp[0]}-{tp[1]}: a batch failed after it was sent", tp)

    def split(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """The parts of a batch refused as too large take over its sequences (KIP-126).

        The broker checked its size before anything else: none of its
        sequences landed, so the parts cover the same range, in order, and the
        batches after it keep theirs.
        """
        p = self._parts.get((batch.topic, batch.partition))
        if p is None or batch not in p.pending:
            return
        index = p.pending.index(batch)
        sequence = batch.base_sequence
        for part in parts:
            part.stamp(batch.producer_id, batch.producer_epoch, sequence)
            sequence = _add(sequence, part.record_count)
        p.pending[index : index + 1] = parts

    def finished(self, batch: ProducerBatch) -> None:
        """Forget a batch without drawing conclusions (a transaction renumbers at abort)."""
        self._remove(batch)

    def _remove(self, batch: ProducerBatch) -> _Partition | None:
        """Take ``batch`` off its partition's pending list; None if it was not there."""
        tp = (batch.topic, batch.partition)
        p = self._parts.get(tp)
        if p is None or batch not in p.pending:
            return None
        p.pending.remove(batch)
        if not p.pending:
            self.stale.discard(tp)
        return p

    def _check_resolved(self, batch: ProducerBatch) -> None:
        tp = (batch.topic, batch.partition)
        p = self._parts.get(tp)
        if p is not None and p.unresolved is not None and not p.pending:
            # No batch after the failed one was acknowledged: whether it landed
            # is unknown, so its next sequence is unsafe either way.
            p.unresolved = None
            self._unresolved.discard(tp)
            self.request_bump(
                f"{tp[0]}-{tp[1]}: a failed batch may or may not have been written", tp
            )

    # -- new producer id or epoch ------------------------------------------------

    def request_bump(self, reason: str, tp: TopicPartition) -> None:
        """Ask for a new producer id or epoch before ``tp`` sends more (KIP-360)."""
        if self.bump_reason is None:
            self.bump_reason = reason
        self._rewrite.add(tp)

    def reset(self, producer_id: int, epoch: int) -> list[ProducerBatch]:
        """Adopt a new producer id/epoch; renumber the broken partitions from 0.

        Without a pending bump (the first id, or a transaction's epoch bump at
        abort) every partition restarts. Otherwise only the partitions named
        by :meth:`request_bump` do, and only if none of their pending batches
        is ``maybe_written``: renumbered, a batch the broker may hold would be
        written again. Those keep their old stamps (the broker deduplicates
        them, or answers OUT_OF_ORDER, which proves them unwritten). Every
        other partition keeps its id until it has nothing pending.

        Returns the batches that were renumbered. The caller guarantees none of
        them is in flight, so no sequence the broker saw is reused.
        """
        rewrite: Iterable[TopicPartition] = (
            list(self._parts) if self.bump_reason is None else self._rewrite
        )
        self.producer_id = producer_id
        self.epoch = epoch
        self.bump_reason = None
        renumbered: list[ProducerBatch] = []
        for tp in list(rewrite):
            p = self._parts.get(tp)
            if p is None or any(b.maybe_written for b in p.pending):
                continue
            fresh = self._parts[tp] = _Partition(producer_id, epoch)
            self._unresolved.discard(tp)
            for batch in p.pending:  # in sequence order
                batch.stamp(producer_id, epoch, fresh.next)
                fresh.next = _add(fresh.next, batch.record_count)
                fresh.pending.append(batch)
                renumbered.append(batch)
        self._rewrite = set()
        self.stale = {
            tp
            for tp, p in self._parts.items()
            if p.pending and (p.producer_id, p.epoch) != (producer_id, epoch)
        }
        return renumbered

    def pending_partitions(self) -> Iterable[TopicPartition]:
        return (tp for tp, p in self._parts.items() if p.pending)


def held_in_order(
    seq: SequenceState,
    retried: Collection[TopicPartition],
    in_flight_by_tp: Mapping[TopicPartition, int],
) -> set[TopicPartition]:
    """The partitions whose next batch must wait for the sake of sequence order.

    ``retried``: partitions whose queue starts with a retried batch;
    ``in_flight_by_tp``: batches in flight per partition.
    """
    # A retried batch is written before any later batch of its partition: hold
    # it back until that partition has nothing in flight.
    held = {tp for tp in retried if in_flight_by_tp.get(tp)}
    # New batches wait where the sequence state is unresolved or older-id
    # batches are pending; retries there keep their stamps.
    unresolved = seq.held()
    if unresolved:
        held.update(unresolved.difference(retried))
    # A partition due for a new id sends nothing until it arrives; every other
    # partition keeps going (KIP-360).
    held.update(seq.waiting_for_id())
    # Until the broker acknowledges a first batch of a partition it takes any
    # sequence there: one batch in flight until then, or a later batch could be
    # written first (SequenceState.opening).
    held.update(tp for tp in in_flight_by_tp if seq.opening(tp))
    return held
