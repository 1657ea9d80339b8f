"""Start and close of :class:`~aioproducer.Producer`, and waiting for what it has buffered.

:class:`LifecycleMixin` builds a started producer's parts from its config (the
client and its connections, the sender, the transaction manager, the bulk
appender: one :class:`.running.Running`), and takes them down again: ``close`` aborts an open transaction,
delivers what is pending within its timeout and fails the rest, so that every
record's future resolves exactly once. ``flush`` waits for the batches
buffered when it was called. ``Producer`` inherits these methods; the state
they work on is created in ``Producer._init``, the running parts by ``start``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .. import errors
from .running import Parts, Running

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..engine.accumulator import RecordAccumulator
    from ..engine.buffer_pool import BufferPool

__all__ = ["LifecycleMixin"]


class LifecycleMixin:
    """``start``, ``close``, ``flush`` and ``async with`` of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        _running: Running | None
        _acc: RecordAccumulator
        _pool: BufferPool
        _max_block: float
        _closed: bool
        _plain: bool
        _start_lock: asyncio.Lock | None
        _close_lock: asyncio.Lock | None

        def _parts(self) -> Parts: ...
        def _run(self) -> Running: ...
        def _bind_loop(self) -> asyncio.AbstractEventLoop: ...
        def _unbind_loop(self) -> None: ...
        def _on_other_loop(self) -> bool: ...
        async def _close_from_other_loop(self) -> None: ...
        async def _end_open_transaction(self, timeout: float | None) -> BaseException | None: ...

    async def start(self) -> None:
        """Connect to the cluster (bounded by ``max_block_ms``) and start sending.

        Calls made while a start is under way wait for it: one client and one
        sender, whatever the number of callers. Binds the producer to this loop.
        """
        self._bind_loop()
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._closed:
                raise errors.ProducerClosedError("it cannot start again; create a new producer")
            if self._running is not None:
                return
            await self._start()

    async def _start(self) -> None:
        parts = self._parts()
        client = Running.connect(parts)
        try:
            await client.bootstrap(self._max_block)
            if self._closed:
                raise errors.ProducerClosedError("close() was called while start() was connecting")
        except BaseException:
            await client.close()
            self._unbind_loop()
            raise
        self._running = running = Running.build(parts, client, self._bind_loop())
        self._plain = running.txn is None

    def _wake_sender(self) -> None:
        if self._running is not None:
            self._running.sender.wakeup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then shut down.

        Records still pending when ``timeout`` runs out fail with
        KafkaTimeoutError. With ``timeout=None`` close waits for every record,
        which each batch's ``delivery_timeout_ms`` bounds. A transaction left
        open is ended first (within ``timeout``, else ``max_block_ms`` per
        round trip), so ``read_committed`` consumers are not held back until
        ``transaction_timeout_ms``: one begun and not ended is aborted, as the
        Java producer does; one whose ``commit_transaction()`` timed out is
        committed, or aborted if that fails, and then close raises
        TransactionAbortedError once shut down; one that can be ended neither
        way makes close raise TransactionNotCompletedError once shut down. A
        prepared transaction is left open. Calling it twice is safe. From
        another event loop: see :meth:`LoopBindingMixin._close_from_other_loop`.
        """
        if self._on_other_loop():
            await self._close_from_other_loop()
            return
        if self._close_lock is None:
            self._close_lock = asyncio.Lock()
        async with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._plain = False
            self._pool.fail_waiters(
                errors.ProducerClosedError("close() was called while waiting for buffer memory")
            )
            running = self._running
            if running is None:
                return
            # An enqueue() waiting for metadata fails now, not max_block_ms later.
            running.client.fail_metadata_waiters(
                errors.ProducerClosedError("close() was called while waiting for metadata")
            )
            # Shielded: a close() that is itself cancelled still stops the
            # sender and the connections instead of leaving them running.
            await asyncio.shield(self._shutdown(running, timeout))

    async def _shutdown(self, running: Running, timeout: float | None) -> None:
        sender = running.sender
        outcome: BaseException | None = None
        try:
            started = time.monotonic()
            outcome = await self._end_open_transaction(timeout)
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - started))
            self._acc.closing = True
            sender.wakeup()
            done = await self._wait_batches(list(self._acc.incomplete), timeout)
            if not done:
                sender.abort(
                    errors.KafkaTimeoutError(
                        f"the producer was closed with a timeout of {timeout} s before "
                        f"this record was delivered"
                    )
                )
        finally:
            await sender.stop()
            # Anything left (a request cancelled by stop) still resolves.
            sender.abort(
                errors.ProducerClosedError("close() ended before this record was delivered")
            )
            await running.client.close()
        if outcome is not None:
            raise outcome

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed.

        Raises KafkaTimeoutError if ``timeout`` seconds pass first (the records
        stay pending). Failures are reported through each record's future.
        """
        sender = self._run().sender
        self._acc.flushing += 1
        try:
            sender.wakeup()
            if not await self._wait_batches(list(self._acc.incomplete), timeout):
                raise errors.KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            self._acc.flushing -= 1

    async def _wait_batches(self, batches: list[Any], timeout: float | None) -> bool:
        waiters = [b.done_waiter() for b in batches if not b.done]
        if not waiters:
            return True
        _done, pending = await asyncio.wait(waiters, timeout=timeout)
        for fut in pending:
            fut.cancel()
        return not pending
