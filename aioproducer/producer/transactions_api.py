"""The transaction API of :class:`~aioproducer.Producer` (Java's KafkaProducer transactions).

:class:`TransactionalProducerMixin` holds the public transaction methods
(``init_transactions``, ``begin_transaction``, ``commit_transaction``,
``abort_transaction``, ``send_offsets_to_transaction``, ``transaction()``, and
the two-phase ``prepare_transaction``/``complete_transaction``) and
the abort of a transaction left open on close. ``Producer`` inherits them, so
they are methods of ``Producer`` itself; the protocol and the state machine
stay in :mod:`.transactions` (:class:`TransactionManager`).

Invariants:

* every method but the close-time abort needs a started, open producer
  configured with a ``transactional_id`` (else IllegalStateError or
  ProducerClosedError, at once);
* a commit sends EndTxn(commit) only after every record of the transaction
  was acknowledged; a failed record makes it raise, and the transaction must
  be aborted;
* an abort first fails the records not yet sent (TransactionAbortedError),
  waits for those in flight, then sends EndTxn(abort);
* a prepare flushes as a commit does, then leaves the transaction open; close
  does not abort it;
* every wait is bounded by ``max_block_ms`` (or close's ``timeout``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .. import errors
from ..engine.transactions import TransactionManager
from ..engine.two_phase import end_prepared
from ..engine.txn_coordinator import CoordinatorLink
from ..types import PreparedTransaction

if TYPE_CHECKING:
    from ..config import ProducerConfig
    from ..engine.accumulator import RecordAccumulator
    from ..engine.sender import Sender
    from ..logs import ClientLogger
    from .running import Running

__all__ = ["TransactionalProducerMixin"]


# The producer itself, typed without importing producer.py (which imports this module).
_P = TypeVar("_P", bound="TransactionalProducerMixin")


class TransactionalProducerMixin:
    """Transaction methods of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        config: ProducerConfig
        _log: ClientLogger
        _acc: RecordAccumulator
        _running: Running | None
        _max_block: float

        def _check_open(self) -> None: ...
        def _run(self) -> Running: ...

        def _wake_sender(self) -> None: ...

        async def _wait_batches(self, batches: list[Any], timeout: float | None) -> bool: ...

    def _transactions(self) -> TransactionManager:
        txn = self._run().txn
        if txn is None:
            raise errors.IllegalStateError(
                "transactions need a transactional_id in the producer configuration"
            )
        return txn

    async def init_transactions(self) -> None:
        """Get the producer id for ``transactional_id``, fencing older producers.

        Bounded by ``max_block_ms``. Call once, after start() and before the
        first begin_transaction().
        """
        await self._transactions().init()
        self._wake_sender()

    async def begin_transaction(self) -> None:
        """Start a transaction; records sent until commit or abort belong to it."""
        self._transactions().begin()

    async def commit_transaction(self) -> None:
        """Flush, then commit. If a record failed, raises; abort_transaction() then."""
        txn = self._transactions()
        await self._flush_transaction(txn, "commit")
        await txn.end(commit=True)

    async def prepare_transaction(self) -> PreparedTransaction:
        """Flush, then leave the transaction open for a later commit or abort.

        The first phase of a two-phase commit (as KIP-939's
        ``prepareTransaction``, without its broker-side support): pass the
        returned :class:`~aioproducer.PreparedTransaction` to
        :meth:`complete_transaction` of any started producer, in any process.
        Until then ``read_committed`` consumers wait at its first record, and
        the coordinator aborts it once ``transaction_timeout_ms`` has passed
        since it began. This producer sends nothing more until it completes
        it; closing it leaves the transaction open.
        """
        txn = self._transactions()
        await self._flush_transaction(txn, "prepare")
        return await txn.prepare()

    async def complete_transaction(self, prepared: PreparedTransaction, *, commit: bool) -> None:
        """Commit (or abort) a transaction that a producer prepared.

        Any started producer may complete it, transactional or not. Raises
        TransactionNotCompletedError if the transaction is gone (fenced by a
        newer producer with its id, timed out, or ended the other way); then
        its producer, if it is this one, goes on with a new epoch (or, fenced,
        must be closed). Completing it again the same way is harmless: on the
        producer that completed it, a no-op; elsewhere it succeeds while nothing
        newer happened to its transactional id, and is refused
        (TransactionNotCompletedError) otherwise. It never ends a later
        transaction of the same producer.
        """
        running = self._run()
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
        link = CoordinatorLink(
            running.client,
            self._log,
            prepared.transactional_id,
            self.config.max_block_ms / 1000,
            self.config.retry_backoff_ms / 1000,
        )
        await end_prepared(link, prepared, commit)

    async def _flush_transaction(self, txn: TransactionManager, what: str) -> None:
        """Flush the open transaction's records: the first half of commit and prepare."""
        txn.start_commit(prepare=what == "prepare")
        self._acc.flushing += 1
        try:
            self._wake_sender()
            if not await self._wait_batches(list(self._acc.incomplete), self._max_block):
                raise errors.KafkaTimeoutError(
                    f"{what} could not flush the transaction's records within "
                    f"{self.config.max_block_ms} ms; call {what}_transaction() again or abort"
                )
        finally:
            self._acc.flushing -= 1
        if txn.state is not txn.state.COMMITTING:
            txn.start_commit()  # raises the failure that made the transaction abortable

    async def abort_transaction(self) -> None:
        """Abort: unsent records fail with TransactionAbortedError, then EndTxn(abort)."""
        running = self._run()
        await self._abort(self._transactions(), running.sender)

    async def _abort(self, txn: TransactionManager, sender: Sender) -> None:
        txn.start_abort()
        sender.abort_queued(
            errors.TransactionAbortedError(
                "the transaction was aborted before this record was sent"
            )
        )
        if not await self._wait_batches(list(self._acc.incomplete), self._max_block):
            raise errors.KafkaTimeoutError(
                f"records of the aborted transaction still in flight after "
                f"{self.config.max_block_ms} ms; call abort_transaction() again"
            )
        await txn.end(commit=False)

    async def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group_id: str
    ) -> None:
        """Commit consumer offsets ``{(topic, partition): next_offset}`` with the transaction."""
        await self._transactions().send_offsets(offsets, group_id)

    @contextlib.asynccontextmanager
    async def transaction(self: _P) -> AsyncIterator[_P]:
        """``async with producer.transaction():`` commits on exit, aborts on an exception."""
        await self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self._abort_quietly()
            raise
        try:
            await self.commit_transaction()
        except errors.ProducerFencedError:
            raise
        except (errors.KafkaError, asyncio.TimeoutError):
            await self._abort_quietly()
            raise

    async def _abort_quietly(self) -> None:
        running = self._running
        txn = None if running is None else running.txn
        if txn is None or txn.state in (txn.state.FATAL_ERROR, txn.state.READY):
            return
        try:
            await self.abort_transaction()
        except (errors.KafkaError, asyncio.TimeoutError) as exc:
            self._log.warning("aborting the transaction failed: %s", exc)

    async def _end_open_transaction(self, timeout: float | None) -> BaseException | None:
        """On close: end a transaction left open, so that ``read_committed``
        consumers are not held back until ``transaction_timeout_ms``.

        Begun and not ended: aborted, as Java's close does. A commit that timed
        out (its EndTxn may or may not have reached the coordinator) is
        finished: flushed and committed again, which a retried EndTxn allows;
        should that fail, it is aborted. A prepare that timed out is aborted
        (nobody holds its PreparedTransaction). A prepared one is left open.
        Bounded by ``timeout`` (else by ``max_block_ms`` per round trip).
        Returns what close() raises once the producer is shut down: None when
        the transaction ended as the user last asked (or there was none),
        TransactionAbortedError when a commit had to be aborted,
        TransactionNotCompletedError when it could be ended neither way.
        """
        running = self._running
        if running is None or running.txn is None:
            return None
        txn = running.txn
        state = txn.state
        commit_error: BaseException | None = None
        deadline = None if timeout is None else time.monotonic() + timeout
        if state is state.COMMITTING and not txn.preparing:
            self._log.info(
                "finishing on close the commit of %r that timed out", txn.transactional_id
            )
            try:
                await asyncio.wait_for(self._commit_on_close(txn), timeout)
                return None
            except (errors.KafkaError, asyncio.TimeoutError) as exc:
                commit_error = exc
                self._log.warning("the commit could not finish on close (%s): aborting", exc)
                if txn.state is state.FATAL_ERROR:
                    # Fenced: a newer producer ended it, and an earlier EndTxn
                    # (commit) may have reached the coordinator first.
                    error = errors.TransactionNotCompletedError(
                        f"close() could not finish the commit of {txn.transactional_id!r}: "
                        f"{exc}; whether it committed depends on whether an earlier commit "
                        f"attempt reached the coordinator before the newer producer"
                    )
                    error.__cause__ = exc
                    return error
        elif state not in (
            state.IN_TRANSACTION,
            state.ABORTABLE_ERROR,
            state.ABORTING,
            state.COMMITTING,
        ):
            return None
        else:
            self._log.info(
                "aborting the incomplete transaction of %r on close", txn.transactional_id
            )
        try:
            # What the commit attempt left of close's bound; the abort gets a
            # moment even at 0, to send what it can.
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            await asyncio.wait_for(self._abort(txn, running.sender), left)
        except (errors.KafkaError, asyncio.TimeoutError) as exc:
            self._log.warning("aborting the transaction on close failed: %s", exc)
            tried = f"commit: {commit_error or 'timed out'}; " if commit_error is not None else ""
            error = errors.TransactionNotCompletedError(
                f"close() could not end the transaction of {txn.transactional_id!r} ({tried}abort: "
                f"{exc or 'timed out'}); unless a commit of it reached the coordinator, the "
                f"coordinator aborts it after transaction_timeout_ms"
            )
            error.__cause__ = exc
            return error
        if commit_error is None:
            return None
        return errors.TransactionAbortedError(
            f"close() could not finish the commit of the transaction of {txn.transactional_id!r} "
            f"({commit_error or 'timed out'}) and aborted it: none of its records is committed"
        )

    async def _commit_on_close(self, txn: TransactionManager) -> None:
        await self._flush_transaction(txn, "commit")
        await txn.end(commit=True)
