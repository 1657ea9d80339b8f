"""A batch of records for one partition: its one state, every change of it, and its records' results.

A :class:`ProducerBatch` moves through :class:`BatchState` (Java's
``ProducerBatch`` lifecycle; every transition is a method of this module)::

    OPEN ──seal──> SEALED ──start_attempt──> IN_FLIGHT ──complete──> DONE
                     ^                           │
                     └──── requeue / answered ───┘      fail / replace_by (any state) ──> DONE

* ``OPEN``: the open tail of its partition's queue; the only state that takes records.
* ``SEALED``: takes no more records (another batch was queued behind it, it was
  drained, expired or taken); waits to be sent, or re-sent after a retriable
  error, or for the sender to decide on an answer.
* ``IN_FLIGHT``: in a Produce request whose answer has not come.
* ``DONE``: decided: completed, failed, or split into parts (KIP-126).

A batch is completed exactly once: :meth:`complete` or :meth:`fail`, after
which further calls are ignored. One that fails while in flight (expired,
aborted) stays ``DONE`` when its answer comes; :meth:`answered` leaves it so.

A record enqueued on its own gets a :class:`~.record_handle.RecordHandle`: a
view on the batch's :class:`~.record_handle.BatchOutcome` (Java's
``FutureRecordMetadata`` on ``ProduceRequestResult``), so that the batch keeps
nothing per record but its bytes, and deciding the batch decides every record
in one step. Records come in through one method per kind: :meth:`try_append`
(``Producer.enqueue``); :meth:`append_unkeyed` and :meth:`append_keyed` for
``enqueue``'s shortcuts (the same in one compiled call, and for an unkeyed
record the sticky partitioner's byte count; the lane then makes the handle);
:meth:`append_moved` for a record of a split batch, whose handle follows it
(:meth:`.record_handle.BatchOutcome.move_to`); and, for records of a bulk call
(``enqueue_many``), which have no handle of their own, :meth:`add_span` /
:meth:`append_run` / :meth:`reserve`: a *span* stands for a run of them and
reports to the call's one future.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._speedups import kernels
from ..protocol.compression import Codec
from ..protocol.records import RecordBatchBuilder, restamp_producer_state
from ..types import RecordMetadata
from .partitioner import time_to_switch
from .record_handle import BatchOutcome

if TYPE_CHECKING:
    from .record_handle import RecordHandlePy

__all__ = [
    "APPENDED",
    "FULL",
    "RECORD_HANDLE_OVERHEAD",
    "REFUSED",
    "SWITCH",
    "BatchCore",
    "BatchCorePy",
    "BatchState",
    "ProducerBatch",
    "RecordMetadata",
    "Span",
    "pack_sizes",
]

# Memory a record enqueued on its own holds besides its encoded bytes until its
# batch completes: its handle (~100 B, more once awaited) and what its caller
# keeps around it. Counted in buffer_memory, so that a stalled broker bounds
# what the process holds, not just the bytes.
RECORD_HANDLE_OVERHEAD = 256
# What append_unkeyed and append_keyed answer: not appended (the batch is not
# open or full); appended; appended, and the sticky partitioner's turn on this
# partition is over (append_unkeyed only). FULL is added to an answer when the
# record left its batch full (is_full()): the lane wakes the sender, which sends
# it now rather than at its linger (Java's batchIsFull, RecordAccumulator.append).
REFUSED, APPENDED, SWITCH, FULL = 0, 1, 2, 4


def pack_sizes(key_size: int, value_size: int) -> int:
    """Pack serialized key/value sizes (-1 for null) into one int."""
    return ((key_size + 1) << 32) | (value_size + 1)


class Span(Protocol):
    """A run of consecutive records of a bulk call inside one batch."""

    delta: int  # offset delta of its first record in the batch
    count: int

    def acked(self, base_offset: int, log_append_time_ms: int) -> None: ...
    def failed(self, exc: BaseException) -> None: ...


class BatchState(enum.Enum):
    """Where a batch is in its life (see the module docstring for the transitions)."""

    OPEN = "open"
    SEALED = "sealed"
    IN_FLIGHT = "in flight"
    DONE = "done"


# Module-level names of the states: the per-record checks compare with ``is``
# and skip the enum class's attribute lookup.
OPEN = BatchState.OPEN
SEALED = BatchState.SEALED
IN_FLIGHT = BatchState.IN_FLIGHT
DONE = BatchState.DONE


class BatchCorePy:
    """The fields of a batch its per-record appends use, and the appends.

    The reference of the compiled ``BatchCore`` (``_speedups/_batch_core.c``),
    whose fields are a C struct's: :class:`ProducerBatch` extends whichever
    is active (:data:`BatchCore`).
    """

    __slots__ = ("batch_size", "builder", "max_record_size", "outcome", "reserved", "state")

    state: BatchState
    builder: Any
    outcome: Any
    reserved: int
    max_record_size: int
    batch_size: int

    def append_unkeyed(
        self,
        timestamp_ms: int,
        value: bytes | None,
        reserve: int,
        bound: int,
        produced: dict[str, int],
        topic: str,
        limit: int,
    ) -> int:
        """Append an unkeyed record without headers; count it for the sticky partitioner.

        What :meth:`try_append` does, but without making the record's handle
        (``reserve`` and ``bound`` as there; the lane makes the handle, as
        ``outcome.handle(record_count - 1, timestamp_ms, sizes)``), then
        ``produced[topic] += bound`` and :func:`.partitioner.time_to_switch` with
        ``limit`` (the partitioner's ``batch_size``). Returns :data:`REFUSED`
        (nothing changed), or :data:`APPENDED` or :data:`SWITCH`, plus
        :data:`FULL` when the batch is full now. ``Producer.enqueue``'s shortcut
        calls it once per record.
        """
        # try_append's steps, spelled out: this runs once per record on the pure path.
        builder = self.builder
        if self.state is not OPEN or builder.append(timestamp_ms, None, value, None) is None:
            return REFUSED
        self.reserved += reserve
        if bound > self.max_record_size:
            self.max_record_size = bound
        count = produced.get(topic, 0) + bound
        produced[topic] = count
        filled = builder.size_in_bytes
        code = APPENDED
        if time_to_switch(count, limit, filled, bound):
            code = SWITCH
        return code + FULL if filled >= self.batch_size else code  # is_full(), the batch being open

    def append_keyed(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        reserve: int,
        bound: int,
    ) -> int:
        """:meth:`try_append` for a record without headers, without making its handle.

        Returns :data:`REFUSED` (nothing changed) or :data:`APPENDED`, plus
        :data:`FULL` when the batch is full now. The keyed shortcut of
        ``Producer.enqueue`` (engine/keyed_lane.py) calls it per record.
        """
        builder = self.builder
        if self.state is not OPEN or builder.append(timestamp_ms, key, value, None) is None:
            return REFUSED
        self.reserved += reserve
        if bound > self.max_record_size:
            self.max_record_size = bound
        return APPENDED + FULL if builder.size_in_bytes >= self.batch_size else APPENDED


# The twin chosen once (the compiled one compares a batch's state with OPEN).
if TYPE_CHECKING:
    BatchCore = BatchCorePy
elif kernels is not None:
    kernels.register_open_state(OPEN)
    BatchCore = kernels.BatchCore
else:
    BatchCore = BatchCorePy


class ProducerBatch(BatchCore):
    """Records of one partition on their way to the broker; state changes only through its methods."""

    __slots__ = (
        "__weakref__",  # the producer's shortcut to a topic's open batch holds it weakly
        "_waiters",
        "attempts",
        "base_sequence",
        "created",
        "deadline",
        "maybe_written",
        "partition",
        "payload",
        "producer_epoch",
        "producer_id",
        "retry_at",
        "spans",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        codec: Codec,
        batch_size: int,
        now: float,
        delivery_timeout: float,
        compression_level: int | None = None,
        is_transactional: bool = False,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.builder = RecordBatchBuilder(
            codec=codec,
            batch_size=batch_size,
            is_transactional=is_transactional,
            compression_level=compression_level,
        )
        self.batch_size = batch_size
        self.state = OPEN
        #: What happened to the batch, read by its records' handles (``loop``:
        #: where their callbacks run; None only for a batch no one awaits).
        self.outcome = BatchOutcome(loop, topic, partition, RecordMetadata)
        self.created = now
        self.deadline = now + delivery_timeout
        self.attempts = 0  # times it went back to its queue to be sent again
        self.retry_at = 0.0
        self.reserved = 0  # bytes of buffer memory this batch holds
        # Largest record appended, as the upper bound enqueue reserved for it
        # (Java's maxRecordSize, reported as record-size-max).
        self.max_record_size = 0
        self.payload: bytes | bytearray | None = None  # the built batch, kept across retries
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.spans: list[Span] | None = None  # bulk records, in append order
        self._waiters: list[asyncio.Future[None]] | None = None
        # An attempt ended without a clear answer: the broker may hold the batch
        # under its current producer id, epoch and sequence.
        self.maybe_written = False

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} "
            f"bytes~{self.builder.size_in_bytes} attempts={self.attempts} {self.state.value}>"
        )

    # -- reading the state ---------------------------------------------------

    @property
    def record_count(self) -> int:
        count: int = self.builder.record_count
        return count

    @property
    def sealed(self) -> bool:
        """It takes no more records."""
        return self.state is not OPEN

    @property
    def in_flight(self) -> bool:
        """In a Produce request whose answer has not come."""
        return self.state is IN_FLIGHT

    @property
    def decided(self) -> bool:
        """:meth:`complete`, :meth:`fail` or :meth:`replace_by` was called."""
        return self.state is DONE

    @property
    def done(self) -> bool:
        """Decided: every record of the batch has its answer (the same as :attr:`decided`)."""
        return self.state is DONE

    def is_full(self) -> bool:
        return self.state is not OPEN or self.builder.size_in_bytes >= self.batch_size

    # -- filling -------------------------------------------------------------

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        sizes: int,
        reserve: int = 0,
        bound: int = 0,
    ) -> RecordHandlePy | None:
        """Append a record if the batch is open and has room: its handle, or None.

        The first record of a batch always fits. ``sizes`` is
        :func:`pack_sizes` of the record's key and value; ``reserve`` the
        buffer memory reserved for it, which the batch now holds; ``bound``
        the upper bound of its encoded size (for record-size-max).
        """
        if self.state is not OPEN:
            return None
        # The handle first (its delta is the record count before the append):
        # once the record is appended, nothing may fail.
        handle: RecordHandlePy = self.outcome.handle(self.builder.record_count, timestamp_ms, sizes)
        if self.builder.append(timestamp_ms, key, value, headers) is None:
            return None
        self.reserved += reserve
        if bound > self.max_record_size:
            self.max_record_size = bound
        return handle

    def append_moved(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
    ) -> bool:
        """Append a record of a split batch (its handle follows it there); False if it has no room."""
        return (
            self.state is OPEN
            and self.builder.append(timestamp_ms, key, value, headers) is not None
        )

    def add_span(self, span: Span) -> None:
        """File a span of bulk records; they follow the records appended so far."""
        if self.spans is None:
            self.spans = []
        self.spans.append(span)

    def append_run(
        self,
        timestamp_ms: int,
        values: Sequence[Any],
        start: int,
        stop: int,
        keys: Sequence[Any] | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        order: Sequence[int] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> int:
        """Encode bulk records as far as they fit (:meth:`RecordBatchBuilder.append_run`).

        Returns how many went in (0 when the batch is not open). They belong to
        the span filed last; the caller counts them there and reserves
        their memory (:meth:`reserve`).
        """
        if self.state is not OPEN:
            return 0
        appended: int = self.builder.append_run(
            timestamp_ms, values, start, stop, keys, headers, order, lengths
        )
        return appended

    def record_appender(self) -> Any:
        """The encoder of one bulk record, ``(timestamp_ms, key, value, headers) -> delta | None``.

        For a loop that appends record by record to this batch while it stays
        open (a bulk slice runs without a pause, so nothing seals it meanwhile).
        """
        assert self.state is OPEN, "only an open batch takes records"
        return self.builder.append

    def reserve(self, nbytes: int) -> None:
        """The batch now holds ``nbytes`` more of buffer memory (bulk records)."""
        self.reserved += nbytes

    def release_reserved(self) -> int:
        """Hand back the buffer memory the batch holds: returns it, holds none after."""
        reserved, self.reserved = self.reserved, 0
        return reserved

    # -- on its way ----------------------------------------------------------

    def seal(self) -> None:
        """Take no more records: another batch is queued behind it, or it leaves its queue."""
        if self.state is OPEN:
            self.state = SEALED

    def start_attempt(self) -> None:
        """It goes out in a Produce request."""
        assert self.state is SEALED, f"{self!r} cannot be sent"
        self.state = IN_FLIGHT

    def answered(self, maybe_written: bool | None = None) -> None:
        """The answer to its request came (or the request failed as a whole).

        ``maybe_written``: True when the broker may hold the batch after this
        attempt, False when it checked this very stamping and refused it
        (KIP-360), None when the answer says neither. A batch that failed
        while in flight stays ``DONE``.
        """
        if maybe_written is not None:
            self.maybe_written = maybe_written
        if self.state is IN_FLIGHT:
            self.state = SEALED

    def requeue(self, now: float, backoff: float) -> None:
        """Back to its queue to be sent again after ``backoff`` seconds (Java's ``reenqueued``)."""
        assert self.state is SEALED, f"{self!r} cannot be retried"
        self.attempts += 1
        self.retry_at = now + backoff

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the idempotent producer state it is sent with; a built batch is rewritten."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        if self.payload is not None:
            self.payload = restamp_producer_state(
                self.payload,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
            )

    def build(self) -> bytes | bytearray:
        """The batch's bytes with its producer state: built (and compressed) once, kept across retries.

        May run in a worker thread: the batch is in flight meanwhile, and
        nothing restamps a batch in flight.
        """
        if self.payload is None:
            self.payload = self.builder.build(
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        return self.payload

    # -- the outcome ---------------------------------------------------------

    def done_waiter(self) -> asyncio.Future[None]:
        """A future resolved when this batch completes or fails (for flush/close)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.state is DONE:
            fut.set_result(None)
        else:
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(fut)
        return fut

    def _wake_waiters(self) -> None:
        self.state = DONE
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                try:
                    fut.set_result(None)
                except RuntimeError:
                    pass  # set; its callbacks needed its loop, closed

    def replace_by(self, parts: Sequence[ProducerBatch]) -> None:
        """This batch was split (KIP-126): its records and buffer memory now
        belong to ``parts`` (sealed: their sequence ranges are fixed), their
        handles follow them there, and whoever waits for it is woken once
        every part is done."""
        for part in parts:
            part.seal()
        # The buffer memory moves with the records, in proportion to their count.
        total = self.record_count
        left = self.reserved
        for part in parts[:-1]:
            part.reserved = self.reserved * part.record_count // total
            left -= part.reserved
        parts[-1].reserved = left
        self.reserved = 0
        starts, first = [], 0
        for part in parts:
            starts.append(first)
            first += part.record_count
        self.outcome.move_to(starts, [part.outcome for part in parts])
        self.state = DONE
        waiters, self._waiters = self._waiters, None
        if not waiters:
            return

        def wake(_: object) -> None:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

        asyncio.gather(*(part.done_waiter() for part in parts)).add_done_callback(wake)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Every record was written from ``base_offset`` on (-1: acks=0); once."""
        if self.state is DONE:
            return
        if self.spans:
            acked = base_offset >= 0
            for span in self.spans:
                span.acked(base_offset + span.delta if acked else -1, log_append_time_ms)
        self.outcome.complete(base_offset, log_append_time_ms)
        self._wake_waiters()

    def fail(self, exc: BaseException) -> None:
        """Every record failed with ``exc`` (once), whatever state the batch is in."""
        if self.state is DONE:
            return
        self.state = DONE  # before the spans' calls: nothing decides it twice
        for span in self.spans or ():
            span.failed(exc)
        self.outcome.fail(exc)
        self._wake_waiters()

    def fail_abandoned(self, exc: BaseException) -> None:
        """:meth:`fail` for a batch whose event loop is closed: every span told once.

        A span's call may raise RuntimeError once its future is set, when it
        has callbacks to schedule on the closed loop; each span is told on its
        own and the error passed over, so a bulk call counts each of its
        records down once. The handles' outcome passes over a closed loop itself.
        """
        if self.state is DONE:
            return
        self.state = DONE
        for span in self.spans or ():
            try:
                span.failed(exc)
            except RuntimeError:
                pass  # the call's future is set; its callbacks needed the closed loop
        self.outcome.fail(exc)
        self._wake_waiters()
