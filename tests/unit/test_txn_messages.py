"""The transaction API schemas: round trips for every version, and bytes by hand."""

from __future__ import annotations

from typing import Any

import pytest

from aioproducer.protocol.apis import APIS_BY_KEY
from aioproducer.protocol.schema_framing import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from aioproducer.protocol.messages import Api, negotiate_version
from aioproducer.protocol.schema import Array, SchemaError, Struct
from aioproducer.protocol.txn_messages import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    COORDINATOR_KEY_TRANSACTION,
    END_TXN,
    FIND_COORDINATOR,
    TXN_APIS,
    TXN_OFFSET_COMMIT,
)

# The newest version each Kafka JSON definition declares. Versions above an
# Api's max_version are never sent, but the schema must still read them.
SCHEMA_MAX = {10: 6, 24: 5, 25: 4, 26: 5, 28: 5}

_TOPICS = [{"name": "orders", "partitions": [0, 3]}, {"name": "audit", "partitions": [1]}]
_TOPIC_RESULTS = [
    {
        "name": "orders",
        "results_by_partition": [
            {"partition_index": 0, "partition_error_code": 0},
            {"partition_index": 3, "partition_error_code": 48},  # INVALID_TXN_STATE
        ],
    }
]

# One body per API and direction holding every field of every version.
REQUESTS: dict[int, dict[str, Any]] = {
    10: {
        "key": "tx-1",
        "key_type": COORDINATOR_KEY_TRANSACTION,
        "coordinator_keys": ["tx-1", "tx-2"],
    },
    24: {
        "transactions": [
            {
                "transactional_id": "tx-1",
                "producer_id": 7,
                "producer_epoch": 2,
                "verify_only": True,
                "topics": _TOPICS,
            }
        ],
        "transactional_id": "tx-1",
        "producer_id": 7,
        "producer_epoch": 2,
        "topics": _TOPICS,
    },
    25: {"transactional_id": "tx-1", "producer_id": 7, "producer_epoch": 2, "group_id": "g"},
    26: {"transactional_id": "tx-1", "producer_id": 7, "producer_epoch": 2, "committed": True},
    28: {
        "transactional_id": "tx-1",
        "group_id": "g",
        "producer_id": 1 << 40,
        "producer_epoch": 2,
        "generation_id": 5,
        "member_id": "member-1",
        "group_instance_id": None,
        "topics": [
            {
                "name": "in",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": 3,
                        "committed_metadata": None,
                    },
                    {
                        "partition_index": 1,
                        "committed_offset": 7,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m\u00e9ta",
                    },
                ],
            }
        ],
    },
}

RESPONSES: dict[int, dict[str, Any]] = {
    10: {
        "throttle_time_ms": 5,
        "error_code": 0,
        "error_message": None,
        "node_id": 3,
        "host": "broker-3",
        "port": 9093,
        "coordinators": [
            {
                "key": "tx-1",
                "node_id": 3,
                "host": "broker-3",
                "port": 9093,
                "error_code": 0,
                "error_message": None,
            },
            {
                "key": "tx-2",
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": 15,  # COORDINATOR_NOT_AVAILABLE
                "error_message": "loading",
            },
        ],
    },
    24: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results_by_transaction": [{"transactional_id": "tx-1", "topic_results": _TOPIC_RESULTS}],
        "results_by_topic": _TOPIC_RESULTS,
    },
    25: {"throttle_time_ms": 1, "error_code": 90},  # PRODUCER_FENCED
    26: {"throttle_time_ms": 0, "error_code": 0, "producer_id": 7, "producer_epoch": 3},
    28: {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "in",
                "partitions": [
                    {"partition_index": 0, "error_code": 0},
                    {"partition_index": 1, "error_code": 22},  # ILLEGAL_GENERATION
                ],
            }
        ],
    },
}


def _project(struct: Struct, value: dict[str, Any], version: int) -> dict[str, Any]:
    """``value`` reduced to the fields present in ``version``, at every depth."""
    out = {}
    for field in struct.fields:
        if not field.present(version):
            continue
        item = value[field.name]
        kind = field.type
        if isinstance(kind, Array) and isinstance(kind.item, Struct) and item is not None:
            item = [_project(kind.item, element, version) for element in item]
        out[field.name] = item
    return out


def _versions(api: Api, high: int) -> list[tuple[Api, int]]:
    return [(api, v) for v in range(high + 1)]


ALL_VERSIONS = [case for api in TXN_APIS for case in _versions(api, SCHEMA_MAX[api.key])]


def _id(case: object) -> str:
    return f"{case.name}" if isinstance(case, Api) else f"v{case}"


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=_id)
def test_request_round_trips(api: Api, version: int) -> None:
    expected = _project(api.request, REQUESTS[api.key], version)
    frame = encode_request(api, version, 17, "golden-test", REQUESTS[api.key])
    got_api, got_version, cid, client_id, body = decode_request(frame[4:], APIS_BY_KEY)
    assert (got_api, got_version, cid, client_id) == (api, version, 17, "golden-test")
    assert body == expected
    assert encode_request(api, version, 17, "golden-test", body) == frame


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=_id)
def test_response_round_trips(api: Api, version: int) -> None:
    expected = _project(api.response, RESPONSES[api.key], version)
    frame = encode_response(api, version, 17, RESPONSES[api.key])
    body = decode_response(api, version, frame[4:])
    assert body == expected
    assert encode_response(api, version, 17, body) == frame


@pytest.mark.parametrize("api", TXN_APIS, ids=lambda a: a.name)
def test_defaults_fill_every_version(api: Api) -> None:
    """An empty body encodes in every version: defaults cover all fields."""
    for version in range(api.min_version, api.max_version + 1):
        for direction, struct in (("request", api.request), ("response", api.response)):
            out = bytearray()
            struct.encode_version({}, out, version, api.is_flexible(version))
            _, end = struct.decode_version(bytes(out), 0, version, api.is_flexible(version))
            assert end == len(out), (direction, version)


def test_registered_with_the_versions_a_producer_sends() -> None:
    got = {a.name: (a.key, a.min_version, a.max_version, a.flexible_from) for a in TXN_APIS}
    assert got == {
        "FindCoordinator": (10, 1, 4, 3),
        "AddPartitionsToTxn": (24, 0, 3, 3),
        "AddOffsetsToTxn": (25, 0, 4, 3),
        "EndTxn": (26, 0, 5, 3),
        "TxnOffsetCommit": (28, 0, 5, 3),
    }
    for api in TXN_APIS:
        assert APIS_BY_KEY[api.key] is api
    assert {0, 3, 18, 22} <= APIS_BY_KEY.keys()


def test_negotiation_against_tansu_advertised_ranges() -> None:
    # What tansu 0.6.0 advertises in ApiVersions (tests/golden/*_transactional.frames).
    tansu = {10: (0, 6), 24: (0, 5), 25: (0, 4), 26: (0, 4), 28: (0, 4)}
    chosen = {key: negotiate_version(APIS_BY_KEY[key], *tansu[key]) for key in tansu}
    assert chosen == {10: 4, 24: 3, 25: 4, 26: 4, 28: 4}
    # A broker with FindCoordinator v0 only cannot name a transaction coordinator.
    assert negotiate_version(FIND_COORDINATOR, 0, 0) is None


# Bytes written out by hand from the Kafka protocol guide, so the schemas are
# checked against the spec and not only against themselves.

# Size, api key, version, correlation id, client id "c": the body starts after.
_BODY = 4 + 2 + 2 + 4 + 2 + 1


def test_find_coordinator_v1_request_bytes() -> None:
    frame = encode_request(FIND_COORDINATOR, 1, 1, "c", {"key": "tx", "key_type": 1})
    assert frame[_BODY:] == b"\x00\x02tx" + b"\x01"


def test_find_coordinator_v4_batched_request_bytes() -> None:
    body = {"key_type": 1, "coordinator_keys": ["a", "bc"]}
    frame = encode_request(FIND_COORDINATOR, 4, 1, "c", body)
    # header tags 0; key_type; compact array (n+1) of compact strings (len+1); tags
    assert frame[_BODY:] == b"\x00" + b"\x01" + b"\x03" + b"\x02a" + b"\x03bc" + b"\x00"


def test_find_coordinator_v4_batched_response_bytes() -> None:
    wire = (
        b"\x00\x00\x00\x01"  # correlation id
        b"\x00"  # response header tags
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x02"  # one coordinator
        b"\x02a"  # key
        b"\x00\x00\x00\x07"  # node_id
        b"\x02h"  # host
        b"\x00\x00\x23\x84"  # port 9092
        b"\x00\x00"  # error_code
        b"\x00"  # error_message null
        b"\x00"  # coordinator tags
        b"\x00"  # response tags
    )
    msg = decode_response(FIND_COORDINATOR, 4, wire)
    assert msg == {
        "throttle_time_ms": 0,
        "coordinators": [
            {
                "key": "a",
                "node_id": 7,
                "host": "h",
                "port": 9092,
                "error_code": 0,
                "error_message": None,
            }
        ],
    }
    assert encode_response(FIND_COORDINATOR, 4, 1, msg)[4:] == wire


def test_find_coordinator_v0_to_v3_single_answer() -> None:
    body = {"throttle_time_ms": 0, "error_code": 15, "error_message": None,
            "node_id": -1, "host": "", "port": -1}
    for version in range(4):
        frame = encode_response(FIND_COORDINATOR, version, 1, body)
        msg = decode_response(FIND_COORDINATOR, version, frame[4:])
        assert "coordinators" not in msg
        assert (msg.error_code, msg.node_id) == (15, -1)
        assert ("error_message" in msg) == (version >= 1)


def test_add_partitions_to_txn_v3_request_bytes() -> None:
    body = {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
            "topics": [{"name": "x", "partitions": [2]}]}
    frame = encode_request(ADD_PARTITIONS_TO_TXN, 3, 1, "c", body)
    assert frame[_BODY:] == (
        b"\x00"  # header tags
        b"\x02t"
        b"\x00\x00\x00\x00\x00\x00\x00\x01"
        b"\x00\x00"
        b"\x02" + b"\x02x" + b"\x02" + b"\x00\x00\x00\x02" + b"\x00"  # one topic, tags
        + b"\x00"  # body tags
    )


def test_add_partitions_to_txn_v0_has_no_batched_fields() -> None:
    frame = encode_request(ADD_PARTITIONS_TO_TXN, 0, 1, "c", REQUESTS[24])
    body = decode_request(frame[4:], APIS_BY_KEY)[4]
    assert set(body) == {"transactional_id", "producer_id", "producer_epoch", "topics"}
    response = decode_response(
        ADD_PARTITIONS_TO_TXN, 0, encode_response(ADD_PARTITIONS_TO_TXN, 0, 1, RESPONSES[24])[4:]
    )
    assert set(response) == {"throttle_time_ms", "results_by_topic"}


def test_end_txn_v0_bytes() -> None:
    body = {"transactional_id": "t", "producer_id": 9, "producer_epoch": 1, "committed": False}
    frame = encode_request(END_TXN, 0, 1, "c", body)
    assert frame[_BODY:] == b"\x00\x01t" + (9).to_bytes(8, "big") + b"\x00\x01" + b"\x00"


def test_end_txn_response_epoch_only_from_v5() -> None:
    for version in range(SCHEMA_MAX[26] + 1):
        frame = encode_response(END_TXN, version, 1, {"throttle_time_ms": 0, "error_code": 0})
        msg = decode_response(END_TXN, version, frame[4:])
        assert ("producer_epoch" in msg) == (version >= 5)
        if version >= 5:
            assert (msg.producer_id, msg.producer_epoch) == (-1, -1)  # defaults


def test_add_offsets_to_txn_v0_bytes() -> None:
    body = {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "group_id": "g"}
    frame = encode_request(ADD_OFFSETS_TO_TXN, 0, 1, "c", body)
    assert frame[_BODY:] == b"\x00\x01t" + (1).to_bytes(8, "big") + b"\x00\x00" + b"\x00\x01g"


def test_txn_offset_commit_v3_group_fields() -> None:
    body = dict(REQUESTS[28], generation_id=-1, member_id="", group_instance_id=None)
    body["topics"] = []
    frame = encode_request(TXN_OFFSET_COMMIT, 3, 1, "c", body)
    tail = b"\xff\xff\xff\xff" + b"\x01" + b"\x00" + b"\x01" + b"\x00"
    # generation -1, member "" (compact: 1), instance id null (0), no topics (1), tags
    assert frame.endswith(tail)
    # v2 and below have none of them, and no flexible encoding
    v2 = decode_request(encode_request(TXN_OFFSET_COMMIT, 2, 1, "c", body)[4:], APIS_BY_KEY)[4]
    assert "generation_id" not in v2 and "member_id" not in v2


def test_txn_offset_commit_leader_epoch_from_v2() -> None:
    for version in range(TXN_OFFSET_COMMIT.max_version + 1):
        frame = encode_request(TXN_OFFSET_COMMIT, version, 1, "c", REQUESTS[28])
        body = decode_request(frame[4:], APIS_BY_KEY)[4]
        part = body.topics[0].partitions[0]
        assert ("committed_leader_epoch" in part) == (version >= 2)
        assert part.committed_metadata is None  # nullable in every version


def test_non_nullable_fields_refuse_none() -> None:
    with pytest.raises(SchemaError):
        encode_request(FIND_COORDINATOR, 3, 1, "c", {"key": None, "key_type": 1})
    with pytest.raises(SchemaError):
        encode_request(END_TXN, 3, 1, "c", dict(REQUESTS[26], transactional_id=None))
