"""Start and close of a :class:`~aioproducer.Producer`, and waiting for what it has buffered.

:class:`Lifecycle` owns whether a producer is started and whether it is
closed. ``start`` builds a started producer's parts from the ones its
constructor made (the client and its connections, the sender, the transaction
manager, the bulk appender: one :class:`.running.Running`), and ``close``
takes them down again: it ends an open transaction, delivers what is pending
within its timeout and fails the rest, so that every record's future resolves
exactly once. ``flush`` waits for the batches buffered when it was called.

Invariants: no part of :class:`.running.Running` is ever None once started;
a producer closed stays closed; ``close`` from another event loop never waits
on the producer's loop, so it cannot hang.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from .. import errors
from .loop_binding import ADVICE, LoopBinding
from .running import Parts, Running
from .txn_endings import end_open_transaction, wait_batches

if TYPE_CHECKING:
    from ..telemetry.logs import ClientLogger

__all__ = ["Lifecycle"]

_get_ident = threading.get_ident


class Lifecycle:
    """Whether a producer is started and closed, and the calls that change it."""

    __slots__ = ("_close_lock", "_log", "_parts", "_start_lock", "binding", "closed", "running")

    def __init__(self, parts: Parts, binding: LoopBinding, log: ClientLogger) -> None:
        self._parts = parts
        self._log = log
        self.binding = binding
        #: The started producer's parts; None until ``start()`` connected.
        self.running: Running | None = None
        self.closed = False
        self._start_lock: asyncio.Lock | None = None
        self._close_lock: asyncio.Lock | None = None

    @property
    def _plain(self) -> bool:
        return self._parts.shortcut.plain

    @_plain.setter
    def _plain(self, plain: bool) -> None:
        # Started, open and not transactional: the enqueue shortcut takes records.
        self._parts.shortcut.plain = plain

    # -- the checks every call makes ----------------------------------------

    def run(self) -> Running:
        """The started producer's parts, for a call on its loop; raise unless started and open."""
        if self.binding.mark._thread_id != _get_ident():
            self.binding.check("a producer method", self.closed)
        if self.closed:
            raise errors.ProducerClosedError("create a new producer to go on")
        running = self.running
        if running is None:
            raise errors.IllegalStateError("call 'await producer.start()' first")
        return running

    def check_open(self) -> None:
        """Raise unless started, open and called on the producer's loop."""
        self.run()

    def check_can_send(self) -> Running:
        """The started producer's parts; raise unless records may be appended now:
        started, open, and the transaction (if any) in a state that takes records."""
        if self.closed:
            raise errors.ProducerClosedError("cannot send after close(); create a new producer")
        running = self.running
        if running is None:
            raise errors.IllegalStateError("call 'await producer.start()' before sending")
        if running.txn is not None:
            running.txn.check_can_send()
        return running

    # -- start -------------------------------------------------------------

    async def start(self) -> None:
        """Connect and start sending; calls made meanwhile wait for this one."""
        self.binding.bind(self.closed)
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.closed:
                raise errors.ProducerClosedError("it cannot start again; create a new producer")
            if self.running is not None:
                return
            await self._start()

    async def _start(self) -> None:
        parts = self._parts
        client = Running.connect(parts)
        try:
            await client.bootstrap(parts.max_block)
            if self.closed:
                raise errors.ProducerClosedError("close() was called while start() was connecting")
        except BaseException:
            await client.close()
            if self.running is None:
                self.binding.unbind()
            raise
        loop = self.binding.bind(self.closed)
        self.running = running = Running.build(parts, client, loop, self.check_open)
        self._plain = running.txn is None

    # -- flush -------------------------------------------------------------

    async def flush(self, timeout: float | None) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed."""
        sender = self.run().sender
        acc = self._parts.acc
        acc.flushing += 1
        try:
            sender.wakeup()
            if not await wait_batches(acc, timeout):
                raise errors.KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            acc.flushing -= 1

    # -- close -------------------------------------------------------------

    async def close(self, timeout: float | None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then shut down."""
        if self.binding.on_other_loop():
            await self._close_from_other_loop()
            return
        if self._close_lock is None:
            self._close_lock = asyncio.Lock()
        async with self._close_lock:
            if self.closed:
                return
            self.closed = True
            self._plain = False
            self._parts.pool.fail_waiters(
                errors.ProducerClosedError("close() was called while waiting for buffer memory")
            )
            running = self.running
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
        acc = self._parts.acc
        outcome: BaseException | None = None
        try:
            started = time.monotonic()
            if running.txn is not None:
                outcome = await end_open_transaction(
                    running.txn,
                    acc,
                    sender,
                    self._log,
                    self._parts.config.max_block_ms,
                    timeout,
                )
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - started))
            acc.closing = True
            sender.wakeup()
            if not await wait_batches(acc, timeout):
                sender.abort(
                    errors.KafkaTimeoutError(
                        f"the producer was closed with a timeout of {timeout} s before "
                        f"this record was delivered"
                    )
                )
        finally:
            await sender.stop()
            # Anything left still resolves: stop() drops the answers still to come.
            sender.abort(
                errors.ProducerClosedError("close() ended before this record was delivered")
            )
            await running.client.close()
        if outcome is not None:
            raise outcome

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
        if self.closed:
            return
        owner = self.binding.loop
        if owner is None:
            return  # never started: nothing of it runs on any loop
        if not owner.is_closed():
            raise errors.ProducerLoopError(
                "close() was called from an event loop other than the one this producer was "
                "started on; nothing was closed and the pending records stay buffered. Close it "
                "on its own loop (from another thread: asyncio.run_coroutine_threadsafe("
                "producer.close(), loop).result()). " + ADVICE
            )
        self.closed, self._plain = True, False
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
        for batch in list(self._parts.acc.incomplete):
            if batch.done:
                continue
            pending += batch.record_count
            # Only a batch that was sent may be in the log. Every future and
            # span is told once (ProducerBatch.fail_abandoned), so that neither
            # the batch nor the sender's abort tells a bulk call twice.
            batch.fail_abandoned(
                errors.delivery_error(error, batch.maybe_written or batch.in_flight)
            )
        running = self.running
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
