"""Start and close of :class:`~aioproducer.Producer`, and waiting for what it has buffered.

:class:`LifecycleMixin` builds a started producer's parts from its config (the
client and its connections, the sender, the transaction manager, the bulk
appender), and takes them down again: ``close`` aborts an open transaction,
delivers what is pending within its timeout and fails the rest, so that every
record's future resolves exactly once. ``flush`` waits for the batches
buffered when it was called. ``Producer`` inherits these methods; the state
they work on is created in ``Producer._init``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any

from . import errors
from .bulk.appender import BulkAppender
from .engine.admission import Admission
from .engine.idempotence import SequenceState
from .engine.keyed_lane import KeyedLane
from .engine.sender import Sender
from .engine.sticky import forget_idle_topics
from .engine.transactions import TransactionManager
from .engine.unkeyed_lane import UnkeyedLane
from .net.client import KafkaClient

if TYPE_CHECKING:
    from typing_extensions import Self

    from .config import ProducerConfig
    from .engine.accumulator import RecordAccumulator
    from .engine.buffer_pool import BufferPool
    from .engine.shortcut import EnqueueShortcut
    from .engine.sticky import StickyPartitioner
    from .net.metadata_wait import MetadataWait
    from .telemetry.producer_metrics import ProducerMetrics

__all__ = ["LifecycleMixin"]


class LifecycleMixin:
    """``start``, ``close``, ``flush`` and ``async with`` of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        config: ProducerConfig
        client_id: str
        _client: KafkaClient | None
        _sender: Sender | None
        _bulk: BulkAppender | None
        _txn: TransactionManager | None
        _acc: RecordAccumulator
        _pool: BufferPool
        _sticky: StickyPartitioner
        _metrics: ProducerMetrics
        _metadata_wait: MetadataWait
        _max_block: float
        _started: bool
        _closed: bool
        _plain: bool
        _start_lock: asyncio.Lock | None
        _close_lock: asyncio.Lock | None
        _admission: Admission | None
        _lane: UnkeyedLane | None
        _keyed_lane: KeyedLane | None
        _shortcut: EnqueueShortcut
        _max_unkeyed: int
        _serializing: bool

        def _bind_loop(self) -> asyncio.AbstractEventLoop: ...
        def _unbind_loop(self) -> None: ...
        def _check_open(self) -> None: ...
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
            if self._started:
                return
            await self._start()

    async def _start(self) -> None:
        cfg = self.config
        client = KafkaClient(
            cfg.bootstrap_servers,
            client_id=self.client_id,
            request_timeout_ms=cfg.request_timeout_ms,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            reconnect_backoff_ms=cfg.reconnect_backoff_ms,
            reconnect_backoff_max_ms=cfg.reconnect_backoff_max_ms,
            connections_max_idle_ms=cfg.connections_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            allow_auto_create_topics=cfg.allow_auto_create_topics,
            metrics=self._metrics if cfg.metrics_enabled else None,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            metadata_recovery_strategy=cfg.metadata_recovery_strategy,
            metadata_recovery_rebootstrap_trigger_ms=cfg.metadata_recovery_rebootstrap_trigger_ms,
            forget_topics=functools.partial(forget_idle_topics, self._acc, self._sticky),
            security=cfg.security,
        )
        try:
            await client.bootstrap(self._max_block)
            if self._closed:
                raise errors.ProducerClosedError("close() was called while start() was connecting")
        except BaseException:
            await client.close()
            self._unbind_loop()
            raise
        self._client = client
        loop = self._bind_loop()
        self._acc.loop = loop  # where the records' handles run their callbacks
        seq = SequenceState() if cfg.idempotent else None
        if cfg.transactional_id is not None:
            assert seq is not None  # validate() makes transactional producers idempotent
            self._txn = TransactionManager(
                client,
                seq,
                transactional_id=cfg.transactional_id,
                transaction_timeout_ms=cfg.transaction_timeout_ms,
                max_block_ms=cfg.max_block_ms,
                retry_backoff_ms=cfg.retry_backoff_ms,
                wake_sender=self._wake_sender,
            )
        self._sender = Sender(
            cfg, client, self._acc, self._pool, seq, self._txn,
            self._metrics if cfg.metrics_enabled else None,
        )
        self._sender.start()
        self._admission = Admission(
            accumulator=self._acc, pool=self._pool, sticky=self._sticky, client=client,
            sender=self._sender, txn=self._txn, shortcut=self._shortcut,
            partitioner=cfg.partitioner,
            ignore_keys=cfg.partitioner_ignore_keys, max_block=self._max_block,
            metadata_wait=self._metadata_wait, fills_lanes=not self._serializing,
        )
        self._bulk = BulkAppender(
            cfg, client, self._admission, self._sticky, self._txn,
            self._sender.wakeup, self._check_open,
            self._metadata_wait,
        )
        # The lanes wake the sender for a batch they fill, as Admission.place does.
        self._lane = UnkeyedLane(
            self._sticky, self._pool, client, self._max_unkeyed,
            self._sender.wakeup,
        )
        if cfg.partitioner is None and not cfg.partitioner_ignore_keys and not self._serializing:
            # Only where the full path would hash the key to its partition too.
            self._keyed_lane = KeyedLane(
                self._acc.queues, self._pool, client, self._max_unkeyed,
                self._sender.wakeup,
            )
        self._shortcut.lane, self._shortcut.keyed_lane = self._lane, self._keyed_lane
        self._started = True
        self._plain = self._txn is None

    def _wake_sender(self) -> None:
        if self._sender is not None:
            self._sender.wakeup()

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
            if self._client is not None:
                # An enqueue() waiting for metadata fails now, not max_block_ms later.
                self._client.fail_metadata_waiters(
                    errors.ProducerClosedError("close() was called while waiting for metadata")
                )
            if self._sender is None or self._client is None:
                return
            # Shielded: a close() that is itself cancelled still stops the
            # sender and the connections instead of leaving them running.
            await asyncio.shield(self._shutdown(timeout))

    async def _shutdown(self, timeout: float | None) -> None:
        assert self._sender is not None and self._client is not None
        outcome: BaseException | None = None
        try:
            started = time.monotonic()
            outcome = await self._end_open_transaction(timeout)
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - started))
            self._acc.closing = True
            self._sender.wakeup()
            done = await self._wait_batches(list(self._acc.incomplete), timeout)
            if not done:
                self._sender.abort(
                    errors.KafkaTimeoutError(
                        f"the producer was closed with a timeout of {timeout} s before "
                        f"this record was delivered"
                    )
                )
        finally:
            await self._sender.stop()
            # Anything left (a request cancelled by stop) still resolves.
            self._sender.abort(
                errors.ProducerClosedError("close() ended before this record was delivered")
            )
            await self._client.close()
        if outcome is not None:
            raise outcome

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed.

        Raises KafkaTimeoutError if ``timeout`` seconds pass first (the records
        stay pending). Failures are reported through each record's future.
        """
        self._check_open()
        if self._sender is None:
            return
        self._acc.flushing += 1
        try:
            self._sender.wakeup()
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
