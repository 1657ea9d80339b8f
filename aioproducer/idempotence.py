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

    def __repr__(self) -> str:
        pending = sum(len(v) for v in self._pending.values())
        bump = f" bump needed: {self.bump_reason}" if self.bump_reason else ""
        return f"<SequenceState pid={self.producer_id} epoch={self.epoch} pending={pending}{bump}>"

    @property
    def ready(self) -> bool:
        """True when batches may be stamped and sent."""
        return self.producer_id >= 0 and self.bump_reason is None

    def request_bump(self, reason: str) -> None:
        """Ask for a new epoch before anything more is sent (KIP-360)."""
        if self.bump_reason is None:
            self.bump_reason = reason

    def stamp(self, batch: ProducerBatch) -> None:
        """Give a batch its producer id, epoch and base sequence, once.

        A batch keeps its sequence across retries; only :meth:`reset` gives a
        pending batch a new one. The built payload, if any, is re-stamped.
        """
        if batch.base_sequence >= 0 and batch.producer_id == self.producer_id:
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

    def reset(self, producer_id: int, epoch: int) -> list[ProducerBatch]:
        """Adopt a new producer id/epoch; renumber pending batches from 0.

        Returns the batches that were renumbered. The caller guarantees none of
        them is in flight, so no sequence the broker saw is reused.
        """
        self.producer_id = producer_id
        self.epoch = epoch
        self.bump_reason = None
        renumbered: list[ProducerBatch] = []
        self._next = {}
        for tp, batches in self._pending.items():
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

