"""The transaction state machine's rules, without a broker or a loop."""

from __future__ import annotations

import pytest

from aioproducer import errors
from aioproducer.engine.idempotence import SequenceState
from aioproducer.engine.transactions import TransactionManager, TxnState


def manager(state: TxnState) -> TransactionManager:
    txn = TransactionManager(
        client=None,  # type: ignore[arg-type]  # no I/O in these tests
        seq=SequenceState(),
        transactional_id="t",
        transaction_timeout_ms=1000,
        max_block_ms=1000,
        retry_backoff_ms=10,
    )
    txn.state = state
    return txn


@pytest.mark.parametrize(
    ("state", "allowed"),
    [
        (TxnState.UNINITIALIZED, False),
        (TxnState.READY, False),
        (TxnState.IN_TRANSACTION, True),
        (TxnState.ABORTABLE_ERROR, False),
    ],
)
def test_send_only_inside_a_transaction(state: TxnState, allowed: bool) -> None:
    txn = manager(state)
    if allowed:
        txn.check_can_send()
    else:
        with pytest.raises(errors.IllegalStateError):
            txn.check_can_send()


def test_begin_commit_abort_transitions() -> None:
    txn = manager(TxnState.READY)
    txn.begin()
    assert txn.state is TxnState.IN_TRANSACTION
    with pytest.raises(errors.IllegalStateError, match="cannot begin"):
        txn.begin()
    txn.start_commit()
    assert txn.state is TxnState.COMMITTING
    txn = manager(TxnState.READY)
    with pytest.raises(errors.IllegalStateError, match="no transaction"):
        txn.start_commit()
    with pytest.raises(errors.IllegalStateError, match="no transaction"):
        txn.start_abort()
    with pytest.raises(errors.IllegalStateError, match="init_transactions"):
        manager(TxnState.UNINITIALIZED).begin()


def test_a_failed_batch_makes_the_transaction_abortable_only() -> None:
    txn = manager(TxnState.IN_TRANSACTION)
    txn.batch_failed(errors.RecordTooLargeError("x"))
    assert txn.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(errors.IllegalStateError, match="abort_transaction"):
        txn.start_commit()
    txn.start_abort()
    assert txn.state is TxnState.ABORTING


def test_a_stale_epoch_from_a_partition_leader_is_abortable_with_an_epoch_bump() -> None:
    """KIP-588: INVALID_PRODUCER_EPOCH on Produce may be a timed-out transaction, not a
    zombie; the abort (EndTxn, then InitProducerId) tells which."""
    txn = manager(TxnState.IN_TRANSACTION)
    returned = txn.batch_failed(errors.InvalidProducerEpochError("x"))
    assert isinstance(returned, errors.InvalidProducerEpochError)
    assert "transaction_timeout_ms" in str(returned) and "abort" in str(returned)
    assert txn.state is TxnState.ABORTABLE_ERROR
    assert txn.epoch_bump_needed
    with pytest.raises(errors.IllegalStateError, match="abort_transaction"):
        txn.start_commit()
    txn.start_abort()


def test_fencing_is_fatal_and_sticky() -> None:
    txn = manager(TxnState.IN_TRANSACTION)
    txn.batch_failed(errors.ProducerFencedError("x"))
    assert txn.state is TxnState.FATAL_ERROR
    for call in (txn.check_can_send, txn.begin, txn.start_commit, txn.start_abort):
        with pytest.raises(errors.ProducerFencedError):
            call()
    # a later, ordinary failure does not turn a fenced producer abortable again
    txn.batch_failed(errors.RecordTooLargeError("x"))
    assert txn.state is TxnState.FATAL_ERROR


def test_commit_and_abort_can_be_retried_after_a_timeout() -> None:
    txn = manager(TxnState.IN_TRANSACTION)
    txn.start_commit()
    txn.start_commit()  # the first attempt timed out; the user calls again
    assert txn.state is TxnState.COMMITTING
    txn.start_abort()
    txn.start_abort()
    assert txn.state is TxnState.ABORTING
    with pytest.raises(errors.IllegalStateError):
        txn.begin()  # not before the abort has gone through
