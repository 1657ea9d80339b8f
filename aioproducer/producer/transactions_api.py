"""The transaction calls of a :class:`~aioproducer.Producer` (Java's KafkaProducer transactions).

:class:`TransactionsAPI` carries out ``init_transactions``,
``begin_transaction``, ``commit_transaction``, ``abort_transaction``,
``send_offsets_to_transaction``, ``transaction()``, and the two-phase
``prepare_transaction``/``complete_transaction``; ``Producer``'s methods of
those names (where their documentation is) delegate to it. The flush and abort
steps are :mod:`.txn_endings`; the protocol and the state machine stay in
:class:`~aioproducer.engine.transactions.TransactionManager`.

Invariants:

* every call needs a started, open producer configured with a
  ``transactional_id`` (else IllegalStateError or ProducerClosedError, at
  once), but ``complete_transaction``, which any started producer may make;
* a prepare flushes as a commit does, then leaves the transaction open; close
  does not abort it;
* every wait is bounded by ``max_block_ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .. import errors
from ..engine.two_phase import end_prepared
from ..engine.txn_coordinator import CoordinatorLink
from ..types import PreparedTransaction
from .txn_endings import abort_transaction, flush_transaction

if TYPE_CHECKING:
    from ..engine.transactions import TransactionManager
    from ..telemetry.logs import ClientLogger
    from .lifecycle import Lifecycle
    from .running import Parts, Running

__all__ = ["TransactionsAPI"]


class TransactionsAPI:
    """The transaction calls of one producer, over its lifecycle and parts."""

    __slots__ = ("_life", "_log", "_parts")

    def __init__(self, life: Lifecycle, parts: Parts, log: ClientLogger) -> None:
        self._life = life
        self._parts = parts
        self._log = log

    def _transactions(self) -> tuple[TransactionManager, Running]:
        running = self._life.run()
        txn = running.txn
        if txn is None:
            raise errors.IllegalStateError(
                "transactions need a transactional_id in the producer configuration"
            )
        return txn, running

    async def init(self) -> None:
        """Get the producer id for the ``transactional_id``, fencing older producers."""
        txn, running = self._transactions()
        await txn.init()
        running.sender.wakeup()

    def begin(self) -> None:
        """Start a transaction."""
        self._transactions()[0].begin()

    async def commit(self) -> None:
        """Flush, then commit."""
        txn, running = self._transactions()
        await flush_transaction(
            txn, self._parts.acc, running.sender, self._parts.config.max_block_ms, "commit"
        )
        await txn.end(commit=True)

    async def prepare(self) -> PreparedTransaction:
        """Flush, then leave the transaction open (the first phase of a two-phase commit)."""
        txn, running = self._transactions()
        await flush_transaction(
            txn, self._parts.acc, running.sender, self._parts.config.max_block_ms, "prepare"
        )
        return await txn.prepare()

    async def complete(self, prepared: PreparedTransaction, *, commit: bool) -> None:
        """Commit or abort a prepared transaction, this producer's or another's."""
        running = self._life.run()
        own = running.txn
        if own is not None:
            if own.matches(prepared):
                await own.complete_prepared(commit)
                return
            done = own.completed_outcome(prepared)
            if done is not None:
                if done == commit:
                    return  # a replay: it is complete, the way it asks
                raise errors.TransactionNotCompletedError(
                    f"cannot {'commit' if commit else 'abort'} the prepared transaction of "
                    f"{prepared.transactional_id!r} (producer id {prepared.producer_id}, epoch "
                    f"{prepared.producer_epoch}): this producer already "
                    f"{'aborted' if commit else 'committed'} it"
                )
        config = self._parts.config
        link = CoordinatorLink(
            running.client,
            self._log,
            prepared.transactional_id,
            config.max_block_ms / 1000,
            config.retry_backoff_ms / 1000,
        )
        await end_prepared(link, prepared, commit)

    async def abort(self) -> None:
        """Abort: unsent records fail with TransactionAbortedError, then EndTxn(abort)."""
        txn, running = self._transactions()
        await abort_transaction(
            txn, self._parts.acc, running.sender, self._parts.config.max_block_ms
        )

    async def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str) -> None:
        """Commit consumer offsets with the transaction."""
        await self._transactions()[0].send_offsets(offsets, group_id)

    async def abort_quietly(self) -> None:
        """Abort what ``async with producer.transaction()`` left open; a failure is logged."""
        running = self._life.running
        txn = None if running is None else running.txn
        if txn is None or txn.state in (txn.state.FATAL_ERROR, txn.state.READY):
            return
        try:
            await self.abort()
        except (errors.KafkaError, asyncio.TimeoutError) as exc:
            self._log.warning("aborting the transaction failed: %s", exc)
