"""Two-phase commit across producers: what a prepare hands over, and its completion elsewhere.

A transactional producer's ``prepare_transaction()`` flushes a transaction and
leaves it open on the coordinator (as KIP-939's ``prepareTransaction``, without
its broker-side support), describing it as a :class:`PreparedTransaction`. Any
started producer, in any process, then commits or aborts it with EndTxn under
that producer id and epoch (:func:`end_prepared`); the producer that prepared it
completes it itself with ``TransactionManager.complete_prepared``.
"""

from __future__ import annotations

import time

from .. import errors
from ..protocol.apis import COORDINATOR_KEY_TRANSACTION, END_TXN
from ..protocol.generated import EndTxnRequest
from ..types import PreparedTransaction
from .txn_coordinator import CoordinatorLink

__all__ = ["CompletedOutcomes", "PreparedTransaction", "end_prepared", "not_completed_error"]


def not_completed_error(
    transactional_id: str,
    identity: tuple[int, int],
    commit: bool,
    ended_otherwise: bool,
    id_expired: bool,
    after: str,
) -> errors.TransactionNotCompletedError:
    """Why a producer's own prepared transaction could not be completed as asked:
    ended the other way (``ended_otherwise``), or aborted by a newer producer or the
    coordinator's timeout; ``after`` says what becomes of the producer."""
    gone = (
        f"it was already {'aborted' if commit else 'committed'}"
        if ended_otherwise
        else "it was aborted by a newer producer with this id or by the coordinator "
        "after transaction_timeout_ms"
    )
    if id_expired:
        gone += ", and the id has expired since (transactional.id.expiration.ms)"
    return errors.TransactionNotCompletedError(
        f"cannot {'commit' if commit else 'abort'} the prepared transaction of "
        f"{transactional_id!r} (producer id {identity[0]}, epoch {identity[1]}): {gone}{after}"
    )


class CompletedOutcomes:
    """How a producer completed its own prepared transactions (True: committed),
    by producer id and epoch, the most recent ``kept``: a replayed completion is
    answered with the real outcome."""

    def __init__(self, transactional_id: str, kept: int = 64) -> None:
        self._transactional_id = transactional_id
        self._kept = kept
        self._by_identity: dict[tuple[int, int], bool] = {}

    def remember(self, identity: tuple[int, int], committed: bool) -> None:
        self._by_identity[identity] = committed
        while len(self._by_identity) > self._kept:
            del self._by_identity[next(iter(self._by_identity))]

    def of(self, prepared: PreparedTransaction) -> bool | None:
        if prepared.transactional_id != self._transactional_id:
            return None
        return self._by_identity.get((prepared.producer_id, prepared.producer_epoch))


async def end_prepared(link: CoordinatorLink, prepared: PreparedTransaction, commit: bool) -> None:
    """EndTxn for a transaction another producer prepared, through ``link``.

    Raises TransactionNotCompletedError when the transaction is no longer open:
    a fencing answer means a newer producer with the same id initialized
    (aborting it), the coordinator aborted it after its timeout, or it was
    completed and its producer went on to a later epoch
    (``TransactionManager.complete_prepared``); INVALID_TXN_STATE means it
    already ended the other way; INVALID_PRODUCER_ID_MAPPING that the id
    expired (``transactional.id.expiration.ms``) after the transaction ended. Retried EndTxn of the same outcome succeeds
    again (the coordinator answers a completed transaction's retry).
    """
    if prepared.empty:
        return
    body = EndTxnRequest(
        transactional_id=prepared.transactional_id,
        producer_id=prepared.producer_id,
        producer_epoch=prepared.producer_epoch,
        committed=commit,
    )
    what = "commit" if commit else "abort"
    try:
        await link.request(
            END_TXN,
            body,
            prepared.transactional_id,
            COORDINATOR_KEY_TRANSACTION,
            time.monotonic() + link.max_block,
            v2=prepared.transaction_version >= 2,
        )
    except (
        errors.ProducerFencedError,
        errors.InvalidTxnStateError,
        errors.InvalidProducerIdMappingError,  # the id expired since: its transaction is gone
    ) as exc:
        raise errors.TransactionNotCompletedError(
            f"cannot {what} the prepared transaction of {prepared.transactional_id!r} "
            f"(producer id {prepared.producer_id}, epoch {prepared.producer_epoch}): it is no "
            f"longer open (aborted by a newer producer with that id or by the coordinator after "
            f"transaction_timeout_ms, ended the other way, or completed already by its producer, "
            f"which moved on to a later transaction) ({exc})"
        ) from None
