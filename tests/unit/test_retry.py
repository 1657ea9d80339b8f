"""The retry policy as a table: (error, attempts, time left) -> action."""

from __future__ import annotations

import pytest

from aioproducer import errors
from aioproducer.engine.retry import (
    Action,
    RetryConfig,
    Written,
    classify,
    retry_backoff,
    written_after,
)

CFG = RetryConfig(retries=5, retry_backoff_ms=100, retry_backoff_max_ms=1000)


@pytest.mark.parametrize(
    ("error", "attempts", "action", "refresh", "error_type"),
    [
        (None, 0, Action.COMPLETE, False, None),
        (errors.NotLeaderOrFollowerError("x"), 0, Action.RETRY, True, None),
        (errors.UnknownTopicOrPartitionError("x"), 2, Action.RETRY, True, None),
        (errors.RequestTimedOutError("x"), 0, Action.RETRY, False, None),
        (errors.ConnectionLostError("x"), 0, Action.RETRY, True, None),
        (errors.NotEnoughReplicasError("x"), 4, Action.RETRY, False, None),
        # retries used up: fail with the cause itself
        (errors.NotEnoughReplicasError("x"), 5, Action.FAIL, False, errors.NotEnoughReplicasError),
        (errors.RecordTooLargeError("x"), 0, Action.FAIL, False, errors.RecordTooLargeError),
        (errors.TopicAuthorizationFailedError("x"), 0, Action.FAIL, False, None),
        (errors.InvalidTopicError("x"), 0, Action.FAIL, False, errors.InvalidTopicError),
        (errors.CorruptResponseError("x"), 0, Action.FAIL, False, None),
    ],
)
def test_classify(error, attempts, action, refresh, error_type) -> None:  # type: ignore[no-untyped-def]
    out = classify(error, attempts=attempts, config=CFG, rand=0.5)
    assert out.action is action
    assert out.refresh_metadata is refresh
    if error_type is not None:
        assert isinstance(out.error, error_type)
    if action is Action.RETRY:
        assert 0 < out.backoff <= 1.0


def test_backoff_grows_to_the_max_with_bounded_jitter() -> None:
    mids = [retry_backoff(a, 100, 1000, 0.5) for a in range(8)]
    assert mids[:4] == [0.1, 0.2, 0.4, 0.8]
    assert mids[4:] == [1.0] * 4
    assert retry_backoff(0, 100, 1000, 0.0) == pytest.approx(0.08)
    assert retry_backoff(0, 100, 1000, 0.999) == pytest.approx(0.12, abs=1e-3)
    assert all(retry_backoff(a, 100, 1000, 0.999) <= 1.0 for a in range(40))
    assert retry_backoff(3, 200, 100, 0.5) == 0.2  # max below base: constant


@pytest.mark.parametrize(
    ("error", "first", "action", "bump"),
    [
        (errors.DuplicateSequenceNumberError("x"), True, Action.COMPLETE, False),
        (errors.OutOfOrderSequenceNumberError("x"), False, Action.RETRY, False),
        (errors.OutOfOrderSequenceNumberError("x"), True, Action.RETRY, True),
        (errors.UnknownProducerIdError("x"), True, Action.RETRY, True),
        (errors.InvalidProducerEpochError("x"), False, Action.RETRY, True),
        (errors.NotLeaderOrFollowerError("x"), True, Action.RETRY, False),
        (errors.RecordTooLargeError("x"), True, Action.FAIL, False),
    ],
)
def test_classify_idempotent(error, first, action, bump) -> None:  # type: ignore[no-untyped-def]
    out = classify(
        error,
        attempts=0,
        config=CFG,
        rand=0.5,
        idempotent=True,
        first_pending=first,
    )
    assert (out.action, out.bump_epoch) == (action, bump)


def test_sequence_errors_are_final_without_idempotence() -> None:
    for error in (
        errors.DuplicateSequenceNumberError("x"),
        errors.OutOfOrderSequenceNumberError("x"),
    ):
        out = classify(error, attempts=0, config=CFG, rand=0.5)
        assert out.action is Action.FAIL


def test_reconnect_delay_grows_with_failures_and_jitters_within_20_percent() -> None:
    from aioproducer.net.client import reconnect_delay

    assert reconnect_delay(0, 50, 1000, 0.5) == 0.0
    mids = [reconnect_delay(n, 50, 1000, 0.5) for n in range(1, 8)]
    assert mids == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert reconnect_delay(3, 50, 1000, 0.0) == pytest.approx(0.16)
    assert reconnect_delay(3, 50, 1000, 0.999) == pytest.approx(0.24, abs=1e-3)


@pytest.mark.parametrize(
    ("code", "written"),
    [
        (None, Written.MAYBE),  # no answer: connection lost or client-side timeout
        (errors.NotEnoughReplicasAfterAppendError.code, Written.MAYBE),  # appended
        (errors.RequestTimedOutError.code, Written.MAYBE),
        (errors.NetworkExceptionError.code, Written.MAYBE),
        (errors.NotLeaderOrFollowerError.code, Written.MAYBE),  # after append, acks=all
        (errors.KafkaStorageError.code, Written.MAYBE),
        (errors.UnknownServerError.code, Written.MAYBE),
        (9999, Written.MAYBE),  # unknown: the safe side
        (errors.NotEnoughReplicasError.code, Written.NO),  # checked before the append
        (errors.RecordTooLargeError.code, Written.NO),
        (errors.CorruptRecordError.code, Written.NO),
        (errors.InvalidProducerEpochError.code, Written.NO),
        (errors.OutOfOrderSequenceNumberError.code, Written.REFUSED_SEQUENCE),
        (errors.UnknownProducerIdError.code, Written.REFUSED_SEQUENCE),
    ],
)
def test_whether_an_answer_leaves_the_batch_possibly_written(
    code: int | None, written: Written
) -> None:
    assert written_after(code) is written


def test_too_large_batch_of_several_records_is_split_a_single_record_fails() -> None:
    cfg = RetryConfig(retries=5, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    for error in (errors.RecordTooLargeError("x"), errors.RecordListTooLargeError("x")):
        split = classify(error, attempts=0, config=cfg, rand=0.5, idempotent=True, splittable=True)
        assert split.action is Action.SPLIT
        single = classify(
            error, attempts=0, config=cfg, rand=0.5, idempotent=True, splittable=False
        )
        assert single.action is Action.FAIL and single.error is error


def test_node_preference_is_least_loaded_first() -> None:
    from aioproducer.net.node_selection import node_preference

    order = [3, 1, 2, 4, 5]
    # 1 and 4 idle and live, 2 busy (3 in flight), 3 busy (1), 5 connecting; nothing else may connect.
    live = {1: 0, 2: 3, 3: 1, 4: 0}
    assert node_preference(order, live, connecting=[5], can_connect=[]) == [1, 4, 5, 3, 2]
    # A node we may connect to ranks before busy connections (a stalled broker
    # keeps its requests until they time out), after idle ones.
    assert node_preference([2, 6], {2: 1}, connecting=[], can_connect=[6]) == [6, 2]
    # Nodes neither live, connecting nor connectable (backing off) are left out.
    assert node_preference([7, 8], {}, connecting=[], can_connect=[8]) == [8]
    assert node_preference([7], {}, connecting=[], can_connect=[]) == []
