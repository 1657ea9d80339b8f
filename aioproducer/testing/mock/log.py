"""Partition logs of the mock cluster, with the broker's idempotent-producer checks.

A :class:`PartitionLog` assigns offsets and keeps what was written; its
:meth:`PartitionLog.append` applies the checks a Kafka partition leader makes
on a batch from an idempotent or transactional producer (KIP-98), modelled on
``ProducerStateManager`` / ``ProducerAppendInfo``:

* per producer id the epoch and the metadata (first sequence, last sequence,
  base offset) of its last :data:`DEDUP_WINDOW` batches are kept;
* a batch whose sequence range equals one of those is a retry of a batch
  already written: it is answered with the original base offset and error
  NONE, as Kafka does since 1.0 (older brokers answered
  DUPLICATE_SEQUENCE_NUMBER; ``MockCluster.duplicate_error_code`` selects that);
* a producer with no state yet on the partition may start at any sequence
  (as Kafka, since retention may have removed its state); otherwise a batch
  that does not continue the last sequence is OUT_OF_ORDER_SEQUENCE_NUMBER;
* a lower epoch than the one seen is INVALID_PRODUCER_EPOCH (Kafka 2.7+
  answers this, not PRODUCER_FENCED, on Produce: KIP-588), and a new epoch
  must start at sequence 0.

Transaction markers take one offset each, as Kafka's control batches do, but
are not records: :meth:`PartitionLog.records` skips them.
"""

from __future__ import annotations

import collections
import dataclasses
import enum

from ... import errors
from ...protocol.record_parsing import RecordBatch

__all__ = [
    "DEDUP_WINDOW",
    "BatchState",
    "MockRecord",
    "PartitionLog",
    "StoredBatch",
    "code_of",
]

# Kafka keeps the last 5 batches per producer (ProducerStateEntry
# NUM_BATCHES_TO_RETAIN), which is why an idempotent producer may have at most
# 5 requests in flight per connection (KAFKA-5494).
DEDUP_WINDOW = 5
_INT32_MAX = (1 << 31) - 1


def code_of(error: type[errors.KafkaError]) -> int:
    """The protocol error code of a broker error class."""
    code = error.code
    assert code is not None, error
    return code


NONE = 0
OUT_OF_ORDER = code_of(errors.OutOfOrderSequenceNumberError)
INVALID_EPOCH = code_of(errors.InvalidProducerEpochError)


@dataclasses.dataclass(frozen=True, slots=True)
class MockRecord:
    """One record as the mock cluster stored it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int
    producer_id: int
    producer_epoch: int
    sequence: int  # -1 for a producer without idempotence
    transactional: bool


class BatchState(enum.Enum):
    """Visibility of a stored batch: a transactional one is OPEN until its marker."""

    COMMITTED = "committed"
    OPEN = "open"
    ABORTED = "aborted"


@dataclasses.dataclass(slots=True)
class StoredBatch:
    """A batch as appended: its offsets, producer fields and records."""

    batch: RecordBatch
    base_offset: int
    state: BatchState

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.batch.last_offset_delta

    def __repr__(self) -> str:
        b = self.batch
        return (
            f"StoredBatch(offsets={self.base_offset}..{self.last_offset}, pid={b.producer_id}, "
            f"epoch={b.producer_epoch}, seq={b.base_sequence}, {self.state.value})"
        )


@dataclasses.dataclass(slots=True)
class _ProducerEntry:
    """What a partition remembers of one producer id."""

    epoch: int
    # (first sequence, last sequence, base offset) of the newest batches.
    batches: collections.deque[tuple[int, int, int]] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=DEDUP_WINDOW)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


def _add_seq(seq: int, delta: int) -> int:
    # Sequences wrap from INT32_MAX to 0 (DefaultRecordBatch.incrementSequence).
    return (seq + delta) % (_INT32_MAX + 1)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class PartitionLog:
    """The log of one partition: stored batches, offsets and producer state."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self.batches: list[StoredBatch] = []
        self._producers: dict[int, _ProducerEntry] = {}
        # Open transactional batches per producer id, until a marker ends them.
        self._open: dict[int, list[StoredBatch]] = {}

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, next_offset={self.next_offset}, "
            f"batches={len(self.batches)}, producers={len(self._producers)})"
        )

    def check(self, batch: RecordBatch, issued_epoch: int | None) -> tuple[int, int]:
        """Validate ``batch``'s producer state: (error code, duplicate's base offset or -1).

        ``issued_epoch`` is the epoch the cluster last issued for the batch's
        producer id, or None when the cluster never issued that id.
        """
        pid = batch.producer_id
        if pid < 0:
            return NONE, -1
        epoch = batch.producer_epoch
        first = batch.base_sequence
        last = _add_seq(first, batch.last_offset_delta)
        entry = self._producers.get(pid)
        if issued_epoch is not None and epoch < issued_epoch and batch.is_transactional:
            return INVALID_EPOCH, -1
        if entry is None:
            # As Kafka (ProducerAppendInfo.checkSequence, since 2.5): a producer
            # the partition holds no state for may start at any sequence, since
            # retention may have removed that state. So a later batch that
            # overtakes a first one refused for a moment is written; a client
            # must not let it overtake.
            return NONE, -1
        if epoch < entry.epoch:
            return INVALID_EPOCH, -1
        if epoch > entry.epoch:
            # A bumped epoch (InitProducerId, or KIP-360's client-side bump)
            # restarts the sequence.
            return (NONE if first == 0 else OUT_OF_ORDER), -1
        for cached_first, cached_last, base_offset in entry.batches:
            if cached_first == first and cached_last == last:
                return NONE, base_offset
        if not _in_sequence(entry.last_seq, first):
            return OUT_OF_ORDER, -1
        return NONE, -1

    def append(self, batch: RecordBatch, *, transactional_open: bool = False) -> int:
        """Write ``batch`` (already checked) and return its base offset."""
        base = self.next_offset
        state = BatchState.OPEN if transactional_open else BatchState.COMMITTED
        stored = StoredBatch(batch, base, state)
        self.batches.append(stored)
        self.next_offset = base + batch.last_offset_delta + 1
        pid = batch.producer_id
        if pid >= 0:
            entry = self._producers.get(pid)
            if entry is None or entry.epoch != batch.producer_epoch:
                entry = self._producers[pid] = _ProducerEntry(batch.producer_epoch)
            last = _add_seq(batch.base_sequence, batch.last_offset_delta)
            entry.batches.append((batch.base_sequence, last, base))
            if transactional_open:
                self._open.setdefault(pid, []).append(stored)
        return base

    def seed_producer(self, producer_id: int, epoch: int, last_sequence: int) -> None:
        """Remember ``producer_id`` as if its last batch here ended at ``last_sequence``.

        Lets a test start a producer near the sequence wrap (2**31-1) without
        writing two billion records first.
        """
        entry = self._producers[producer_id] = _ProducerEntry(epoch)
        entry.batches.append((last_sequence, last_sequence, self.next_offset))

    def write_marker(self, producer_id: int, commit: bool) -> None:
        """End ``producer_id``'s transaction here: its open batches become visible or hidden."""
        pending = self._open.pop(producer_id, [])
        for stored in pending:
            stored.state = BatchState.COMMITTED if commit else BatchState.ABORTED
        self.next_offset += 1  # the control batch occupies one offset

    def has_open(self, producer_id: int) -> bool:
        return bool(self._open.get(producer_id))

    def records(self, *, include_uncommitted: bool = False) -> list[MockRecord]:
        """The records in offset order; by default without open or aborted transactions."""
        out: list[MockRecord] = []
        for stored in self.batches:
            if stored.state is not BatchState.COMMITTED and not include_uncommitted:
                continue
            b = stored.batch
            delta_base = stored.base_offset
            for rec in b.records:
                # The parsed records carry offsets relative to the client's base (0).
                offset_delta = rec.offset - b.base_offset
                seq = -1 if b.base_sequence < 0 else _add_seq(b.base_sequence, offset_delta)
                out.append(
                    MockRecord(
                        topic=self.topic,
                        partition=self.partition,
                        offset=delta_base + offset_delta,
                        key=rec.key,
                        value=rec.value,
                        headers=list(rec.headers),
                        timestamp_ms=rec.timestamp_ms,
                        producer_id=b.producer_id,
                        producer_epoch=b.producer_epoch,
                        sequence=seq,
                        transactional=b.is_transactional,
                    )
                )
        return out
