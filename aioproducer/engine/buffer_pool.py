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

from .. import errors

__all__ = ["BufferPool"]


class BufferPool:
    # Slots: the unkeyed shortcut reads and charges ``available`` and reads
    # ``exhausted`` for every record (from C when compiled).
    __slots__ = ("_on_exhausted", "_waiters", "available", "exhausted", "total", "wait_time_total")

    def __init__(self, total: int, on_exhausted: Callable[[], None] | None = None) -> None:
        self.total = total
        # Called when a caller starts waiting: full batches are then ready at
        # once (Java's "exhausted" rule), so the sender must look now, not at
        # its next deadline.
        self._on_exhausted = on_exhausted
        self.available = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        # Seconds enqueue() calls have spent waiting for memory, all together
        # (Java's bufferpool-wait-time-total).
        self.wait_time_total = 0.0
        # Someone is waiting for memory: the sender should send whatever it has.
        # An attribute kept in step with the waiters, not a property: enqueue()
        # reads it for every record.
        self.exhausted = False

    def __repr__(self) -> str:
        return f"<BufferPool {self.available}/{self.total} free, {len(self._waiters)} waiting>"

    @property
    def waiting(self) -> int:
        """Tasks waiting for memory now (Java's waiting-threads)."""
        return len(self._waiters)

    def try_reserve(self, size: int) -> bool:
        """Take ``size`` bytes now if they are free and nobody is queued before us."""
        if not self._waiters and self.available >= size:
            self.available -= size
            return True
        return False

    async def reserve(self, size: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for ``size`` bytes (KafkaTimeoutError after)."""
        if self.try_reserve(size):
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        self.exhausted = True
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
        self.exhausted = bool(self._waiters)
        self._grant()  # a smaller request behind the one that left may fit now

    def release(self, size: int) -> None:
        self.available += size
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
            self.available -= size
            fut.set_result(None)
        self.exhausted = bool(self._waiters)

    def fail_waiters(self, exc: BaseException) -> None:
        """Wake every waiter with ``exc`` (the producer is closing)."""
        waiters, self._waiters = self._waiters, deque()
        self.exhausted = False
        for _size, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
