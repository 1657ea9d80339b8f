"""The transaction coordinator's request bodies and the AddPartitionsToTxn answer, without a coordinator."""

from __future__ import annotations

from aioproducer import errors
from aioproducer.engine.txn_requests import (
    add_partitions_request,
    bump_epoch_request,
    partitions_added,
)
from aioproducer.protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)


def _answer(codes: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), code in codes.items():
        topics.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=code)
        )
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(name=t, results_by_partition=p) for t, p in topics.items()
        ]
    )


def test_a_request_groups_partitions_by_topic_in_order() -> None:
    body = add_partitions_request("tx", 7, 3, {("b", 1), ("a", 2), ("a", 0)})
    assert body.v3_and_below_transactional_id == "tx"
    assert (body.v3_and_below_producer_id, body.v3_and_below_producer_epoch) == (7, 3)
    assert [(t.name, t.partitions) for t in body.v3_and_below_topics] == [("a", [0, 2]), ("b", [1])]


def test_an_answer_says_what_was_added_what_to_retry_and_what_was_refused() -> None:
    retriable = errors.CoordinatorLoadInProgressError.code
    refused_code = errors.TopicAuthorizationFailedError.code
    added, retry, refused = partitions_added(
        _answer({("a", 0): 0, ("a", 1): retriable, ("b", 0): refused_code, ("b", 1): 0})
    )
    # Partitions added before and after a refused one all count as added.
    assert sorted(added) == [("a", 0), ("b", 1)]
    assert retry
    assert isinstance(refused, errors.TopicAuthorizationFailedError)
    assert "AddPartitionsToTxn b-0" in str(refused)
    assert partitions_added(_answer({("a", 0): 0})) == ([("a", 0)], False, None)


def test_an_epoch_bump_names_the_producer_from_version_3() -> None:
    body = bump_epoch_request("tx", 60_000, 7, 3)
    assert (body(3).producer_id, body(3).producer_epoch) == (7, 3)
    assert (body(2).producer_id, body(2).producer_epoch) == (-1, -1)
    assert body(2).transaction_timeout_ms == 60_000
