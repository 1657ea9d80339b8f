"""Frames and headers around Kafka's generated messages, without a socket or a loop."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioproducer.protocol.apis import (
    API_VERSIONS,
    APIS_BY_KEY,
    INIT_PRODUCER_ID,
    METADATA,
    PRODUCE,
    negotiate_version,
)
from aioproducer.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    decode_request,
    decode_response,
    encode_request,
    encode_request_chunks,
    encode_response,
    read_correlation_id,
)
from aioproducer.protocol.generated import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from aioproducer.protocol.generated._wire import MessageError
from aioproducer.protocol.generated.api_versions import FinalizedFeatureKey
from aioproducer.protocol.generated.metadata import (
    MetadataRequestTopic,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aioproducer.protocol.generated.produce import PartitionProduceData, TopicProduceData


def test_decoder_one_byte_at_a_time() -> None:
    frames = [b"", b"a", b"hello world" * 50]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    dec = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(stream)):
        out.extend(dec.feed(stream[i : i + 1]))
    assert out == frames
    assert dec.buffered == 0


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_decoder_any_split(frames: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    dec = FrameDecoder()
    out: list[bytes] = []
    prev = 0
    for cut in cuts + [len(stream)]:
        out.extend(dec.feed(stream[prev:cut]))
        prev = cut
    assert out == frames


def test_decoder_rejects_absurd_size() -> None:
    dec = FrameDecoder(max_frame_size=1000)
    with pytest.raises(FrameTooLargeError):
        dec.feed(struct.pack(">i", 1001))
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">i", -5))


def test_request_header_v1_layout() -> None:
    frame = encode_request(
        METADATA, 1, 7, "cid", MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    )
    size, key, version, corr = struct.unpack_from(">ihhi", frame)
    assert (size, key, version, corr) == (len(frame) - 4, 3, 1, 7)
    assert frame[12:17] == b"\x00\x03cid"
    # topics array: int32 count 1, int16 name length 1, "t"
    assert frame[17:] == b"\x00\x00\x00\x01\x00\x01t"


def test_request_header_v2_flexible_layout() -> None:
    frame = encode_request(METADATA, 12, 1, None, MetadataRequest(topics=None))
    # client id stays a classic nullable string (-1), then empty header tags.
    assert frame[12:14] == b"\xff\xff"
    assert frame[14] == 0
    # topics null in compact form is 0; allow_auto_create=1; include_topic_ops=0; tags=0
    assert frame[15:] == b"\x00\x01\x00\x00"


def test_a_request_must_be_its_apis_generated_class() -> None:
    with pytest.raises(TypeError, match="MetadataRequest"):
        encode_request(METADATA, 1, 1, None, {"topics": []})
    with pytest.raises(TypeError, match="ProduceRequest"):
        encode_request(PRODUCE, 9, 1, None, MetadataRequest())


_SAMPLES = {
    18: ApiVersionsRequest(client_software_name="aioproducer", client_software_version="1.0"),
    3: MetadataRequest(topics=[MetadataRequestTopic(name="orders")]),
    0: ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(2, b"xyz")])],
    ),
    22: InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000),
}


@pytest.mark.parametrize("api", [API_VERSIONS, METADATA, PRODUCE, INIT_PRODUCER_ID], ids=repr)
def test_every_version_round_trips_requests(api) -> None:  # type: ignore[no-untyped-def]
    body = _SAMPLES[api.key]
    for version in range(api.min_version, api.max_version + 1):
        frame = encode_request(api, version, 42, "me", body)
        got_api, got_version, cid, client_id, decoded = decode_request(frame[4:], APIS_BY_KEY)
        assert (got_api, got_version, cid, client_id) == (api, version, 42, "me")
        assert type(decoded) is api.request
        # decode(encode(x)) re-encodes to the very same bytes
        assert encode_request(api, version, 42, "me", decoded) == frame


def _metadata_response() -> MetadataResponse:
    part = MetadataResponsePartition(
        partition_index=0, leader_id=1, leader_epoch=3, replica_nodes=[1], isr_nodes=[1]
    )
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        controller_id=1,
        topics=[MetadataResponseTopic(name="t", partitions=[part])],
    )


def test_metadata_response_round_trip_all_versions() -> None:
    for version in range(METADATA.min_version, METADATA.max_version + 1):
        frame = encode_response(METADATA, version, 9, _metadata_response())
        assert read_correlation_id(frame[4:]) == 9
        msg = decode_response(METADATA, version, frame[4:])
        assert type(msg) is MetadataResponse
        part = msg.topics[0].partitions[0]
        assert (msg.brokers[0].host, part.leader_id, part.partition_index) == ("h", 1, 0)
        # the field exists from v7; below, the default
        assert part.leader_epoch == (3 if version >= 7 else -1)


def test_api_versions_fallback_decodes_v0_error_body() -> None:
    # A broker that does not know v3 answers in v0 form with UNSUPPORTED_VERSION.
    body = b"\x00\x23" + b"\x00\x00\x00\x01" + b"\x00\x12\x00\x00\x00\x02"
    frame = struct.pack(">i", 5) + body
    msg = decode_response(API_VERSIONS, 3, frame)
    assert msg.error_code == 35
    key = msg.api_keys[0]
    assert (key.api_key, key.min_version, key.max_version) == (18, 0, 2)


def test_trailing_bytes_are_an_error() -> None:
    frame = encode_response(
        INIT_PRODUCER_ID, 0, 1, InitProducerIdResponse(producer_id=5, producer_epoch=0)
    )
    with pytest.raises(MessageError, match="trailing"):
        decode_response(INIT_PRODUCER_ID, 0, frame[4:] + b"\x00")


def test_truncated_response_is_an_error() -> None:
    frame = encode_response(INIT_PRODUCER_ID, 0, 1, InitProducerIdResponse(producer_id=5))
    with pytest.raises(MessageError):
        decode_response(INIT_PRODUCER_ID, 0, frame[4:-3])
    with pytest.raises(MessageError):
        decode_response(INIT_PRODUCER_ID, 2, frame[4:5])  # ends inside the header


def test_non_nullable_null_is_rejected() -> None:
    with pytest.raises(MessageError, match="non-nullable"):
        encode_request(
            METADATA, 1, 1, None, MetadataRequest(topics=[MetadataRequestTopic(name=None)])
        )


def test_a_field_the_version_lacks_is_refused_unless_ignorable() -> None:
    # allow_auto_topic_creation exists from v4 and is not ignorable (Java's rule).
    with pytest.raises(MessageError, match="allow_auto_topic_creation"):
        encode_request(METADATA, 3, 1, None, MetadataRequest(allow_auto_topic_creation=False))
    assert encode_request(METADATA, 4, 1, None, MetadataRequest(allow_auto_topic_creation=False))


def test_unknown_tagged_fields_are_skipped() -> None:
    # InitProducerId v2 (flexible) response with one unknown tag (tag 5, 3 bytes).
    body = struct.pack(">ihqh", 0, 0, 77, 1) + b"\x01\x05\x03abc"
    frame = struct.pack(">i", 9) + b"\x00" + body  # header v1: cid + empty tags
    msg = decode_response(INIT_PRODUCER_ID, 2, frame)
    assert (msg.producer_id, msg.producer_epoch) == (77, 1)


@pytest.mark.parametrize(
    ("ours", "broker", "expected"),
    [((3, 11), (0, 9), 9), ((3, 11), (0, 12), 11), ((3, 11), (0, 2), None), ((3, 11), (5, 7), 7)],
)
def test_negotiate_version(ours, broker, expected) -> None:  # type: ignore[no-untyped-def]
    api = replace(PRODUCE, min_version=ours[0], max_version=ours[1])
    assert negotiate_version(api, *broker) == expected


def test_client_ranges_lie_within_the_generated_classes() -> None:
    for api in APIS_BY_KEY.values():
        assert (
            api.request.MIN_VERSION <= api.min_version <= api.max_version <= api.request.MAX_VERSION
        )
        assert (api.request.API_KEY, api.response.API_KEY) == (api.key, api.key)
    with pytest.raises(ValueError, match="outside the spec"):
        replace(PRODUCE, max_version=PRODUCE.request.MAX_VERSION + 1)


def _api_versions_v3_body(tags: bytes) -> bytes:
    # error 0, api_keys: one entry (compact array n+1=2), throttle 0, then tags.
    return (
        b"\x00\x00" + b"\x02" + struct.pack(">hhh", 0, 3, 12) + b"\x00" + b"\x00\x00\x00\x00" + tags
    )


def test_api_versions_reads_finalized_features() -> None:
    # Tag 0 (supported features, an empty array), tag 1 (epoch 7),
    # tag 2 (finalized features: transaction.version at 2), built by hand.
    name = b"transaction.version"
    feature = bytes([len(name) + 1]) + name + struct.pack(">hh", 2, 0) + b"\x00"
    finalized = b"\x02" + feature
    epoch = struct.pack(">q", 7)
    tags = (
        b"\x03"
        + b"\x00\x01\x01"  # tag 0: an empty compact array, 1 byte
        + b"\x01"
        + bytes([len(epoch)])
        + epoch
        + b"\x02"
        + bytes([len(finalized)])
        + finalized
    )
    frame = struct.pack(">i", 3) + _api_versions_v3_body(tags)
    msg = decode_response(API_VERSIONS, 3, frame)
    assert msg.api_keys[0].max_version == 12
    assert msg.finalized_features_epoch == 7
    assert [(f.name, f.max_version_level, f.min_version_level) for f in msg.finalized_features] == [
        ("transaction.version", 2, 0)
    ]


def test_api_versions_without_features_has_defaults() -> None:
    frame = struct.pack(">i", 3) + _api_versions_v3_body(b"\x00")
    msg = decode_response(API_VERSIONS, 3, frame)
    assert msg.finalized_features_epoch == -1
    assert msg.finalized_features == []


def test_tagged_fields_round_trip() -> None:
    body = ApiVersionsResponse(
        finalized_features_epoch=4,
        finalized_features=[FinalizedFeatureKey("transaction.version", 1, 0)],
    )
    frame = encode_response(API_VERSIONS, 3, 5, body)
    msg = decode_response(API_VERSIONS, 3, frame[4:])
    assert msg.finalized_features_epoch == 4
    assert msg.finalized_features[0].max_version_level == 1


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_a_produce_frame_holds_its_record_sets_by_reference(version: int) -> None:
    batches = [b"a" * 300, bytearray(b"b" * 70_000), memoryview(b"c" * 5)]
    body = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(0, batches[0])]),
            TopicProduceData(
                name="u",
                partition_data=[
                    PartitionProduceData(1, batches[1]),
                    PartitionProduceData(2, batches[2]),
                ],
            ),
        ],
    )
    chunks = encode_request_chunks(PRODUCE, version, 7, "c", body)
    # Each record set is in the frame as the very buffer, not a copy.
    assert [c for c in chunks if any(c is b for b in batches)] == batches
    frame = b"".join(chunks)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    # The same bytes as the copying encoder, and it decodes back.
    assert frame[-len(body.encode(version)) :] == body.encode(version)
    _, _, _, _, decoded = decode_request(frame[4:], APIS_BY_KEY)
    assert [bytes(p.records or b"") for t in decoded.topic_data for p in t.partition_data] == [
        bytes(b) for b in batches
    ]


def test_a_produce_frame_that_cannot_be_encoded_leaves_nothing() -> None:
    out = bytearray(b"head")
    bad = ProduceRequest(
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(0, 5)])]
    )  # type: ignore[arg-type]
    with pytest.raises(MessageError, match="ProduceRequest v9"):
        bad.encode_chunks(out, 9)
    assert out == b"head"
    with pytest.raises(MessageError, match="ProduceRequest"):
        encode_request_chunks(PRODUCE, 9, 1, None, bad)
