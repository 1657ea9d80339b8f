"""A record's future as a view on its batch's outcome: the pure reference of the compiled handle.

Java's ``KafkaProducer.send`` returns a ``FutureRecordMetadata`` that holds
no result of its own: it reads its batch's ``ProduceRequestResult`` and its
own offset within the batch, so completing a batch is one step however many
records it holds. :class:`RecordHandle` is that design on asyncio:

* :class:`BatchOutcome` is shared by a batch's records: the loop, topic and
  partition, and once known the base offset and log-append time, or the
  error. :meth:`BatchOutcome.complete` and :meth:`BatchOutcome.fail` decide
  every record of the batch at once; only the handles someone waits on (a
  done callback, an awaiting task) are visited, to schedule their callbacks.
* :class:`RecordHandle` is one record: its outcome, its offset delta in the
  batch, its timestamp and its packed key and value sizes. Its
  :class:`~aioproducer.engine.batch.RecordMetadata` is made when asked for.

A handle behaves as an ``asyncio.Future`` to everything asyncio does with
one (``asyncio.isfuture`` is true): it can be awaited, given to
``gather``, ``wait``, ``wait_for``, ``shield`` and ``as_completed``, and has
``done``, ``cancelled``, ``result``, ``exception``, ``add_done_callback``,
``remove_done_callback``, ``cancel`` and ``get_loop``. As with a future,
cancelling a handle (or a task awaiting it) cancels only the wait: the record
is sent all the same. Nothing outside the producer can set its result.

A batch split because the broker found it too large (KIP-126) moves its
records to the parts: :meth:`BatchOutcome.move_to` leaves the old outcome
pointing at the part each record went to, and a handle follows it.

The compiled twin (``aioproducer/_speedups/_handle.c``) keeps the same state
in C fields; tests/unit/test_record_handle.py runs every test on both.
"""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import itertools
from collections.abc import Callable, Generator, Sequence
from types import GenericAlias
from typing import TYPE_CHECKING, Any

from .._speedups import kernels
from ..types import RecordMetadata

__all__ = [
    "BatchOutcome",
    "BatchOutcomePy",
    "RecordHandle",
    "RecordHandlePy",
    "RecordMetadata",
    "register_record_metadata",
    "register_record_metadata_py",
]

_PENDING, _DONE, _FAILED, _MOVED = 0, 1, 2, 3
# Done callbacks run per turn of the event loop: a batch of many awaited
# records runs their callbacks a slice at a time, so it never holds the loop.
WAKE_SLICE = 512
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


# The NamedTuple whose instances result() makes with tuple.__new__, skipping its
# Python-level __new__ (see register_record_metadata).
_fast_metadata: Any = None


def register_record_metadata_py(cls: type) -> None:
    """Results of ``cls`` (a NamedTuple of six fields) are made without its ``__new__``."""
    global _fast_metadata
    fields = getattr(cls, "_fields", None) if isinstance(cls, type) else None
    # What the compiled twin checks: a plain tuple subclass of six fields, no
    # instance dict, not a struct sequence.
    if (
        type(fields) is not tuple
        or len(fields) != 6
        or cls.__base__ is not tuple
        or cls.__basicsize__ != tuple.__basicsize__
        or cls.__itemsize__ != tuple.__itemsize__
        or cls.__dictoffset__
        or hasattr(cls, "n_fields")
    ):
        raise TypeError("register_record_metadata() takes a NamedTuple class of six fields")
    _fast_metadata = cls


def _int64(value: int, what: str) -> int:
    # What the compiled twin's C fields hold: exact ints of 64 bits, no more.
    if type(value) is not int:
        value = value.__index__()
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise OverflowError(f"{what} does not fit in 64 bits")
    return value


class BatchOutcomePy:
    """What happened to a batch, shared by its records' handles (see the module docstring)."""

    __slots__ = (
        "_error",
        "_moved",
        "_state",
        "_waiting",
        "base_offset",
        "log_append_time_ms",
        "loop",
        "metadata_type",
        "partition",
        "topic",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        topic: str,
        partition: int,
        metadata_type: type[RecordMetadata],
    ) -> None:
        #: Where the handles' callbacks run (None for a batch no one awaits).
        # Typed as a loop for its readers: only handles read it, and only an awaited batch has any.
        self.loop: asyncio.AbstractEventLoop = loop  # type: ignore[assignment]  # None: no reader
        self.topic = topic
        self.partition = partition
        #: The class of a record's metadata: called as ``metadata_type(topic,
        #: partition, offset, timestamp_ms, key_size, value_size)``.
        self.metadata_type = metadata_type
        self.base_offset = -1
        self.log_append_time_ms = -1
        self._error: BaseException | None = None
        self._state = _PENDING
        # Handles with done callbacks, visited when the outcome is decided.
        self._waiting: list[RecordHandlePy] = []
        # After move_to: (first record index of each part, and the parts).
        self._moved: tuple[list[int], list[BatchOutcomePy]] | None = None

    def __repr__(self) -> str:
        state = ("pending", "done", "failed", "moved")[self._state]
        return f"<BatchOutcome {self.topic}-{self.partition} {state}>"

    @property
    def decided(self) -> bool:
        """Completed, failed or moved: it takes no other decision."""
        return self._state != _PENDING

    @property
    def error(self) -> BaseException | None:
        """The batch's error once failed, else None."""
        return self._error

    def handle(self, delta: int, timestamp_ms: int, sizes: int) -> RecordHandlePy:
        """A handle for the record at offset ``delta`` of the batch (``sizes`` as ``batch.pack_sizes``)."""
        return RecordHandlePy(self, delta, timestamp_ms, sizes)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """The batch was written at ``base_offset`` (-1: acks=0, not known); once."""
        base_offset = _int64(base_offset, "base_offset")
        log_append_time_ms = _int64(log_append_time_ms, "log_append_time_ms")
        if self._state != _PENDING:
            return
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self._state = _DONE
        self._wake()

    def fail(self, error: BaseException) -> None:
        """Every record of the batch failed with ``error``; once."""
        if not isinstance(error, BaseException):
            raise TypeError("fail() takes an exception instance")
        if self._state != _PENDING:
            return
        self._error = error
        self._state = _FAILED
        self._wake()

    def move_to(self, starts: Sequence[int], parts: Sequence[BatchOutcomePy]) -> None:
        """The batch was split: records from ``starts[i]`` on went to ``parts[i]`` (KIP-126)."""
        if self._state != _PENDING:
            return
        starts, parts = list(starts), list(parts)
        if (
            not parts
            or len(starts) != len(parts)
            or any(type(s) is not int for s in starts)
            or any(type(p) is not BatchOutcomePy for p in parts)
            or starts[0] != 0
            or any(a >= b for a, b in itertools.pairwise(starts))
            or starts[-1] > _INT64_MAX
        ):
            raise ValueError("a split needs parts, the first starting at record 0")
        self._moved = (starts, parts)
        self._state = _MOVED
        waiting, self._waiting = self._waiting, []
        for handle in waiting:
            if handle._cancelled:
                continue
            outcome, delta = self._follow(handle._delta)
            handle._outcome, handle._delta = outcome, delta
            outcome._wait(handle)

    def _follow(self, delta: int) -> tuple[BatchOutcomePy, int]:
        """The outcome a record at ``delta`` of this batch now belongs to, and its delta there."""
        outcome = self
        while outcome._moved is not None:
            starts, parts = outcome._moved
            i = bisect.bisect_right(starts, delta) - 1
            delta -= starts[i]
            outcome = parts[i]
        return outcome, delta

    def _wait(self, handle: RecordHandlePy) -> None:
        if self._state == _PENDING:
            self._waiting.append(handle)
        else:
            handle._schedule_callbacks()

    def _wake(self) -> None:
        """Take the done callbacks of the waiting handles, and run them on the next turn.

        An ``asyncio.Future`` makes one loop callback (``call_soon``, a
        ``Handle``) per done callback. Here one loop callback runs a slice of
        them, each in its own context as ``Handle`` would: a batch of 60
        awaited records is one ``call_soon``, not 60. The callbacks are taken
        now, as a future's are when it is done: ``remove_done_callback`` after
        the decision removes nothing. In debug mode each gets its own
        ``call_soon``, so asyncio's slow-callback warnings name it.
        """
        waiting, self._waiting = self._waiting, []
        entries: list[Any] = []
        for handle in waiting:
            callbacks, handle._callbacks = handle._callbacks, None
            for fn, context in callbacks or ():
                entries += (handle, fn, context)
        if not entries:
            return
        loop = self.loop
        try:
            if loop.get_debug():
                for i in range(0, len(entries), 3):
                    loop.call_soon(entries[i + 1], entries[i], context=entries[i + 2])
            else:
                loop.call_soon(self._run_callbacks, entries, 0)
        except RuntimeError:
            pass  # the loop is closed: nothing would run the callbacks

    def _run_callbacks(self, entries: list[Any], start: int, /) -> None:
        """Run the callbacks ``entries[start:]`` (handle, fn, context triples), a slice per turn.

        A loop callback. What ``Handle._run`` does for each: an exception goes
        to the loop's exception handler (the context's ``handle`` is the record
        handle); SystemExit and KeyboardInterrupt propagate, and the callbacks
        not run yet run on a later turn (behind what the loop had queued
        meanwhile, where a future's would have kept their place).
        """
        if (
            type(entries) is not list
            or len(entries) % 3
            or type(start) is not int
            or not 0 <= start <= len(entries)
            or start % 3
        ):
            raise ValueError("_run_callbacks() takes (handle, fn, context) triples and a start")
        stop = min(start + 3 * WAKE_SLICE, len(entries))
        for i in range(start, stop, 3):
            if (
                type(entries[i]) is not RecordHandlePy
                or type(entries[i + 2]) is not contextvars.Context
            ):
                raise TypeError("_run_callbacks() takes record handles and contexts")
        loop = self.loop
        i = start
        try:
            while i < stop:
                # A callback may have changed the list (only a caller of this
                # method can hold it): read each triple again, and check it.
                if i + 2 >= len(entries):
                    break
                handle, fn, context = entries[i], entries[i + 1], entries[i + 2]
                i += 3
                if type(handle) is not RecordHandlePy or type(context) is not contextvars.Context:
                    raise TypeError("_run_callbacks() takes record handles and contexts")
                try:
                    context.run(fn, handle)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:  # noqa: BLE001 - as asyncio.Handle: reported
                    loop.call_exception_handler(
                        {
                            "message": f"Exception in callback {fn!r}({handle!r})",
                            "exception": exc,
                            "handle": handle,
                        }
                    )
        finally:
            if i < len(entries):
                try:
                    loop.call_soon(self._run_callbacks, entries, i)
                except RuntimeError:
                    pass  # the loop is closed: nothing would run the callbacks


class RecordHandlePy:
    """One record's outcome, awaitable as an ``asyncio.Future`` (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_asyncio_future_blocking",
        "_callbacks",
        "_cancel_message",
        "_cancelled",
        "_delta",
        "_metadata",
        "_outcome",
        "_sizes",
        "_timestamp_ms",
    )

    __class_getitem__: Any = classmethod(GenericAlias)

    def __init__(self, outcome: BatchOutcomePy, delta: int, timestamp_ms: int, sizes: int) -> None:
        if type(outcome) is not BatchOutcomePy:
            raise TypeError("RecordHandle() needs a BatchOutcome")
        self._outcome = outcome
        self._delta = _int64(delta, "delta")
        self._timestamp_ms = _int64(timestamp_ms, "timestamp_ms")
        if type(sizes) is not int:
            sizes = sizes.__index__()
        if not 0 <= sizes <= _UINT64_MAX:
            raise OverflowError("sizes does not fit in 64 unsigned bits")
        self._sizes = sizes
        self._cancelled = False
        self._cancel_message: Any = None
        self._callbacks: list[tuple[Callable[[Any], object], contextvars.Context | None]] | None = (
            None
        )
        self._metadata: RecordMetadata | None = None
        # asyncio's mark of a future-like object (asyncio.isfuture): True while
        # a task waits on it, as Future.__await__ sets it.
        self._asyncio_future_blocking = False

    def __repr__(self) -> str:
        if self._cancelled:
            state = "cancelled"
        elif not self.done():
            state = "pending"
        elif self._current()[0]._state == _FAILED:
            state = f"exception={self._current()[0].error!r}"
        else:
            state = f"result={self.result()!r}"
        return f"<RecordHandle {state}>"

    def _current(self) -> tuple[BatchOutcomePy, int]:
        outcome = self._outcome
        if outcome._state == _MOVED:
            outcome, delta = outcome._follow(self._delta)
            self._outcome, self._delta = outcome, delta  # the next look is direct
        return self._outcome, self._delta

    # -- the Future protocol ------------------------------------------------------

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop of the producer that took the record."""
        return self._outcome.loop

    def done(self) -> bool:
        """Whether the record's outcome is known (or this handle was cancelled)."""
        if self._cancelled:
            return True
        outcome = self._outcome
        if outcome._state == _MOVED:
            outcome = self._current()[0]
        return outcome._state != _PENDING

    def cancelled(self) -> bool:
        """Whether this handle was cancelled (the record itself never is)."""
        return self._cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting for the record (it is sent all the same); False once done."""
        if self.done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        self._schedule_callbacks()
        return True

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its error, CancelledError, or InvalidStateError if pending."""
        if self._cancelled:
            raise self._cancelled_error()
        outcome = self._outcome
        delta = self._delta
        if outcome._state == _MOVED:
            outcome, delta = self._current()
        state = outcome._state
        if state == _DONE:
            metadata = self._metadata
            if metadata is None:
                base = outcome.base_offset
                log_time = outcome.log_append_time_ms
                sizes = self._sizes
                offset = -1 if base < 0 else base + delta
                if offset > _INT64_MAX:
                    raise OverflowError("the record's offset does not fit in 64 bits")
                fields = (
                    outcome.topic,
                    outcome.partition,
                    offset,
                    log_time if log_time >= 0 else self._timestamp_ms,
                    (sizes >> 32) - 1,
                    (sizes & 0xFFFFFFFF) - 1,
                )
                cls = outcome.metadata_type
                metadata = self._metadata = (
                    tuple.__new__(cls, fields) if cls is _fast_metadata else cls(*fields)
                )
            return metadata
        if state == _FAILED:
            raise outcome._error  # type: ignore[misc]  # set with the failed state, never None
        raise asyncio.InvalidStateError("Result is not set.")

    def exception(self) -> BaseException | None:
        """The record's error, None once written; CancelledError, or InvalidStateError if pending."""
        if self._cancelled:
            raise self._cancelled_error()
        outcome = self._outcome
        if outcome._state == _MOVED:
            outcome = self._current()[0]
        if outcome._state == _DONE:
            return None
        if outcome._state == _FAILED:
            return outcome._error
        raise asyncio.InvalidStateError("Exception is not set.")

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        """Call ``fn(handle)`` on the handle's loop once it is done (at once if it is)."""
        if context is None:
            context = contextvars.copy_context()
        # Every allocation first: one may run the cyclic collector, and finalizers that
        # decide the outcome or add a callback. From the checks on, nothing allocates.
        entry = (fn, context)
        fresh: list[tuple[Callable[[Any], object], contextvars.Context | None]] = [entry]
        outcome = self._outcome
        if outcome._state == _MOVED:
            outcome = self._current()[0]
        if self._cancelled or outcome._state != _PENDING:
            outcome.loop.call_soon(fn, self, context=context)
            return
        callbacks = self._callbacks
        if callbacks is None:
            self._callbacks = fresh
            outcome._waiting.append(self)  # pending: _wait's first case
        else:
            callbacks.append(entry)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        """Remove every registration of ``fn``; how many there were."""
        callbacks = self._callbacks
        if not callbacks:
            return 0
        # A copy first: comparing callables runs their __eq__, which may add callbacks.
        snapshot = list(callbacks)
        kept = [entry for entry in snapshot if not (entry[0] is fn or entry[0] == fn)]
        if self._callbacks is callbacks:
            callbacks[:] = kept
        return len(snapshot) - len(kept)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self  # the task waits on us: see add_done_callback
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    # -- inside ---------------------------------------------------------------------

    def _cancelled_error(self) -> asyncio.CancelledError:
        msg = self._cancel_message
        return asyncio.CancelledError() if msg is None else asyncio.CancelledError(msg)

    def _schedule_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        if not callbacks:
            return
        loop = self._outcome.loop
        for fn, context in callbacks:
            try:
                loop.call_soon(fn, self, context=context)
            except RuntimeError:
                return  # the loop is closed: nothing will run them (the outcome stands)


# The compiled twins when the kernels are built, chosen once here (as aiohttp
# chooses its HTTP parser); the pure classes above are the reference, and
# what type checkers see.
if TYPE_CHECKING:
    BatchOutcome = BatchOutcomePy
    RecordHandle = RecordHandlePy
    register_record_metadata = register_record_metadata_py
elif kernels is not None:
    BatchOutcome = kernels.BatchOutcome
    RecordHandle = kernels.RecordHandle
    register_record_metadata = kernels.register_record_metadata
else:
    BatchOutcome = BatchOutcomePy
    RecordHandle = RecordHandlePy
    register_record_metadata = register_record_metadata_py
# The producer's own results are made without RecordMetadata's Python __new__.
register_record_metadata(RecordMetadata)
