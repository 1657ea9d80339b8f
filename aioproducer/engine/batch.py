"""A batch of records for one partition, and what the user gets back for each record.

A :class:`ProducerBatch` is filled by the accumulator and sealed (it takes no
more records) once it leaves its queue or another batch is queued behind it,
so an unsealed batch is always the open tail of its partition's queue. It is
possibly sent several times (retries keep its bytes), and completed exactly
once: :meth:`complete` or :meth:`fail`, after which further calls are ignored.
The futures it resolves are the ones ``Producer.enqueue`` handed out; records
of a bulk call (``enqueue_many``) have no future of their own: a *span* stands
for a run of them and reports to the call's one future.

A large batch resolves its futures in slices of :data:`RESOLVE_SLICE`, one
event-loop callback each, so other tasks run in between; ``done`` turns true
(and ``flush`` returns) only after the last slice. The batch lets go of each
slice's futures once resolved, so that those their callers dropped die then.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from .._speedups import kernels
from ..protocol.compression import Codec
from ..protocol.records import RecordBatchBuilder

__all__ = ["RECORD_HANDLE_OVERHEAD", "RESOLVE_SLICE", "ProducerBatch", "RecordMetadata", "Span", "pack_sizes"]

# Futures resolved per event-loop callback when a batch completes: about a
# quarter of a millisecond of work, so a 10,000-record batch never holds the loop.
RESOLVE_SLICE = 512
# Memory a record enqueued on its own holds besides its encoded bytes until its
# batch completes: its future (~160 B with the GC header), the packed sizes and
# the timestamp ints (2 x 32 B) and three list slots. Counted in buffer_memory,
# so that a stalled broker bounds what the process holds, not just the bytes.
RECORD_HANDLE_OVERHEAD = 256
_NO_FUTURES = (None,) * RESOLVE_SLICE
# The C twin of _resolve_from's set_result loop (see aioproducer._speedups), or None.
_resolve_futures = kernels.resolve_futures if kernels is not None else None


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


class ProducerBatch:
    __slots__ = (
        "__weakref__",  # the producer's shortcut to a topic's open batch holds it weakly
        "_on_done",
        "_waiters",
        "attempts",
        "base_sequence",
        "batch_size",
        "builder",
        "created",
        "deadline",
        "decided",
        "done",
        "futures",
        "in_flight",
        "max_record_size",
        "maybe_written",
        "partition",
        "payload",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at",
        "sealed",
        "sizes",
        "spans",
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
        self.futures: list[Any] = []
        # Per record: serialized key and value sizes packed into one int (see
        # pack_sizes; an int is cheaper to keep than a tuple), and the timestamp.
        self.sizes: list[int] = []
        self.timestamps: list[int] = []
        self.created = now
        self.deadline = now + delivery_timeout
        self.attempts = 0
        self.retry_at = 0.0
        self.reserved = 0  # bytes of buffer memory this batch holds
        # Largest record appended, as the upper bound enqueue reserved for it
        # (Java's maxRecordSize, reported as record-size-max).
        self.max_record_size = 0
        self.payload: bytes | None = None  # the built batch, kept across retries
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.decided = False  # complete() or fail() was called
        self.done = False  # ... and every future of the batch is resolved
        self.spans: list[Span] | None = None  # bulk records, in append order
        self._on_done: list[Any] | None = None
        self.in_flight = False
        self.sealed = False
        self._waiters: list[asyncio.Future[None]] | None = None
        # An attempt ended without a clear answer: the broker may hold the batch
        # under its current producer id, epoch and sequence.
        self.maybe_written = False

    def __repr__(self) -> str:
        state = "done" if self.done else "in flight" if self.in_flight else "queued"
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} "
            f"bytes~{self.builder.size_in_bytes} attempts={self.attempts} {state}>"
        )

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        future: Any,
        sizes: int,
    ) -> bool:
        """Append a record if it fits; the first record of a batch always fits.

        ``sizes`` is :func:`pack_sizes` of the record's key and value.
        """
        if self.sealed or self.builder.append(timestamp_ms, key, value, headers) is None:
            return False
        self.futures.append(future)
        self.sizes.append(sizes)
        self.timestamps.append(timestamp_ms)
        return True

    def is_full(self) -> bool:
        return self.sealed or self.builder.size_in_bytes >= self.batch_size

    def done_waiter(self) -> asyncio.Future[None]:
        """A future resolved when this batch completes or fails (for flush/close)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.done:
            fut.set_result(None)
        else:
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(fut)
        return fut

    def when_done(self, callback: Any) -> None:
        """Call ``callback(self)`` once every future of the batch is resolved."""
        if self.done:
            callback(self)
        else:
            if self._on_done is None:
                self._on_done = []
            self._on_done.append(callback)

    def _wake_waiters(self) -> None:
        self.done = True
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)
        callbacks, self._on_done = self._on_done, None
        for callback in callbacks or ():
            callback(self)

    def replace_by(self, parts: Sequence[ProducerBatch]) -> None:
        """This batch was split (KIP-126): its records and futures now belong to
        ``parts``, and whoever waits for it is woken once every part is done."""
        self.decided = self.done = True
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
        if self.decided:
            return
        self.decided = True
        deltas = None
        if self.spans:
            acked = base_offset >= 0
            for span in self.spans:
                span.acked(base_offset + span.delta if acked else -1, log_append_time_ms)
            if self.futures:
                deltas = self._future_deltas()
        self._resolve_from(0, base_offset, log_append_time_ms, deltas)

    def _future_deltas(self) -> list[int]:
        """Offset delta of each per-record future when bulk spans sit among them."""
        deltas = []
        spans = iter(self.spans or ())
        span = next(spans, None)
        skipped = 0
        for j in range(len(self.futures)):
            while span is not None and span.futures_before <= j:
                skipped += span.count
                span = next(spans, None)
            deltas.append(j + skipped)
        return deltas

    def _resolve_pure(
        self, start: int, stop: int, base_offset: int, log_append_time_ms: int,
        deltas: list[int] | None,
    ) -> None:
        """Resolve the futures of records ``start`` to ``stop`` (the reference of the C twin)."""
        futures = self.futures
        topic, partition = self.topic, self.partition
        new = tuple.__new__  # skips NamedTuple's Python-level __new__: this loop is hot
        if base_offset < 0:  # acks=0: every offset is -1
            offsets: Iterable[int] = itertools.repeat(-1, stop - start)
        elif deltas is None:
            offsets = range(base_offset + start, base_offset + stop)
        else:
            offsets = [base_offset + d for d in deltas[start:stop]]
        timestamps: Iterable[int] = (
            itertools.repeat(log_append_time_ms, stop - start)
            if log_append_time_ms >= 0
            else self.timestamps[start:stop]
        )
        last = key_size = value_size = -1
        for fut, offset, ts, packed in zip(futures[start:stop], offsets, timestamps, self.sizes[start:stop]):
            if packed != last:  # unpacked only when it changes: records often share sizes
                last = packed
                key_size, value_size = (packed >> 32) - 1, (packed & 0xFFFFFFFF) - 1
            try:
                fut.set_result(
                    new(RecordMetadata, (topic, partition, offset, ts, key_size, value_size))
                )
            except asyncio.InvalidStateError:
                pass  # the caller cancelled its wait; the record is written all the same

    def _resolve_from(
        self, start: int, base_offset: int, log_append_time_ms: int, deltas: list[int] | None
    ) -> None:
        futures = self.futures
        stop = min(start + RESOLVE_SLICE, len(futures))
        if _resolve_futures is not None:
            _resolve_futures(
                futures, start, stop, RecordMetadata, self.topic, self.partition, base_offset,
                deltas, log_append_time_ms, self.timestamps, self.sizes, asyncio.InvalidStateError,
            )
        else:
            self._resolve_pure(start, stop, base_offset, log_append_time_ms, deltas)
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
            self._wake_waiters()

    def fail(self, exc: BaseException) -> None:
        """Fail every record's future with ``exc`` (once)."""
        if self.decided:
            return
        self.decided = True
        for span in self.spans or ():
            span.failed(exc)
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(exc)
        self._wake_waiters()
