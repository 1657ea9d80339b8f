"""TxnOffsetCommit bodies and answers, as pure functions (consume-transform-produce, KIP-98).

``send_offsets_to_transaction`` commits consumer offsets with the transaction:
the partitions go out grouped by topic, and the answer's per-partition codes
decide which are sent again (a coordinator moving or loading, a transaction
still completing, an unknown partition or a timeout) and which fail the call.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import errors
from ..protocol.generated import TxnOffsetCommitResponse
from ..protocol.generated.txn_offset_commit import TxnOffsetCommitRequestPartition
from .txn_coordinator import RETRY_CODES

__all__ = ["offset_commit_topics", "offsets_to_retry"]

TopicPartitions = dict[str, list[TxnOffsetCommitRequestPartition]]
# Per-partition TxnOffsetCommit answers that are sent again (besides RETRY_CODES).
_OFFSET_RETRY_CODES = frozenset(
    {errors.UnknownTopicOrPartitionError.code, errors.RequestTimedOutError.code}
)


def offset_commit_topics(offsets: Mapping[tuple[str, int], int]) -> TopicPartitions:
    """``{(topic, partition): next_offset}`` as TxnOffsetCommit's partitions per topic."""
    topics: TopicPartitions = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append(
            TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""
            )
        )
    return topics


def offsets_to_retry(
    response: TxnOffsetCommitResponse, sent: TopicPartitions, group_id: str
) -> tuple[TopicPartitions, BaseException | None]:
    """The partitions of a TxnOffsetCommit to send again, and the final error if one failed.

    Under v2 the group coordinator first checks with the transaction
    coordinator, which answers CONCURRENT_TRANSACTIONS while the previous
    transaction completes: retried, as Java's TxnOffsetCommitHandler does.
    """
    retry: TopicPartitions = {}
    for topic in response.topics:
        for part in topic.partitions:
            code = part.error_code
            if not code:
                continue
            if code in RETRY_CODES or code in _OFFSET_RETRY_CODES:
                entry = next(
                    e for e in sent.get(topic.name, ()) if e.partition_index == part.partition_index
                )
                retry.setdefault(topic.name, []).append(entry)
                continue
            return retry, errors.error_for_code(code)(
                f"TxnOffsetCommit {topic.name}-{part.partition_index} for group {group_id!r}"
            )
    return retry, None
