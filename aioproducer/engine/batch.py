"""A batch of records for one partition: its one state, every change of it, and its records' results.

A :class:`ProducerBatch` moves through :class:`BatchState` (Java's
``ProducerBatch`` lifecycle; every transition is a method of this module)::

    OPEN ──seal──> SEALED ──start_attempt──> IN_FLIGHT ──complete──> RESOLVING ──> DONE
                     ^                           │
                     └──── requeue / answered ───┘      fail / replace_by (any state) ──> DONE

* ``OPEN``: the open tail of its partition's queue; the only state that takes records.
* ``SEALED``: takes no more records (another batch was queued behind it, it was
  drained, expired or taken); waits to be sent, or re-sent after a retriable
  error, or for the sender to decide on an answer.
* ``IN_FLIGHT``: in a Produce request whose answer has not come.
* ``RESOLVING``: acknowledged; its futures are being resolved in slices.
* ``DONE``: every future resolved: completed, failed, or split into parts (KIP-126).

A batch is completed exactly once: :meth:`complete` or :meth:`fail`, after
which further calls are ignored. One that fails while in flight (expired,
aborted) stays ``DONE`` when its answer comes; :meth:`answered` leaves it so.

Records come in through one method per kind: :meth:`try_append` for a record
with a future of its own (``Producer.enqueue``, a split); :meth:`append_unkeyed`
for one of ``enqueue``'s unkeyed shortcut (the same, and the sticky
partitioner's byte count, in one compiled call); and, for records of a bulk
call (``enqueue_many``), which have no future of their own, :meth:`add_span` /
:meth:`append_run` / :meth:`reserve`: a *span* stands for a run of them and
reports to the call's one future.

A large batch resolves its futures in slices of :data:`RESOLVE_SLICE`, one
event-loop callback each, so other tasks run in between; it is ``DONE`` (and
``flush`` returns) only after the last slice. The batch lets go of each
slice's futures once resolved, so that those their callers dropped die then.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
from collections.abc import Sequence
from time import time_ns
from typing import Any, NamedTuple, Protocol

from .._speedups import kernels
from ..protocol.compression import Codec
from ..protocol.records import RecordBatchBuilder, restamp_producer_state
from .resolve import future_deltas, resolve_pure
from .sticky import time_to_switch

__all__ = [
    "APPENDED",
    "FULL",
    "RECORD_HANDLE_OVERHEAD",
    "REFUSED",
    "RESOLVE_SLICE",
    "SWITCH",
    "BatchState",
    "ProducerBatch",
    "RecordMetadata",
    "Span",
    "pack_sizes",
]

# Futures resolved per event-loop callback when a batch completes: about a
# quarter of a millisecond of work, so a 10,000-record batch never holds the loop.
RESOLVE_SLICE = 512
# Memory a record enqueued on its own holds besides its encoded bytes until its
# batch completes: its future (~160 B with the GC header), the packed sizes and
# the timestamp ints (2 x 32 B) and three list slots. Counted in buffer_memory,
# so that a stalled broker bounds what the process holds, not just the bytes.
RECORD_HANDLE_OVERHEAD = 256
_NO_FUTURES = (None,) * RESOLVE_SLICE
# What append_unkeyed and append_keyed answer: not appended (the batch is not
# open or full); appended; appended, and the sticky partitioner's turn on this
# partition is over (append_unkeyed only). FULL is added to an answer when the
# record left its batch full (is_full()): the lane wakes the sender, which sends
# it now rather than at its linger (Java's batchIsFull, RecordAccumulator.append).
REFUSED, APPENDED, SWITCH, FULL = 0, 1, 2, 4
# The C twin of _resolve_from's set_result loop (see aioproducer._speedups), or None.
_resolve_futures = kernels.resolve_futures if kernels is not None else None
# What set_result may raise for a future left done, which the resolution passes:
# its caller cancelled it, or (finish_resolving) its loop is closed and it had
# callbacks to schedule. The record is written either way.
_SKIPPED = (asyncio.InvalidStateError, RuntimeError)


def pack_sizes(key_size: int, value_size: int) -> int:
    """Pack serialized key/value sizes (-1 for null) into one int."""
    return ((key_size + 1) << 32) | (value_size + 1)


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 when acks=0 (the broker never says)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int


class Span(Protocol):
    """A run of consecutive records of a bulk call inside one batch."""

    delta: int  # offset delta of its first record in the batch
    futures_before: int  # per-record futures appended to the batch before it
    count: int

    def acked(self, base_offset: int, log_append_time_ms: int) -> None: ...
    def failed(self, exc: BaseException) -> None: ...


class BatchState(enum.Enum):
    """Where a batch is in its life (see the module docstring for the transitions)."""

    OPEN = "open"
    SEALED = "sealed"
    IN_FLIGHT = "in flight"
    RESOLVING = "resolving"
    DONE = "done"


# Module-level names of the states: the per-record checks compare with ``is``
# and skip the enum class's attribute lookup.
OPEN = BatchState.OPEN
SEALED = BatchState.SEALED
IN_FLIGHT = BatchState.IN_FLIGHT
RESOLVING = BatchState.RESOLVING
DONE = BatchState.DONE


class ProducerBatch:
    """Records of one partition on their way to the broker; state changes only through its methods."""

    __slots__ = (
        "__weakref__",  # the producer's shortcut to a topic's open batch holds it weakly
        "_on_done",
        "_resolving",
        "_waiters",
        "attempts",
        "base_sequence",
        "batch_size",
        "builder",
        "created",
        "deadline",
        "futures",
        "max_record_size",
        "maybe_written",
        "partition",
        "payload",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at",
        "sizes",
        "spans",
        "state",
        "timestamps",
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
        self.futures: list[Any] = []
        # Per record: serialized key and value sizes packed into one int (see
        # pack_sizes; an int is cheaper to keep than a tuple), and the timestamp.
        self.sizes: list[int] = []
        self.timestamps: list[int] = []
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
        self._on_done: list[Any] | None = None
        # complete()'s (base_offset, log_append_time_ms, deltas) while its slices run.
        self._resolving: tuple[int, int, list[int] | None] | None = None
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
        return self.builder.record_count

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
        return self.state is RESOLVING or self.state is DONE

    @property
    def done(self) -> bool:
        """Decided, and every future of the batch is resolved."""
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
        future: Any,
        sizes: int,
        reserve: int = 0,
        bound: int = 0,
    ) -> bool:
        """Append a record with its future if the batch is open and has room.

        The first record of a batch always fits. ``sizes`` is
        :func:`pack_sizes` of the record's key and value; ``reserve`` the
        buffer memory reserved for it, which the batch now holds; ``bound``
        the upper bound of its encoded size (for record-size-max).
        """
        if self.state is not OPEN or self.builder.append(timestamp_ms, key, value, headers) is None:
            return False
        self.futures.append(future)
        self.sizes.append(sizes)
        self.timestamps.append(timestamp_ms)
        self.reserved += reserve
        if bound > self.max_record_size:
            self.max_record_size = bound
        return True

    def _append_unkeyed_pure(
        self,
        timestamp_ms: int | None,
        value: bytes | None,
        future: Any,
        reserve: int,
        bound: int,
        produced: dict[str, int],
        topic: str,
        limit: int,
    ) -> int:
        """Append an unkeyed record without headers with its future; count it for the sticky partitioner.

        What :meth:`try_append` does (``reserve`` and ``bound`` as there; ``timestamp_ms``
        None stamps it now, as ``time.time_ns() // 1_000_000``), then
        ``produced[topic] += bound`` and :func:`.sticky.time_to_switch` with
        ``limit`` (the partitioner's ``batch_size``). Returns :data:`REFUSED`
        (nothing changed), or :data:`APPENDED` or :data:`SWITCH`, plus
        :data:`FULL` when the batch is full now. The reference of the compiled
        :meth:`append_unkeyed`, which ``Producer.enqueue``'s shortcut calls once
        per record.
        """
        if timestamp_ms is None:
            timestamp_ms = time_ns() // 1_000_000
        # try_append's steps, spelled out: this runs once per record on the pure path.
        if self.state is not OPEN or self.builder.append(timestamp_ms, None, value, None) is None:
            return REFUSED
        self.futures.append(future)
        self.sizes.append(0 if value is None else len(value) + 1)  # pack_sizes(-1, len(value))
        self.timestamps.append(timestamp_ms)
        self.reserved += reserve
        if bound > self.max_record_size:
            self.max_record_size = bound
        count = produced.get(topic, 0) + bound
        produced[topic] = count
        filled = self.builder.size_in_bytes
        code = APPENDED
        if count >= limit and time_to_switch(count, limit, filled, bound):
            code = SWITCH  # (the first test, repeated, spares most records a call)
        return code + FULL if filled >= self.batch_size else code  # is_full(), the batch being open

    append_unkeyed = _append_unkeyed_pure  # the C kernel's method once bound (below the class)

    def _append_keyed_pure(
        self,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        future: Any,
        reserve: int,
        bound: int,
    ) -> int:
        """:meth:`try_append` for a record without headers, its sizes packed here.

        ``timestamp_ms`` None stamps it now (``time.time_ns() // 1_000_000``).
        Returns :data:`REFUSED` (nothing changed) or :data:`APPENDED`, plus
        :data:`FULL` when the batch is full now. The reference of the compiled
        :meth:`append_keyed`, which the keyed shortcut of ``Producer.enqueue``
        (engine/keyed_lane.py) calls per record.
        """
        if timestamp_ms is None:
            timestamp_ms = time_ns() // 1_000_000
        sizes = pack_sizes(-1 if key is None else len(key), -1 if value is None else len(value))
        if not self.try_append(timestamp_ms, key, value, None, future, sizes, reserve, bound):
            return REFUSED
        return APPENDED + FULL if self.builder.size_in_bytes >= self.batch_size else APPENDED

    append_keyed = _append_keyed_pure  # the C kernel's method once bound (below the class)

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
        return self.builder.append_run(timestamp_ms, values, start, stop, keys, headers, order, lengths)

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
                self.payload, producer_id=producer_id, producer_epoch=producer_epoch,
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

    def when_done(self, callback: Any) -> None:
        """Call ``callback(self)`` once every future of the batch is resolved."""
        if self.state is DONE:
            callback(self)
        else:
            if self._on_done is None:
                self._on_done = []
            self._on_done.append(callback)

    def _wake_waiters(self) -> None:
        self.state = DONE
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                try:
                    fut.set_result(None)
                except RuntimeError:
                    pass  # set; its callbacks needed its loop, closed (see finish_resolving)
        callbacks, self._on_done = self._on_done, None
        for callback in callbacks or ():
            callback(self)

    def replace_by(self, parts: Sequence[ProducerBatch]) -> None:
        """This batch was split (KIP-126): its records, futures and buffer memory
        now belong to ``parts`` (sealed: their sequence ranges are fixed), and
        whoever waits for it is woken once every part is done."""
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
        """Resolve every record's future with its metadata (once), in slices."""
        if self.state is RESOLVING or self.state is DONE:
            return
        self.state = RESOLVING
        deltas = None
        if self.spans:
            acked = base_offset >= 0
            for span in self.spans:
                span.acked(base_offset + span.delta if acked else -1, log_append_time_ms)
            if self.futures:
                deltas = future_deltas(len(self.futures), self.spans)
        self._resolving = (base_offset, log_append_time_ms, deltas)
        self._resolve_from(0, base_offset, log_append_time_ms, deltas)

    def _resolve_slice(
        self, start: int, stop: int, base_offset: int, log_append_time_ms: int, deltas: list[int] | None
    ) -> None:
        """Resolve the futures of records ``start`` to ``stop``: the C kernel, or its pure twin."""
        (_resolve_futures or resolve_pure)(
            self.futures, start, stop, RecordMetadata, self.topic, self.partition, base_offset,
            deltas, log_append_time_ms, self.timestamps, self.sizes, _SKIPPED,
        )

    def _resolve_from(
        self, start: int, base_offset: int, log_append_time_ms: int, deltas: list[int] | None
    ) -> None:
        if self.state is not RESOLVING:
            return  # finish_resolving() resolved the rest; this slice's call came late
        futures = self.futures
        stop = min(start + RESOLVE_SLICE, len(futures))
        self._resolve_slice(start, stop, base_offset, log_append_time_ms, deltas)
        # Let go of the futures just resolved: one its caller no longer holds
        # dies now, while the producer allocates new ones, not with the whole
        # batch. Deaths offset allocations in the cyclic collector's count, so
        # it runs less often, and full collections (which walk every object of
        # the process) with it.
        futures[start:stop] = _NO_FUTURES if stop - start == RESOLVE_SLICE else _NO_FUTURES[: stop - start]
        if stop < len(futures):
            asyncio.get_running_loop().call_soon(
                self._resolve_from, stop, base_offset, log_append_time_ms, deltas
            )
        else:
            self._resolving = None
            self._wake_waiters()

    def finish_resolving(self) -> bool:
        """Resolve every slice still to come at once; whether the batch was resolving.

        For a batch whose loop stopped between its slices and will not run
        them (``close()`` from another loop once the producer's loop is
        closed): its records were written, so their futures get their metadata.
        """
        resolving = self._resolving
        if self.state is not RESOLVING or resolving is None:
            return False  # not acknowledged (fail() passes through RESOLVING without it)
        futures = self.futures
        first = 0
        while first < len(futures) and futures[first] is None:  # the slices already resolved
            first += RESOLVE_SLICE
        self._resolve_slice(first, len(futures), *resolving)
        futures[first:] = itertools.repeat(None, len(futures) - first)
        self._resolving = None
        self._wake_waiters()
        return True

    def fail(self, exc: BaseException) -> None:
        """Fail every record's future with ``exc`` (once), whatever state it is in."""
        if self.state is RESOLVING or self.state is DONE:
            return
        self.state = RESOLVING  # for the moment it takes to fail every future
        for span in self.spans or ():
            span.failed(exc)
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(exc)
        self._wake_waiters()

    def fail_abandoned(self, exc: BaseException) -> None:
        """:meth:`fail` for a batch whose event loop is closed: every future and span told once.

        Setting a future whose loop is closed raises RuntimeError once its
        state is set, when it has callbacks to schedule; ``fail`` would stop
        at the first one. Here each is told on its own and the error passed
        over (it is failed all the same), so a bulk call counts each of its
        records down once.
        """
        if self.state is RESOLVING or self.state is DONE:
            return
        self.state = RESOLVING
        for span in self.spans or ():
            try:
                span.failed(exc)
            except RuntimeError:
                pass  # the call's future is set; its callbacks needed the closed loop
        for fut in self.futures:
            if fut is not None and not fut.done():  # None: a slot already resolved
                try:
                    fut.set_exception(exc)
                except RuntimeError:
                    pass  # failed all the same; its callbacks needed the closed loop
        self._wake_waiters()


if kernels is not None:
    # The compiled append_unkeyed and append_keyed, methods of this class reaching
    # its slots directly, and its compiled builder through its C-level surface
    # (see aioproducer/_speedups/_append.c).
    ProducerBatch.append_unkeyed, ProducerBatch.append_keyed = (  # type: ignore[method-assign]
        kernels.bind_batch_layout(ProducerBatch, OPEN)
    )
