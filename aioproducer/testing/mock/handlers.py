"""One handler per API key: a decoded request in, a response out.

Handlers run on the broker that received the request (``ctx.broker_id``) and
read or change the shared cluster state. Requests and responses are Kafka's
generated classes (``protocol/generated``); a handler returns an instance of
the API's response class, encoded by the server at the request's version
(ignorable fields a version lacks are not written, as in Java's generated
``*Data`` classes), or None for a request that gets no answer (Produce with
acks=0).

:data:`SUPPORTED_VERSIONS` is what ApiVersions advertises; every range lies
within the generated classes' versions, so a client that negotiates never
sends a version the codecs cannot read.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from typing import Any

from ... import errors
from ...protocol.apis import APIS_BY_KEY
from ...protocol.generated import (
    AddOffsetsToTxnResponse,
    ApiVersionsResponse,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from ...protocol.generated.api_versions import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from ...protocol.generated.find_coordinator import Coordinator
from ...protocol.generated.metadata import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from ...protocol.generated.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from ...protocol.record_parsing import parse_record_batches
from ...protocol.records import CorruptBatchError
from .faults import RequestContext
from .log import code_of
from .sasl_session import SASL_API_VERSIONS
from .state import ClusterView, TopicState, valid_topic_name
from .txn_handlers import (
    TV2_VERSIONS,
    TXN_HANDLERS,
    partition_results,
    tv2,
    txn_offset_commit_body,
)

__all__ = [
    "ADVERTISED_ONLY",
    "SUPPORTED_VERSIONS",
    "TV2_VERSIONS",
    "api_versions_body",
    "error_response",
    "respond",
    "valid_topic_name",
]

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 10),  # Produce: v3 is the first with record batch v2 (magic 2)
    3: (1, 13),  # Metadata: v13 has a top-level error code (KIP-1102)
    10: (0, 5),  # FindCoordinator (v0: group coordinators only; v5: TRANSACTION_ABORTABLE)
    18: (0, 4),  # ApiVersions (v4: a supported feature's min version may be 0)
    22: (0, 5),  # InitProducerId (v5: TRANSACTION_ABORTABLE, KIP-890)
    24: (0, 3),  # AddPartitionsToTxn: v4+ is broker to broker (KIP-890)
    25: (0, 3),  # AddOffsetsToTxn
    26: (0, 3),  # EndTxn
    28: (0, 3),  # TxnOffsetCommit
}

# Advertised but not served. librdkafka enables a feature only when every API
# it depends on is advertised: record batch v2 needs Produce v3 *and* Fetch v4,
# zstd needs Produce v7 *and* Fetch v10 (rdkafka_feature.c). Without Fetch it
# falls back to magic 0/1 message sets. A producer never fetches; a Fetch
# request closes the connection.
ADVERTISED_ONLY: dict[int, tuple[int, int]] = {1: (4, 10)}

# Features the brokers support (Kafka 4.4's range for the one the mock models).
# ApiVersions v0-v3 leave out those whose min version is 0 (KAFKA-17011, fixed in v4).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"transaction.version": (0, 2)}

NONE = 0
CORRUPT = code_of(errors.CorruptRecordError)
UNKNOWN_TOPIC = code_of(errors.UnknownTopicOrPartitionError)
NOT_LEADER = code_of(errors.NotLeaderOrFollowerError)
LEADER_NOT_AVAILABLE = code_of(errors.LeaderNotAvailableError)
INVALID_TOPIC = code_of(errors.InvalidTopicError)
INVALID_ACKS = code_of(errors.InvalidRequiredAcksError)
INVALID_REQUEST = code_of(errors.InvalidRequestError)
INVALID_RECORD = code_of(errors.InvalidRecordError)
MESSAGE_TOO_LARGE = code_of(errors.RecordTooLargeError)
INVALID_EPOCH = code_of(errors.InvalidProducerEpochError)
INVALID_TXN_STATE = code_of(errors.InvalidTxnStateError)
UNKNOWN_TOPIC_ID = code_of(errors.UnknownTopicIdError)
NOT_ATTEMPTED = code_of(errors.OperationNotAttemptedError)
REBOOTSTRAP_REQUIRED = code_of(errors.RebootstrapRequiredError)

_BATCH_LENGTH = struct.Struct(">i")


async def respond(cluster: ClusterView, ctx: RequestContext, body: Any) -> Any | None:
    """The response to one request, after scripted failures and intercepts.

    An intercept's answer must be an instance of the API's response class; any
    other value raises TypeError (the server then answers UNKNOWN_SERVER_ERROR
    and keeps the exception for the test).
    """
    no_answer = ctx.api_key == 0 and body.acks == 0
    code = cluster.faults.take_api_failure(ctx.api_key, ctx.broker_id)
    if code is not None:
        return None if no_answer else error_response(cluster, ctx, body, code)
    intercept = cluster.faults.intercepts.get(ctx.api_key)
    if intercept is not None:
        result = intercept(body, ctx)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            expected = APIS_BY_KEY[ctx.api_key].response
            if type(result) is not expected:
                raise TypeError(
                    f"intercept of api {ctx.api_key} must return a {expected.__name__} "
                    f"or None, not {type(result).__name__}"
                )
            return None if no_answer else result
    return _HANDLERS[ctx.api_key](cluster, ctx, body)


# -- ApiVersions, Metadata, FindCoordinator ---------------------------------


def api_versions_body(
    error_code: int = NONE,
    *,
    sasl: bool = False,
    transaction_version: int = 1,
    request_version: int = 0,
) -> ApiVersionsResponse:
    """The ApiVersions answer (at ``request_version``); a SASL listener adds SaslHandshake
    and SaslAuthenticate, transaction.version 2 its API versions and the finalized
    feature (KIP-584)."""
    tv2 = TV2_VERSIONS if transaction_version >= 2 else {}
    versions = {
        **SUPPORTED_VERSIONS,
        **ADVERTISED_ONLY,
        **(SASL_API_VERSIONS if sasl else {}),
        **tv2,
    }
    response = ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(versions.items())
        ],
        throttle_time_ms=0,
        supported_features=[
            SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
            if low > 0 or request_version >= 4
        ],
    )
    if tv2:
        response.finalized_features_epoch = 1
        response.finalized_features = [
            FinalizedFeatureKey(
                name="transaction.version",
                max_version_level=transaction_version,
                min_version_level=transaction_version,
            )
        ]
    return response


def _api_versions(cluster: ClusterView, ctx: RequestContext, body: Any) -> ApiVersionsResponse:
    return api_versions_body(
        sasl=cluster.sasl_config is not None,
        transaction_version=cluster.transaction_version,
        request_version=ctx.api_version,
    )


def _brokers(cluster: ClusterView) -> list[MetadataResponseBroker]:
    return [
        MetadataResponseBroker(node_id=node, host=cluster.host, port=server.port, rack=None)
        for node, server in sorted(cluster.servers.items())
    ]


def _topic_body(topic: TopicState) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=False,
        partitions=[
            MetadataResponsePartition(
                error_code=NONE if p.leader >= 0 else LEADER_NOT_AVAILABLE,
                partition_index=p.index,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.replicas),
                offline_replicas=[],
            )
            for p in topic.partitions
        ],
    )


def _metadata(cluster: ClusterView, ctx: RequestContext, body: MetadataRequest) -> MetadataResponse:
    requested = body.topics
    # allow_auto_topic_creation exists from v4; older requests decode it as True.
    allow = cluster.auto_create_topics and body.allow_auto_topic_creation
    topics: list[MetadataResponseTopic] = []
    if requested is None:
        topics = [_topic_body(t) for _, t in sorted(cluster.topic_states.items())]
    for entry in requested or ():
        name = entry.name
        if name is None:
            # v10+: a topic may be named by id alone.
            found = cluster.topic_by_id(entry.topic_id)
            if found is None:
                topics.append(
                    MetadataResponseTopic(
                        error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=entry.topic_id
                    )
                )
            else:
                topics.append(_topic_body(found))
            continue
        topic = cluster.topic_states.get(name)
        if topic is None:
            if not valid_topic_name(name):
                topics.append(MetadataResponseTopic(error_code=INVALID_TOPIC, name=name))
                continue
            if not allow:
                topics.append(MetadataResponseTopic(error_code=UNKNOWN_TOPIC, name=name))
                continue
            cluster.ensure_topic(name)
            # As Kafka's KafkaApis does: the response that creates a topic
            # reports LEADER_NOT_AVAILABLE and no partitions; clients ask again.
            topics.append(MetadataResponseTopic(error_code=LEADER_NOT_AVAILABLE, name=name))
            continue
        topics.append(_topic_body(topic))
    return _metadata_body(cluster, topics)


def _metadata_body(cluster: ClusterView, topics: list[MetadataResponseTopic]) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=_brokers(cluster),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.broker_ids[0],
        topics=topics,
    )


def _coordinator(cluster: ClusterView, key: str) -> Coordinator:
    node = cluster.coordinator_for(key)
    return Coordinator(
        key=key,
        node_id=node,
        host=cluster.host,
        port=cluster.servers[node].port,
        error_code=NONE,
        error_message=None,
    )


def _find_coordinator(
    cluster: ClusterView, ctx: RequestContext, body: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if body.key_type not in (0, 1):
        refused: FindCoordinatorResponse = error_response(cluster, ctx, body, INVALID_REQUEST)
        return refused
    if ctx.api_version >= 4:  # KIP-699: a batch of keys
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            coordinators=[_coordinator(cluster, key) for key in body.coordinator_keys],
        )
    found = _coordinator(cluster, body.key)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


# -- Produce -----------------------------------------------------------------


def _whole_batches(data: bytes) -> bool:
    """Whether ``data`` is a sequence of complete batches (the parser drops a partial tail)."""
    pos, end = 0, len(data)
    while end - pos >= 12:
        (length,) = _BATCH_LENGTH.unpack_from(data, pos + 8)
        if length < 0:
            return False
        pos += 12 + length
    return pos == end


def _produce_partition(
    cluster: ClusterView,
    ctx: RequestContext,
    body: ProduceRequest,
    topic: str,
    index: int,
    data: Any,
) -> tuple[int, int]:
    """(error code, base offset) for one partition of a Produce request."""
    if body.acks not in (-1, 0, 1):
        return INVALID_ACKS, -1
    injected = cluster.faults.take_produce_failure(topic, index)
    if injected is not None:
        code, after_append = injected
        if not after_append:
            return code, -1
        written, _ = _append_partition(cluster, ctx, body, topic, index, data)
        # Refused by a check: that answer stands; written: the scripted one.
        return (code if written == NONE else written), -1
    return _append_partition(cluster, ctx, body, topic, index, data)


def _append_partition(
    cluster: ClusterView,
    ctx: RequestContext,
    body: ProduceRequest,
    topic: str,
    index: int,
    data: Any,
) -> tuple[int, int]:
    """Check and write one partition's batch: (error code, base offset)."""
    state = cluster.topic_states.get(topic)
    if state is None or not 0 <= index < len(state.partitions):
        return UNKNOWN_TOPIC, -1
    partition = state.partitions[index]
    if partition.leader != ctx.broker_id:
        return NOT_LEADER, -1
    if not data or not _whole_batches(data):
        return CORRUPT, -1
    if cluster.max_message_bytes is not None and len(data) > cluster.max_message_bytes:
        # Checked before the producer state, as Kafka's LogValidator does.
        return MESSAGE_TOO_LARGE, -1
    try:
        batches = parse_record_batches(data, verify_crc=True)
    except CorruptBatchError:
        return CORRUPT, -1
    # From Produce v3 a partition's data is exactly one batch (Kafka's
    # LogValidator.validateOneBatchRecords), and clients never send control batches.
    if len(batches) != 1 or batches[0].is_control:
        return INVALID_RECORD, -1
    batch = batches[0]
    coordinator = cluster.coordinator
    issued = coordinator.epochs.get(batch.producer_id) if batch.producer_id >= 0 else None
    if issued is not None and batch.producer_epoch < issued and batch.is_transactional:
        # The coordinator fenced this epoch and told every partition of the
        # transaction. An idempotent producer's bump (KIP-360) is only learnt
        # by a partition from the batches it receives, so there the check is
        # per partition, in PartitionLog.check: old-epoch retries elsewhere
        # still deduplicate against the old epoch, as in Kafka.
        return INVALID_EPOCH, -1
    if batch.is_transactional:
        # Kafka 3.6+ verifies that the partition was added to the transaction
        # (KIP-890 part 1) and answers INVALID_TXN_STATE when it was not.
        txn = coordinator.transaction_of(batch.producer_id)
        if (
            tv2(cluster, ctx, 0)
            and txn is not None
            and txn.transactional_id == body.transactional_id
            and txn.producer_epoch == batch.producer_epoch
        ):
            # Produce v12: the leader adds the partition itself (KIP-890 part 2).
            coordinator.add_partitions(txn, [(topic, index)])
        if (
            txn is None
            or txn.transactional_id != body.transactional_id
            or (topic, index) not in txn.partitions
        ):
            return INVALID_TXN_STATE, -1
    code, duplicate_of = partition.log.check(batch, issued)
    if code != NONE:
        return code, -1
    if duplicate_of >= 0:
        return cluster.duplicate_error_code, duplicate_of
    return NONE, partition.log.append(batch, transactional_open=batch.is_transactional)


def _produce(
    cluster: ClusterView, ctx: RequestContext, body: ProduceRequest
) -> ProduceResponse | None:
    responses = []
    leaders: set[int] = set()
    for topic_data in body.topic_data:
        parts = []
        for pdata in topic_data.partition_data:
            code, base = _produce_partition(
                cluster, ctx, body, topic_data.name, pdata.index, pdata.records
            )
            part = PartitionProduceResponse(
                index=pdata.index,
                error_code=code,
                base_offset=base,
                log_append_time_ms=-1,
                log_start_offset=0 if code == NONE else -1,
            )
            hint = _current_leader(cluster, ctx, topic_data.name, pdata.index, code)
            # The tagged hint fields only exist from Produce v10 on (KIP-951).
            if hint is not None and ctx.api_version >= 10:
                part.current_leader = hint
                leaders.add(hint.leader_id)
            parts.append(part)
        responses.append(TopicProduceResponse(name=topic_data.name, partition_responses=parts))
    if body.acks == 0:
        return None  # acks=0: written, never answered
    endpoints = [
        NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in _brokers(cluster)
        if b.node_id in leaders
    ]
    return ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=endpoints)


def _current_leader(
    cluster: ClusterView, ctx: RequestContext, topic: str, index: int, code: int
) -> LeaderIdAndEpoch | None:
    """KIP-951: a partition this broker no longer leads names its leader and epoch."""
    if code != NOT_LEADER or not cluster.leader_hints:
        return None
    state = cluster.topic_states.get(topic)
    if state is None or not 0 <= index < len(state.partitions):
        return None
    partition = state.partitions[index]
    if (
        partition.leader == ctx.broker_id or partition.leader < 0
    ):  # a scripted refusal, or no leader to name
        return None
    return LeaderIdAndEpoch(leader_id=partition.leader, leader_epoch=partition.leader_epoch)


_HANDLERS: dict[int, Callable[[ClusterView, RequestContext, Any], Any]] = {
    0: _produce,
    3: _metadata,
    10: _find_coordinator,
    18: _api_versions,
    **TXN_HANDLERS,
}


def error_response(cluster: ClusterView, ctx: RequestContext, body: Any, code: int) -> Any:
    """A response that answers ``code`` wherever the API has an error field."""
    key, version = ctx.api_key, ctx.api_version
    if key == 0:
        return ProduceResponse(
            throttle_time_ms=0,
            responses=[
                TopicProduceResponse(
                    name=t.name,
                    partition_responses=[
                        PartitionProduceResponse(
                            index=p.index, error_code=code, base_offset=-1, log_start_offset=-1
                        )
                        for p in t.partition_data
                    ],
                )
                for t in body.topic_data
            ],
        )
    if key == 3:
        if code == REBOOTSTRAP_REQUIRED and version >= 13:
            # KIP-1102: the whole answer is the top-level error, no brokers or topics.
            return MetadataResponse(throttle_time_ms=0, error_code=code)
        topics = [
            MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id)
            for t in body.topics or ()
        ]
        return _metadata_body(cluster, topics)
    if key == 18:
        return api_versions_body(
            code, sasl=cluster.sasl_config is not None, request_version=version
        )
    if key == 10:
        if version >= 4:
            return FindCoordinatorResponse(
                throttle_time_ms=0,
                coordinators=[
                    Coordinator(key=k, error_code=code, error_message=None)
                    for k in body.coordinator_keys
                ],
            )
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=None)
    if key == 24:
        return partition_results(body.v3_and_below_topics, lambda _t, _p: code)
    if key == 28:
        return txn_offset_commit_body(body, code)
    if key == 22:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code)
    if key == 25:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
    # EndTxn: one error_code.
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
