"""The mock's transaction coordinator APIs: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn, as generated request in, response out.

The state they act on is :mod:`.txn` (Kafka's ``TransactionCoordinator``); these
handlers only read the request fields of the version that came in and answer in
that version's shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import errors
from ...protocol.generated import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from ...protocol.generated.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
)
from ...protocol.generated.txn_offset_commit import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from .faults import RequestContext
from .log import code_of
from .state import ClusterView

__all__ = ["TV2_VERSIONS", "TXN_HANDLERS", "partition_results", "tv2", "txn_offset_commit_body"]

# With transaction.version 2 (KIP-890): the versions that carry it, and the
# TRANSACTION_ABORTABLE ones below them.
TV2_VERSIONS: dict[int, tuple[int, int]] = {0: (3, 12), 25: (0, 4), 26: (0, 5), 28: (0, 5)}

NONE = 0
UNKNOWN_TOPIC = code_of(errors.UnknownTopicOrPartitionError)
NOT_ATTEMPTED = code_of(errors.OperationNotAttemptedError)


def tv2(cluster: ClusterView, ctx: RequestContext, api_key: int) -> bool:
    """Whether this request runs transactions v2 (the feature and the version, KIP-890)."""
    return cluster.transaction_version >= 2 and ctx.api_version >= TV2_VERSIONS[api_key][1]


def _init_producer_id(
    cluster: ClusterView, ctx: RequestContext, body: InitProducerIdRequest
) -> InitProducerIdResponse:
    code, pid, epoch = cluster.coordinator.init_producer_id(
        body.transactional_id,
        body.transaction_timeout_ms,
        body.producer_id,
        body.producer_epoch,
        ctx.api_version,
    )
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
    )


def partition_results(
    topics: list[AddPartitionsToTxnTopic], codes: Callable[[str, int], int]
) -> AddPartitionsToTxnResponse:
    # v0-3 only: v4+ (one result per transaction) is broker to broker (KIP-890).
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=codes(t.name, p)
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )


def _add_partitions_to_txn(
    cluster: ClusterView, ctx: RequestContext, body: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    topics = body.v3_and_below_topics
    code, txn = cluster.coordinator.check(
        24,
        ctx.api_version,
        body.v3_and_below_transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
    )
    if txn is None:
        return partition_results(topics, lambda _t, _p: code)
    unknown = {
        (t.name, p) for t in topics for p in t.partitions if not cluster.has_partition(t.name, p)
    }
    if unknown:
        # All or nothing, as Kafka: the known partitions are not added.
        return partition_results(
            topics, lambda t, p: UNKNOWN_TOPIC if (t, p) in unknown else NOT_ATTEMPTED
        )
    cluster.coordinator.add_partitions(txn, [(t.name, p) for t in topics for p in t.partitions])
    return partition_results(topics, lambda _t, _p: NONE)


def _add_offsets_to_txn(
    cluster: ClusterView, ctx: RequestContext, body: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    code, txn = cluster.coordinator.check(
        25, ctx.api_version, body.transactional_id, body.producer_id, body.producer_epoch
    )
    if txn is not None:
        cluster.coordinator.add_offsets(txn, body.group_id)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


def _txn_offset_commit(
    cluster: ClusterView, ctx: RequestContext, body: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    code, txn = cluster.coordinator.check(
        28, ctx.api_version, body.transactional_id, body.producer_id, body.producer_epoch
    )
    if txn is not None:
        if tv2(cluster, ctx, 28):
            # TxnOffsetCommit v5 adds the group's offsets partition (KIP-890 part 2).
            cluster.coordinator.add_offsets(txn, body.group_id)
        offsets = {
            (t.name, p.partition_index): p.committed_offset
            for t in body.topics
            for p in t.partitions
        }
        code = cluster.coordinator.txn_offset_commit(txn, body.group_id, offsets)
    return txn_offset_commit_body(body, code)


def txn_offset_commit_body(body: TxnOffsetCommitRequest, code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _end_txn(cluster: ClusterView, ctx: RequestContext, body: EndTxnRequest) -> EndTxnResponse:
    coordinator = cluster.coordinator
    if tv2(cluster, ctx, 26):
        code, pid, epoch = coordinator.end_txn_v2(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
        return EndTxnResponse(
            throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch
        )
    code, txn = coordinator.check(
        26, ctx.api_version, body.transactional_id, body.producer_id, body.producer_epoch
    )
    if txn is not None:
        code = coordinator.end_txn(txn, body.committed)
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


TXN_HANDLERS: dict[int, Callable[[ClusterView, RequestContext, Any], Any]] = {
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    28: _txn_offset_commit,
}
