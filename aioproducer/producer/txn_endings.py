"""How a producer ends a transaction: the flush before a commit or prepare, the
abort, and the ending of one left open at close.

Functions of the parts they act on (the accumulator, the sender, the
transaction manager), shared by the transaction API
(:mod:`.transactions_api`) and close (:mod:`.lifecycle`). The protocol and the
state machine stay in :class:`~aioproducer.engine.transactions.TransactionManager`.

Invariants:

* a commit sends EndTxn(commit) only after every record of the transaction
  was acknowledged; a failed record makes it raise, and the transaction must
  be aborted;
* an abort first fails the records not yet sent (TransactionAbortedError),
  waits for those in flight, then sends EndTxn(abort);
* every wait is bounded by ``max_block_ms`` (or close's ``timeout``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from .. import errors

if TYPE_CHECKING:
    from ..engine.accumulator import RecordAccumulator
    from ..engine.sender import Sender
    from ..engine.transactions import TransactionManager
    from ..telemetry.logs import ClientLogger

__all__ = ["abort_transaction", "end_open_transaction", "flush_transaction", "wait_batches"]


async def wait_batches(acc: RecordAccumulator, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: no bound) for the batches incomplete
    now to be decided; whether they all were."""
    waiters = [b.done_waiter() for b in list(acc.incomplete) if not b.done]
    if not waiters:
        return True
    _done, pending = await asyncio.wait(waiters, timeout=timeout)
    for fut in pending:
        fut.cancel()
    return not pending


async def flush_transaction(
    txn: TransactionManager, acc: RecordAccumulator, sender: Sender, max_block_ms: int, what: str
) -> None:
    """Flush the open transaction's records: the first half of commit and prepare
    (``what``); raise the failure that made the transaction abortable."""
    txn.start_commit(prepare=what == "prepare")
    acc.flushing += 1
    try:
        sender.wakeup()
        if not await wait_batches(acc, max_block_ms / 1000):
            raise errors.KafkaTimeoutError(
                f"{what} could not flush the transaction's records within "
                f"{max_block_ms} ms; call {what}_transaction() again or abort"
            )
    finally:
        acc.flushing -= 1
    if txn.state is not txn.state.COMMITTING:
        txn.start_commit()  # raises the failure that made the transaction abortable


async def abort_transaction(
    txn: TransactionManager, acc: RecordAccumulator, sender: Sender, max_block_ms: int
) -> None:
    """Abort: unsent records fail with TransactionAbortedError, those in flight are
    waited for, then EndTxn(abort)."""
    txn.start_abort()
    sender.abort_queued(
        errors.TransactionAbortedError("the transaction was aborted before this record was sent")
    )
    if not await wait_batches(acc, max_block_ms / 1000):
        raise errors.KafkaTimeoutError(
            f"records of the aborted transaction still in flight after "
            f"{max_block_ms} ms; call abort_transaction() again"
        )
    await txn.end(commit=False)


async def _commit(
    txn: TransactionManager, acc: RecordAccumulator, sender: Sender, max_block_ms: int
) -> None:
    await flush_transaction(txn, acc, sender, max_block_ms, "commit")
    await txn.end(commit=True)


async def end_open_transaction(
    txn: TransactionManager,
    acc: RecordAccumulator,
    sender: Sender,
    log: ClientLogger,
    max_block_ms: int,
    timeout: float | None,
) -> BaseException | None:
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
    state = txn.state
    commit_error: BaseException | None = None
    deadline = None if timeout is None else time.monotonic() + timeout
    if state is state.COMMITTING and not txn.preparing:
        log.info("finishing on close the commit of %r that timed out", txn.transactional_id)
        try:
            await asyncio.wait_for(_commit(txn, acc, sender, max_block_ms), timeout)
            return None
        except (errors.KafkaError, asyncio.TimeoutError) as exc:
            commit_error = exc
            log.warning("the commit could not finish on close (%s): aborting", exc)
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
        log.info("aborting the incomplete transaction of %r on close", txn.transactional_id)
    try:
        # What the commit attempt left of close's bound; the abort gets a
        # moment even at 0, to send what it can.
        left = None if deadline is None else max(0.001, deadline - time.monotonic())
        await asyncio.wait_for(abort_transaction(txn, acc, sender, max_block_ms), left)
    except (errors.KafkaError, asyncio.TimeoutError) as exc:
        log.warning("aborting the transaction on close failed: %s", exc)
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
