"""The transaction coordinator's requests, and the AddPartitionsToTxn answer, as pure functions.

:class:`~.transactions.TransactionManager` decides when each round trip is due;
what goes into each request (KIP-98's InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn) and what an AddPartitionsToTxn
answer says about each partition are here, where they are read and tested
without a coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .. import errors
from ..protocol.generated import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from ..protocol.generated.add_partitions_to_txn import AddPartitionsToTxnTopic
from ..protocol.generated.txn_offset_commit import TxnOffsetCommitRequestTopic
from .txn_coordinator import RETRY_CODES
from .txn_offsets import TopicPartitions

__all__ = [
    "add_offsets_request",
    "add_partitions_request",
    "bump_epoch_request",
    "end_txn_request",
    "init_producer_id_request",
    "offset_commit_request",
    "partitions_added",
]

TopicPartition = tuple[str, int]


def init_producer_id_request(transactional_id: str, timeout_ms: int) -> InitProducerIdRequest:
    """A producer id and epoch for ``transactional_id``; fences its older producers."""
    return InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=timeout_ms
    )


def bump_epoch_request(
    transactional_id: str, timeout_ms: int, producer_id: int, epoch: int
) -> Callable[[int], InitProducerIdRequest]:
    """InitProducerId naming the current producer, built for the version the coordinator speaks.

    v3+ names the producer (KIP-360); below, the coordinator bumps the epoch
    of the transactional id all the same.
    """

    def body(version: int) -> InitProducerIdRequest:
        known = version >= 3
        return InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=timeout_ms,
            producer_id=producer_id if known else -1,
            producer_epoch=epoch if known else -1,
        )

    return body


def add_partitions_request(
    transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
) -> AddPartitionsToTxnRequest:
    """AddPartitionsToTxn for ``partitions`` (v0-3, the client's versions: one transaction
    named at top level)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in topics.items()
        ],
    )


def partitions_added(
    response: AddPartitionsToTxnResponse,
) -> tuple[list[TopicPartition], bool, errors.BrokerResponseError | None]:
    """The partitions the answer added, whether any is to be sent again, and the
    error of the first partition refused for good (None if none was)."""
    added: list[TopicPartition] = []
    retry = False
    refused: errors.BrokerResponseError | None = None
    for result in response.results_by_topic_v3_and_below:
        for part in result.results_by_partition:
            code = part.partition_error_code
            if code == 0:
                added.append((result.name, part.partition_index))
            elif code in RETRY_CODES:
                retry = True
            elif refused is None:
                refused = errors.error_for_code(code)(
                    f"AddPartitionsToTxn {result.name}-{part.partition_index}"
                )
    return added, retry, refused


def add_offsets_request(
    transactional_id: str, producer_id: int, epoch: int, group_id: str
) -> AddOffsetsToTxnRequest:
    """AddOffsetsToTxn: the group's offsets partition joins the transaction (v1 only)."""
    return AddOffsetsToTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        group_id=group_id,
    )


def offset_commit_request(
    transactional_id: str, group_id: str, producer_id: int, epoch: int, topics: TopicPartitions
) -> TxnOffsetCommitRequest:
    """TxnOffsetCommit of ``topics`` (see :func:`.txn_offsets.offset_commit_topics`)."""
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        topics=[TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in topics.items()],
    )


def end_txn_request(
    transactional_id: str, producer_id: int, epoch: int, commit: bool
) -> EndTxnRequest:
    """EndTxn: commit or abort the transaction of this producer id and epoch."""
    return EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=commit,
    )
