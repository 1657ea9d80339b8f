"""Golden frames from Java's own serializer: the generated messages write the
same bytes as the kafka-clients jar and read Java's bytes back to the same values.

The sample (tests/support/java_golden/GoldenMessages.java) covers classic and
flexible versions, nullable strings and records, uuids, and tagged fields
(KIP-951's leader hints, KIP-584's features).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from aioproducer.protocol.generated import (
    ApiVersionsResponse,
    InitProducerIdRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from aioproducer.protocol.generated import api_versions as av
from aioproducer.protocol.generated import metadata as md
from aioproducer.protocol.generated import produce as pr
from aioproducer.protocol.generated._wire import MessageError, UnsupportedVersionError
from tests.support.javac import JavaToolsUnavailable, skip_or_fail

TOPIC_ID = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0x1122334455667788)
RECORDS = bytes((i * 7 + 1) & 0xFF for i in range(16))


def _produce_request(by_id: bool) -> ProduceRequest:
    topic = pr.TopicProduceData(
        partition_data=[
            pr.PartitionProduceData(index=0, records=RECORDS),
            pr.PartitionProduceData(index=7, records=None),
        ]
    )
    if by_id:
        topic.topic_id = TOPIC_ID
    else:
        topic.name = "topic-é"
    return ProduceRequest(transactional_id="txn-1", acks=-1, timeout_ms=30000, topic_data=[topic])


def _produce_response(tagged: bool) -> ProduceResponse:
    refused = pr.PartitionProduceResponse(
        index=4,
        error_code=6,
        base_offset=-1,
        record_errors=[
            pr.BatchIndexAndErrorMessage(batch_index=2, batch_index_error_message="bad")
        ],
        error_message="not leader",
    )
    if tagged:
        refused.current_leader = pr.LeaderIdAndEpoch(leader_id=2, leader_epoch=9)
    topic = pr.TopicProduceResponse(
        name="t",
        partition_responses=[
            pr.PartitionProduceResponse(
                index=3,
                error_code=0,
                base_offset=1234567890123,
                log_append_time_ms=-1,
                log_start_offset=17,
            ),
            refused,
        ],
    )
    nodes = [pr.NodeEndpoint(node_id=2, host="broker-2", port=9093, rack=None)] if tagged else []
    return ProduceResponse(responses=[topic], throttle_time_ms=5, node_endpoints=nodes)


def _metadata_request(by_id: bool) -> MetadataRequest:
    second = (
        md.MetadataRequestTopic(topic_id=TOPIC_ID, name=None)
        if by_id
        else md.MetadataRequestTopic(name="b")
    )
    return MetadataRequest(
        topics=[md.MetadataRequestTopic(name="a"), second],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )


def _metadata_response() -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            md.MetadataResponseBroker(node_id=1, host="h1", port=9092, rack="r1"),
            md.MetadataResponseBroker(node_id=2, host="h2", port=9093, rack=None),
        ],
        cluster_id="cluster",
        controller_id=1,
        topics=[
            md.MetadataResponseTopic(
                error_code=0,
                name="a",
                topic_id=TOPIC_ID,
                is_internal=False,
                partitions=[
                    md.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=4,
                        replica_nodes=[1, 2],
                        isr_nodes=[1],
                        offline_replicas=[2],
                    )
                ],
                topic_authorized_operations=0x0FF8,
            )
        ],
    )


def _init_producer_id(version: int) -> InitProducerIdRequest:
    request = InitProducerIdRequest(transactional_id="txn-1", transaction_timeout_ms=60000)
    if version >= 3:
        request.producer_id, request.producer_epoch = 42, 3
    return request


def _api_versions() -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            av.ApiVersion(api_key=0, min_version=3, max_version=13),
            av.ApiVersion(api_key=18, min_version=0, max_version=4),
        ],
        throttle_time_ms=0,
        supported_features=[
            av.SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2)
        ],
        finalized_features_epoch=7,
        finalized_features=[
            av.FinalizedFeatureKey(
                name="transaction.version", max_version_level=2, min_version_level=2
            )
        ],
        zk_migration_ready=False,
    )


# (Java's name, version, the same message built here)
SAMPLE: list[tuple[str, int, Any]] = [
    *[("ProduceRequest", v, _produce_request(False)) for v in (3, 9, 11, 12)],
    ("ProduceRequest", 13, _produce_request(True)),
    ("ProduceResponse", 8, _produce_response(False)),
    *[("ProduceResponse", v, _produce_response(True)) for v in (10, 12)],
    *[("MetadataRequest", v, _metadata_request(v >= 10)) for v in (8, 9, 12)],
    *[("MetadataResponse", v, _metadata_response()) for v in (8, 9, 12)],
    *[("InitProducerIdRequest", v, _init_producer_id(v)) for v in (0, 2, 5)],
    *[("ApiVersionsResponse", v, _api_versions()) for v in (1, 3, 4)],
]


def _dropped(message: Any, version: int) -> Any:
    """What reading ``message`` back at ``version`` gives: the fields the version
    lacks (ignorable ones, dropped on write) at their defaults."""
    return type(message).decode(message.encode(version), version)


@pytest.fixture(scope="module")
def java_frames() -> dict[tuple[str, int], bytes]:
    from tests.support.java_golden import java_golden_frames

    try:
        return java_golden_frames()
    except JavaToolsUnavailable as exc:
        skip_or_fail(exc)


@pytest.mark.parametrize(
    ("name", "version", "message"), SAMPLE, ids=[f"{n}-v{v}" for n, v, _ in SAMPLE]
)
def test_generated_writes_and_reads_javas_bytes(
    java_frames: dict[tuple[str, int], bytes], name: str, version: int, message: Any
) -> None:
    java = java_frames[(name, version)]
    assert message.encode(version).hex() == java.hex()
    decoded = type(message).decode(java, version)
    assert decoded == _dropped(message, version)
    assert decoded.encode(version) == java


def test_the_sample_covers_every_frame_java_printed(
    java_frames: dict[tuple[str, int], bytes],
) -> None:
    assert sorted(java_frames) == sorted((name, version) for name, version, _ in SAMPLE)


def test_a_non_ignorable_field_the_version_lacks_refuses_like_java() -> None:
    # Java: UnsupportedVersionException "Attempted to write a non-default
    # currentLeader at version 8" (CurrentLeader is tagged from v10, not ignorable).
    with pytest.raises(UnsupportedVersionError, match="current_leader at version 8"):
        _produce_response(True).encode(8)
    # An ignorable one (the topic name at v13, which names topics by id) is dropped.
    assert _produce_request(False).encode(13) == ProduceRequest(
        transactional_id="txn-1",
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            pr.TopicProduceData(partition_data=_produce_request(False).topic_data[0].partition_data)
        ],
    ).encode(13)


@pytest.mark.parametrize(
    "message",
    [
        ProduceRequest(acks=1 << 15),  # int16 overflow
        ProduceRequest(topic_data=[pr.TopicProduceData(name=None)]),  # type: ignore[arg-type]
        InitProducerIdRequest(transactional_id="x" * 40000),  # longer than an int16 length
        MetadataResponse(brokers=[md.MetadataResponseBroker(host=b"h")]),  # type: ignore[arg-type]
    ],
    ids=["int16-overflow", "null-name", "long-string", "bytes-for-str"],
)
def test_a_value_that_does_not_fit_is_a_typed_error_and_writes_nothing(message: Any) -> None:
    out = bytearray(b"head")
    with pytest.raises(MessageError):
        message.encode_into(
            out, 9 if isinstance(message, (ProduceRequest, MetadataResponse)) else 4
        )
    assert out == b"head"


def test_an_unknown_version_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(2)
    with pytest.raises(UnsupportedVersionError):
        ProduceResponse.decode(b"", 14)
