"""The bound on buffered bytes (``buffer_memory``), with first-come-first-served waiting.

Producers that outrun the broker wait here, in order, until completed batches
give memory back. Waiters are woken one at a time in arrival order and only
when their request fits, so a release never wakes the whole crowd: with many
blocked tasks that matters (a wake-up per waiter per release is quadratic).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import errors
from .._speedups import kernels

__all__ = ["BufferCounter", "BufferCounterPy", "BufferPool"]

_INT64_MAX = (1 << 63) - 1


def _size(n: object) -> int:
    """``n`` as a size: an int in [0, 2**63 - 1], else TypeError or ValueError (as the C twin)."""
    if not isinstance(n, int):
        raise TypeError(f"size must be an int, not {type(n).__name__}")
    if n < 0 or n > _INT64_MAX:
        raise ValueError(f"size must be in [0, 2**63 - 1], got {n!r}")
    return int(n)


class BufferCounterPy:
    """The free bytes of buffer memory and the exhausted flag: the reference of the compiled ``BufferCounter``.

    The lanes call :meth:`try_reserve` once per record; :class:`BufferPool`
    makes every other change (:meth:`take`, :meth:`give`, :meth:`set_exhausted`).
    """

    __slots__ = ("_available", "_exhausted")

    def __init__(self, available: int = 0) -> None:
        self._available = _size(available)
        self._exhausted = False

    @property
    def available(self) -> int:
        """Free bytes of buffer memory."""
        return self._available

    @property
    def exhausted(self) -> bool:
        """Someone waits for memory: the sender should send whatever it has."""
        return self._exhausted

    def try_reserve(self, n: int) -> bool:
        """Take ``n`` bytes if nobody waits and ``n`` are free."""
        available = self._available
        # The per-record path in one test: ``available`` is at most 2**63 - 1,
        # so ``n <= available`` bounds ``n`` too.
        if type(n) is int and 0 <= n <= available and not self._exhausted:
            self._available = available - n
            return True
        n = _size(n)  # a bad size is an error, not a refusal; an int subclass is its value
        if self._exhausted or available < n:
            return False
        self._available = available - n
        return True

    def take(self, n: int) -> None:
        """``n`` bytes granted to a waiter (ValueError if fewer are free)."""
        n = _size(n)
        if self._available < n:
            raise ValueError(f"cannot take {n} bytes: {self._available} available")
        self._available -= n

    def give(self, n: int) -> None:
        """``n`` bytes come back."""
        n = _size(n)
        if self._available > _INT64_MAX - n:
            raise ValueError(
                f"cannot give {n} bytes: {self._available} available, 2**63 - 1 at most"
            )
        self._available += n

    def set_exhausted(self, flag: object) -> None:
        """Someone waits for memory (or no longer)."""
        self._exhausted = bool(flag)


# The twin chosen once: the compiled counter is a C struct the compiled lanes
# reserve from without a method call.
if TYPE_CHECKING:
    BufferCounter = BufferCounterPy
else:
    BufferCounter = kernels.BufferCounter if kernels is not None else BufferCounterPy


class BufferPool(BufferCounter):
    """Waiting for buffer memory over the counter it extends; the only writer of that counter
    besides the lanes' :meth:`try_reserve`."""

    __slots__ = ("_on_exhausted", "_waiters", "total", "wait_time_total")

    def __init__(self, total: int) -> None:
        super().__init__(total)
        self.total = total
        # Called when a caller starts waiting: full batches are then ready at
        # once (Java's "exhausted" rule), so the sender must look now, not at
        # its next deadline. The sender sets it when it starts (listen()).
        self._on_exhausted: Callable[[], None] | None = None
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        # Seconds enqueue() calls have spent waiting for memory, all together
        # (Java's bufferpool-wait-time-total).
        self.wait_time_total = 0.0

    def __repr__(self) -> str:
        return f"<BufferPool {self.available}/{self.total} free, {len(self._waiters)} waiting>"

    def listen(self, on_exhausted: Callable[[], None]) -> None:
        """Call ``on_exhausted()`` whenever a caller starts waiting for memory."""
        self._on_exhausted = on_exhausted

    @property
    def waiting(self) -> int:
        """Tasks waiting for memory now (Java's waiting-threads)."""
        return len(self._waiters)

    async def reserve(self, size: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for ``size`` bytes (KafkaTimeoutError after)."""
        if self.try_reserve(size):
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        self.set_exhausted(True)
        if self._on_exhausted is not None:
            self._on_exhausted()
        timer = loop.call_later(timeout, self._expire, entry, timeout)
        started = time.monotonic()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.cancelled():
                self._forget(entry)
            elif fut.exception() is None:
                self.release(size)  # granted, but our caller gave up: give it back
            raise
        finally:
            timer.cancel()
            self.wait_time_total += time.monotonic() - started

    def _expire(self, entry: tuple[int, asyncio.Future[None]], timeout: float) -> None:
        size, fut = entry
        if fut.done():
            return
        self._forget(entry)
        fut.set_exception(
            errors.KafkaTimeoutError(
                f"failed to allocate {size} bytes of buffer memory within "
                f"{timeout * 1000:.0f} ms (buffer_memory={self.total}; the broker is not "
                f"keeping up or is unreachable)"
            )
        )

    def _forget(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        try:
            self._waiters.remove(entry)
        except ValueError:
            return
        self.set_exhausted(self._waiters)
        self._grant()  # a smaller request behind the one that left may fit now

    def release(self, size: int) -> None:
        """``size`` bytes come back; a waiter they are enough for is granted them."""
        self.give(size)
        self._grant()

    def _grant(self) -> None:
        while self._waiters:
            size, fut = self._waiters[0]
            if fut.done():  # timed out or cancelled
                self._waiters.popleft()
                continue
            if self.available < size:
                return
            self._waiters.popleft()
            self.take(size)
            fut.set_result(None)
        self.set_exhausted(self._waiters)

    def fail_waiters(self, exc: BaseException) -> None:
        """Wake every waiter with ``exc`` (the producer is closing)."""
        waiters, self._waiters = self._waiters, deque()
        self.set_exhausted(False)
        for _size, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
