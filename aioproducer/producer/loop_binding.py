"""The event loop a producer belongs to, and the check that no other loop uses it.

A producer's connections, tasks and futures belong to the event loop that
started it. Used from another loop, asyncio fails only late: ``enqueue`` would
append the record and hand back a future of the producer's loop, so the record is
sent while the caller sees asyncio's "attached to a different loop" error, and
a caller that retries writes it twice. So every call checks the loop first,
before anything is buffered, and raises :class:`~aioproducer.errors.ProducerLoopError`.

The per-record check (inlined in ``Producer.enqueue``) costs one comparison:
``mark._thread_id != threading.get_ident()``. The mark is the owning loop
itself for asyncio's loops, whose ``_thread_id`` is the id of the thread
running them and None while they do not run; equal ids mean the owning loop
runs in the caller's thread, so the caller is on it (a thread runs one loop
at a time). Only when they differ does :meth:`LoopBindingMixin._check_loop` ask
asyncio for the running loop, the exact answer, which costs more
(``get_running_loop`` makes a ``getpid()`` system call on POSIX). Loops without
``_thread_id`` (uvloop) get a stand-in mark: the thread the loop was last seen
running in, while it runs.

Invariants: a call from another loop raises before it buffers or waits for
anything; ``start`` binds the producer to its loop for good (a start that
failed leaves it unbound); ``close`` from another loop never waits on the
producer's loop, so it cannot hang.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from .. import errors

if TYPE_CHECKING:
    from ..engine.accumulator import RecordAccumulator
    from ..engine.batch import ProducerBatch
    from ..logs import ClientLogger
    from .running import Running

__all__ = ["UNBOUND", "LoopBindingMixin", "loop_error"]

_get_ident = threading.get_ident

ADVICE = (
    "Create and start one producer per event loop, on the loop that uses it (from another "
    "thread, run calls on the producer's loop with asyncio.run_coroutine_threadsafe). With "
    "pytest-asyncio, a fixture that makes a producer and the tests using it must run on one "
    "loop: give them the same loop scope, e.g. a function-scoped fixture for tests on the "
    'function loop (the default), or @pytest_asyncio.fixture(scope="module", '
    'loop_scope="module") with @pytest.mark.asyncio(loop_scope="module") on the tests.'
)


class _Unbound:
    """The mark of a producer not started: matches no thread."""

    __slots__ = ()
    _thread_id = None


UNBOUND: Any = _Unbound()


class _RunningIn:
    """The mark of a loop without asyncio's ``_thread_id`` (uvloop).

    ``_thread_id`` is the thread the loop was last seen running the producer's
    calls in, while the loop runs. A loop moved to another thread is seen
    there at its first call (the exact check runs and updates it).
    """

    __slots__ = ("_running", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._running = loop.is_running
        self.thread = _get_ident()

    @property
    def _thread_id(self) -> int | None:
        return self.thread if self._running() else None


def _mark(loop: asyncio.AbstractEventLoop) -> Any:
    """The per-call mark of ``loop``, which is running in this thread now."""
    if (
        isinstance(loop, asyncio.BaseEventLoop)
        and getattr(loop, "_thread_id", None) == _get_ident()
    ):
        return loop
    return _RunningIn(loop)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def loop_error(owner: asyncio.AbstractEventLoop, what: str) -> errors.ProducerLoopError:
    """The error for ``what`` (a call) made outside ``owner``, the producer's loop."""
    if owner.is_closed():
        state = (
            "The loop that started it is closed, so it can send nothing more: close() it "
            "(from any loop) and create a new producer on the loop that uses it. "
        )
    else:
        state = ""
    return errors.ProducerLoopError(
        f"{what} was called from an event loop other than the one this producer was "
        f"started on; it did nothing (no record was buffered). {state}{ADVICE}"
    )


class LoopBindingMixin:
    """The loop binding of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        _acc: RecordAccumulator
        _running: Running | None
        _log: ClientLogger
        _closed: bool
        _plain: bool

    #: The loop that started the producer (None before start).
    _loop: asyncio.AbstractEventLoop | None = None
    if TYPE_CHECKING:
        #: ``_loop_mark._thread_id == threading.get_ident()``: the caller is on
        #: ``_loop``. UNBOUND until start; Producer keeps it in its enqueue
        #: shortcut, which checks it per record.
        _loop_mark: Any

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """Bind the producer to the running loop (at start); raise if bound to another."""
        running = asyncio.get_running_loop()
        owner = self._loop
        if owner is None:
            self._loop, self._loop_mark = running, _mark(running)
        elif running is not owner:
            if self._closed:
                raise errors.ProducerClosedError("the producer is closed; create a new one")
            raise loop_error(owner, "start()")
        return running

    def _unbind_loop(self) -> None:
        """A start that failed: nothing loop-bound was kept, any loop may start it."""
        if self._running is None:
            self._loop, self._loop_mark = None, UNBOUND

    def _check_loop(self, what: str = "a producer method") -> None:
        """The exact check, when the cheap one failed: raise unless on the producer's loop.

        A producer not started passes (the caller's next check says so); a
        closed one raises ProducerClosedError, which says more.
        """
        owner = self._loop
        if owner is None:
            return
        if _running_loop() is owner:
            if isinstance(self._loop_mark, _RunningIn):
                self._loop_mark.thread = _get_ident()
            return
        if self._closed:
            raise errors.ProducerClosedError("create a new producer to go on")
        raise loop_error(owner, what)

    def _run(self) -> Running:
        """The started producer's parts, for a call on its loop; raise unless started and open."""
        if self._loop_mark._thread_id != _get_ident():
            self._check_loop()
        if self._closed:
            raise errors.ProducerClosedError("create a new producer to go on")
        running = self._running
        if running is None:
            raise errors.IllegalStateError("call 'await producer.start()' first")
        return running

    def _check_open(self) -> None:
        """Raise unless started, open and called on the producer's loop."""
        self._run()

    def _on_other_loop(self) -> bool:
        """Whether the producer was started on a loop that is not the running one."""
        owner = self._loop
        return owner is not None and _running_loop() is not owner

    async def _close_from_other_loop(self) -> None:
        """``close()`` called outside the producer's loop: bounded, and loses nothing silently.

        While the producer's loop exists, its tasks and connections can only
        be stopped there: raise ProducerLoopError at once, leaving the
        producer open and its pending records buffered (they are sent when
        that loop runs again, and closing there delivers them). Once that loop
        is closed, nothing of the producer can run again: mark it closed, fail
        the records never acknowledged with ProducerLoopError (their futures
        belong to the dead loop: set, but callbacks cannot run), and raise
        ProducerLoopError naming how many there were; with none, return. The
        dead loop's sockets are left to the garbage collector (closing a
        transport needs its loop).
        """
        if self._closed:
            return
        owner = self._loop
        if owner is None:
            return  # never started: nothing of it runs on any loop
        if not owner.is_closed():
            raise errors.ProducerLoopError(
                "close() was called from an event loop other than the one this producer was "
                "started on; nothing was closed and the pending records stay buffered. Close it "
                "on its own loop (from another thread: asyncio.run_coroutine_threadsafe("
                "producer.close(), loop).result()). " + ADVICE
            )
        self._closed, self._plain = True, False
        error = errors.ProducerLoopError(
            "the event loop of the producer was closed before this record was acknowledged "
            "(it may or may not have been written)"
        )
        pending = self._abandon(error)
        if not pending:
            self._log.info("closed from another event loop after its own loop had closed")
            return
        self._log.warning(
            "closed from another event loop after its own loop had closed: %d record(s) "
            "never acknowledged were failed",
            pending,
        )
        raise errors.ProducerLoopError(
            f"{pending} record(s) were never acknowledged (they may or may not have been "
            f"written): the event loop of this producer was closed before the producer was. "
            f"The producer is now closed and their futures failed. Close a producer on its own "
            f"loop, before that loop ends (async with Producer(...) inside asyncio.run). {ADVICE}"
        )

    def _abandon(self, error: errors.ProducerLoopError) -> int:
        """Fail every record not acknowledged, with no loop to run on; returns their count.

        Each undecided batch fails once: its records' handles and its bulk
        spans get the error (their callbacks cannot run: the loop is closed,
        which the batch's outcome passes over). A bulk call stopped between two
        slices fails the records it had not buffered yet (counted too): its
        future then resolves once.
        """
        pending = 0
        for batch in list(self._acc.incomplete):
            if batch.done:
                continue
            pending += batch.record_count
            # Only a batch that was sent may be in the log.
            _fail_batch(batch, errors.delivery_error(error, batch.maybe_written or batch.in_flight))
        running = self._running
        if running is not None:
            pending += running.bulk.abandon(
                errors.ProducerLoopError(
                    "the event loop of the producer was closed before this record was buffered "
                    "(it was not sent)"
                )
            )
            try:
                # Every batch is decided now: this only settles the memory,
                # sequence and transaction bookkeeping, and fails nothing twice.
                running.sender.abort(error)
            except RuntimeError as exc:
                self._log.debug("abandoning the records: %s", exc)
        return pending


def _fail_batch(batch: ProducerBatch, failed: BaseException) -> None:
    """Fail ``batch`` with its loop closed: every future and span told once (see
    ProducerBatch.fail_abandoned), so that neither the batch nor the sender's abort
    tells a bulk call twice (BulkCall counts its records down)."""
    batch.fail_abandoned(failed)
