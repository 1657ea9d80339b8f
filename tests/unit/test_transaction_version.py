"""Transactions v1 or v2 (KIP-890): version choice, feature reading, epoch adoption."""

from __future__ import annotations

import pytest

from aioproducer import errors
from aioproducer.engine.idempotence import SequenceState
from aioproducer.engine.transaction_version import (
    choose_version,
    end_txn_identity,
    transaction_v2_enabled,
)
from aioproducer.engine.transactions import TransactionManager, TxnState
from aioproducer.protocol.apis import ADD_OFFSETS_TO_TXN, END_TXN, PRODUCE, TXN_OFFSET_COMMIT


@pytest.mark.parametrize(
    ("features", "enabled"),
    [
        ({}, False),  # Kafka 3.x, Tansu, MockCluster: no feature
        ({"transaction.version": 0}, False),
        ({"transaction.version": 1}, False),
        ({"transaction.version": 2}, True),
        ({"transaction.version": 3}, True),
        ({"metadata.version": 27}, False),
    ],
)
def test_v2_follows_the_finalized_feature(features: dict[str, int], enabled: bool) -> None:
    assert transaction_v2_enabled(features) is enabled


@pytest.mark.parametrize(
    ("api_key", "negotiated", "v2", "expected"),
    [
        (PRODUCE.key, 12, False, 11),  # v1: v12 would change the semantics
        (PRODUCE.key, 12, True, 12),
        (PRODUCE.key, 9, False, 9),
        (END_TXN.key, 5, False, 4),
        (END_TXN.key, 5, True, 5),
        (END_TXN.key, 3, False, 3),  # Tansu-era brokers
        (TXN_OFFSET_COMMIT.key, 5, False, 4),
        (TXN_OFFSET_COMMIT.key, 5, True, 5),
        (ADD_OFFSETS_TO_TXN.key, 4, False, 4),  # v4 only announces TRANSACTION_ABORTABLE
    ],
)
def test_version_choice(api_key: int, negotiated: int, v2: bool, expected: int) -> None:
    assert choose_version(api_key, negotiated, v2=v2) == expected


@pytest.mark.parametrize(
    ("api_key", "negotiated"), [(PRODUCE.key, 11), (END_TXN.key, 4), (TXN_OFFSET_COMMIT.key, 4)]
)
def test_v2_refuses_a_broker_below_the_v2_versions(api_key: int, negotiated: int) -> None:
    with pytest.raises(errors.UnsupportedVersionError, match="transaction.version"):
        choose_version(api_key, negotiated, v2=True)


def test_our_caps_reach_the_v2_versions() -> None:
    assert (PRODUCE.max_version, END_TXN.max_version, TXN_OFFSET_COMMIT.max_version) == (12, 5, 5)


@pytest.mark.parametrize(
    ("response", "adopted"),
    [
        ((-1, -1), None),  # EndTxn v0-v4: nothing to adopt
        ((7, 4), (7, 4)),  # v5: the bumped epoch
        ((8, 0), (8, 0)),  # v5 after the epoch overflowed: a new producer id
        ((7, 3), None),  # unchanged
    ],
)
def test_end_txn_identity(response: tuple[int, int], adopted: tuple[int, int] | None) -> None:
    assert end_txn_identity((7, 3), *response) == adopted


def _manager(v2: bool) -> TransactionManager:
    txn = TransactionManager(
        client=None,  # type: ignore[arg-type]  # no I/O in these tests
        seq=SequenceState(),
        transactional_id="t",
        transaction_timeout_ms=1000,
        max_block_ms=1000,
        retry_backoff_ms=10,
    )
    txn.state = TxnState.IN_TRANSACTION
    txn.v2 = v2
    return txn


def test_v2_partition_is_in_the_transaction_at_once() -> None:
    txn = _manager(v2=True)
    txn.add_partition(("t", 0))  # no loop needed: no AddPartitionsToTxn task
    assert txn.partition_added(("t", 0))
    assert txn.unadded() == set()


def test_transaction_abortable_makes_the_transaction_abortable() -> None:
    txn = _manager(v2=False)
    txn.batch_failed(errors.TransactionAbortableError("produce"))
    assert txn.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(errors.IllegalStateError, match="abort"):
        txn.start_commit()
    txn.start_abort()  # the user aborts and goes on
    assert txn.state is TxnState.ABORTING
