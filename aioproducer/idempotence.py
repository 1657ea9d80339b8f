"""Producer id, epoch and per-partition sequence numbers of an idempotent producer.

The broker keeps, per (producer id, partition), the sequence numbers of the last
five batches it wrote; a batch whose sequence it has already written is answered
DUPLICATE_SEQUENCE_NUMBER and not written again, one that skips a number is
refused with OUT_OF_ORDER_SEQUENCE_NUMBER (KIP-98). So a batch keeps the
sequence it was given at its first send across every retry, and batches of a
partition carry consecutive sequences.

:class:`SequenceState` is the bookkeeping, pure and loop-free: the sender asks it
to stamp batches, tells it when batches are done, and when the state can no
longer be trusted (a batch expired after it may have been written, the broker
lost the producer, an out-of-order answer for the first pending batch) it
records that a new epoch is needed (KIP-360). Once the sender has a new id or
epoch, :meth:`SequenceState.reset` renumbers every pending batch from 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from .batch import ProducerBatch
from .protocol.records import restamp_producer_state

__all__ = ["MAX_SEQUENCE", "SequenceState"]

TopicPartition = tuple[str, int]
MAX_SEQUENCE = (1 << 31) - 1  # sequences wrap to 0 after Int32.MAX_VALUE


def _add(sequence: int, count: int) -> int:
    return (sequence + count) % (MAX_SEQUENCE + 1)


class SequenceState:
    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._next: dict[TopicPartition, int] = {}
        # Stamped batches not yet completed or failed, per partition, in sequence order.
        self._pending: dict[TopicPartition, list[ProducerBatch]] = {}
        self.bump_reason: str | None = None
        # Partitions whose sequences restart at the next reset; None: all of them.
        self._rewrite: set[TopicPartition] | None = None
        # Partitions still holding batches sent before the last reset, under the
        # old id/epoch: new batches there wait until those are done.
        self.stale: set[TopicPartition] = set()

    def __repr__(self) -> str:
        pending = sum(len(v) for v in self._pending.values())
        bump = f" bump needed: {self.bump_reason}" if self.bump_reason else ""
        return f"<SequenceState pid={self.producer_id} epoch={self.epoch} pending={pending}{bump}>"

    @property
    def ready(self) -> bool:
        """True when batches may be stamped and sent."""
        return self.producer_id >= 0 and self.bump_reason is None

    def request_bump(self, reason: str, tp: TopicPartition | None = None) -> None:
        """Ask for a new epoch before anything more is sent (KIP-360).

        ``tp`` is the partition whose sequence state broke; only such
        partitions are renumbered at the reset (None: every partition).
        """
        if self.bump_reason is None:
            self.bump_reason = reason
        if tp is None:
            self._rewrite = None
        elif self._rewrite is not None:
            self._rewrite.add(tp)

    def stamp(self, batch: ProducerBatch) -> None:
        """Give a batch its producer id, epoch and base sequence, once.

        A batch keeps its sequence across retries; only :meth:`reset` gives a
        pending batch a new one. The built payload, if any, is re-stamped.
        """
        if batch.base_sequence >= 0:
            return
        tp = (batch.topic, batch.partition)
        sequence = self._next.get(tp, 0)
        self._next[tp] = _add(sequence, batch.record_count)
        self._assign(batch, sequence)
        self._pending.setdefault(tp, []).append(batch)

    def _assign(self, batch: ProducerBatch, sequence: int) -> None:
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.epoch
        batch.base_sequence = sequence
        if batch.payload is not None:
            batch.payload = restamp_producer_state(
                batch.payload,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                base_sequence=sequence,
            )

    def is_first_pending(self, batch: ProducerBatch) -> bool:
        """Is this the lowest-sequence unfinished batch of its partition?"""
        pending = self._pending.get((batch.topic, batch.partition))
        return not pending or pending[0] is batch

    def finished(self, batch: ProducerBatch) -> None:
        """Forget a batch that completed or failed."""
        pending = self._pending.get((batch.topic, batch.partition))
        if pending:
            try:
                pending.remove(batch)
            except ValueError:
                pass
        if not pending:
            self.stale.discard((batch.topic, batch.partition))

    def reset(self, producer_id: int, epoch: int) -> list[ProducerBatch]:
        """Adopt a new producer id/epoch; renumber pending batches from 0.

        Only the partitions named by :meth:`request_bump` are renumbered (all
        of them after a reset nobody asked for, or a bump without a
        partition), and only if none of their pending batches is
        ``maybe_written``. Elsewhere a pending batch may already be written
        under the old epoch, its response lost: renumbered, it would be
        written again.
        Those keep their old id, epoch and sequence (the broker still
        deduplicates them), and the partition is :attr:`stale` until they are
        done; then its new batches start the new epoch at 0 (as Java's
        producer does, KIP-360).

        Returns the batches that were renumbered. The caller guarantees none of
        them is in flight, so no sequence the broker saw is reused.
        """
        rewrite = None if self.bump_reason is None else self._rewrite
        self.producer_id = producer_id
        self.epoch = epoch
        self.bump_reason = None
        self._rewrite = set()
        renumbered: list[ProducerBatch] = []
        self._next = {}
        for tp, batches in self._pending.items():
            if (rewrite is not None and tp not in rewrite) or any(
                b.maybe_written for b in batches
            ):
                # Renumbered, a batch the broker may already hold would be
                # written again: keep the old stamps; the broker deduplicates
                # them, or answers OUT_OF_ORDER, which proves them unwritten.
                if batches:
                    self.stale.add(tp)
                continue
            self.stale.discard(tp)
            batches.sort(key=lambda b: b.base_sequence)
            sequence = 0
            for batch in batches:
                self._assign(batch, sequence)
                sequence = _add(sequence, batch.record_count)
                renumbered.append(batch)
            if batches:
                self._next[tp] = sequence
        return renumbered

    def pending_partitions(self) -> Iterable[TopicPartition]:
        return (tp for tp, batches in self._pending.items() if batches)

