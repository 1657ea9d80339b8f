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
at a time). Only when they differ does :meth:`LoopBinding.check` ask
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
    from ..engine.shortcut import EnqueueShortcut

__all__ = ["ADVICE", "UNBOUND", "LoopBinding", "loop_error"]

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


class LoopBinding:
    """The loop a producer belongs to, and the checks against it.

    The per-call mark lives in the producer's enqueue shortcut, which reads it
    on every record; this object is the only one that sets it.
    """

    __slots__ = ("_shortcut", "loop")

    def __init__(self, shortcut: EnqueueShortcut) -> None:
        self._shortcut = shortcut
        #: The loop that started the producer (None before start).
        self.loop: asyncio.AbstractEventLoop | None = None
        shortcut.loop_mark = UNBOUND

    @property
    def mark(self) -> Any:
        """``mark._thread_id == threading.get_ident()``: the caller is on :attr:`loop`."""
        return self._shortcut.loop_mark

    def bind(self, closed: bool) -> asyncio.AbstractEventLoop:
        """Bind to the running loop (at start); raise if bound to another."""
        running = asyncio.get_running_loop()
        owner = self.loop
        if owner is None:
            self.loop, self._shortcut.loop_mark = running, _mark(running)
        elif running is not owner:
            if closed:
                raise errors.ProducerClosedError("the producer is closed; create a new one")
            raise loop_error(owner, "start()")
        return running

    def unbind(self) -> None:
        """A start that failed: nothing loop-bound was kept, any loop may start it."""
        self.loop, self._shortcut.loop_mark = None, UNBOUND

    def check(self, what: str, closed: bool) -> None:
        """The exact check, when the cheap one failed: raise unless on the producer's loop.

        A producer not started passes (the caller's next check says so); a
        closed one raises ProducerClosedError, which says more.
        """
        owner = self.loop
        if owner is None:
            return
        if _running_loop() is owner:
            mark = self._shortcut.loop_mark
            if isinstance(mark, _RunningIn):
                mark.thread = _get_ident()
            return
        if closed:
            raise errors.ProducerClosedError("create a new producer to go on")
        raise loop_error(owner, what)

    def on_other_loop(self) -> bool:
        """Whether the producer was started on a loop that is not the running one."""
        owner = self.loop
        return owner is not None and _running_loop() is not owner
