"""The straight-line Produce codec equals the schema it stands in for, v3 to v12.

Random request bodies (transactional or not, non-ASCII names, null and empty
record sets, several topics and partitions) encode to the schema's bytes;
random answers (errors with record errors and messages, KIP-951 leader hints or
none) decode to the schema's Message. What the straight-line code leaves to the
schema (tagged fields present, truncated frames, out-of-range values) is checked
to reach it: same result, same typed error.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.protocol import schema_framing as framing
from aioproducer.protocol.messages import PRODUCE
from aioproducer.protocol.produce_codec import (
    decode_produce_body,
    encode_produce_body,
    produce_body_chunks,
)
from aioproducer.protocol.schema import SchemaError
from aioproducer.protocol.schema_framing import decode_response, encode_request

VERSIONS = st.integers(PRODUCE.min_version, PRODUCE.max_version)
_INT16 = st.integers(-(2**15), 2**15 - 1)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_NAME = st.text(min_size=0, max_size=12)
_RECORDS = st.one_of(st.none(), st.binary(max_size=200), st.just(b"r" * 300))

_REQUESTS = st.fixed_dictionaries(
    {
        "transactional_id": st.one_of(st.none(), _NAME),
        "acks": st.sampled_from([-1, 0, 1]),
        "timeout_ms": _INT32,
        "topic_data": st.lists(
            st.fixed_dictionaries(
                {
                    "name": _NAME,
                    "partition_data": st.lists(
                        st.fixed_dictionaries({"index": _INT32, "records": _RECORDS}), max_size=4
                    ),
                }
            ),
            max_size=3,
        ),
    }
)


def _schema_request(body: Any, version: int) -> bytes:
    out = bytearray()
    PRODUCE.request.encode_version(body, out, version, PRODUCE.is_flexible(version))
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(body=_REQUESTS, version=VERSIONS)
def test_request_bodies_are_the_schemas_bytes(body: dict[str, Any], version: int) -> None:
    out = bytearray(b"head")
    assert encode_produce_body(body, out, version) is True
    assert bytes(out[4:]) == _schema_request(body, version)


@settings(max_examples=300, deadline=None)
@given(body=_REQUESTS, version=VERSIONS)
def test_request_chunks_join_to_the_schemas_bytes(body: dict[str, Any], version: int) -> None:
    out = bytearray(b"head")
    chunks = produce_body_chunks(body, out, version)
    assert chunks is not None and chunks[0] is out
    assert b"".join(chunks)[4:] == _schema_request(body, version)
    # Each batch's records are in the list by reference, never copied.
    records = [p["records"] for t in body["topic_data"] for p in t["partition_data"]]
    held = [c for c in chunks if not isinstance(c, bytearray)]
    assert [id(c) for c in held] == [id(r) for r in records if r is not None and not isinstance(r, bytearray)]


def test_a_frame_in_chunks_is_the_schemas_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [b"a" * 300, b"b" * 70_000]
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": r} for i, r in enumerate(batches)]},
    ]}
    for version in (3, 8, 9, 12):
        chunks = framing.encode_request_chunks(PRODUCE, version, 7, "c", body)
        assert chunks[1] is batches[0] and chunks[3] is batches[1]
        with monkeypatch.context() as m:
            m.setattr(framing, "produce_body_chunks", lambda *a: None)
            schema_chunks = framing.encode_request_chunks(PRODUCE, version, 7, "c", body)
        assert len(schema_chunks) == 1
        frame = b"".join(chunks)
        assert frame == schema_chunks[0]
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4


@pytest.mark.parametrize(
    "bad", [{"acks": 40_000}, {"timeout_ms": 2**31}, {"topic_data": [{"name": 5, "partition_data": []}]}]
)
def test_an_out_of_range_request_reaches_the_schemas_error(bad: dict[str, Any]) -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []} | bad
    out = bytearray(b"head")
    assert encode_produce_body(body, out, 9) is False
    assert out == b"head"  # nothing half-written
    assert produce_body_chunks(body, out, 9) is None
    assert out == b"head"
    with pytest.raises((SchemaError, AttributeError)):
        encode_request(PRODUCE, 9, 1, "c", body)


def _partition(version: int, tagged: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, Any] = {
        "index": _INT32, "error_code": _INT16, "base_offset": _INT64, "log_append_time_ms": _INT64,
    }
    if version >= 5:
        fields["log_start_offset"] = _INT64
    if version >= 8:
        fields["record_errors"] = st.lists(
            st.fixed_dictionaries(
                {"batch_index": _INT32, "batch_index_error_message": st.one_of(st.none(), _NAME)}
            ),
            max_size=2,
        )
        fields["error_message"] = st.one_of(st.none(), _NAME)
    if version >= 10:
        leader = st.fixed_dictionaries({"leader_id": _INT32, "leader_epoch": _INT32})
        fields["current_leader"] = leader if tagged else st.none()
    return st.fixed_dictionaries(fields)


@st.composite
def _responses(draw: st.DrawFn) -> tuple[int, dict[str, Any], bool]:
    version = draw(VERSIONS)
    tagged = version >= 10 and draw(st.booleans())
    body: dict[str, Any] = {
        "responses": draw(
            st.lists(
                st.fixed_dictionaries(
                    {"name": _NAME, "partition_responses": st.lists(_partition(version, tagged), max_size=4)}
                ),
                max_size=3,
            )
        ),
        "throttle_time_ms": draw(_INT32),
    }
    if version >= 10:
        endpoints = st.lists(
            st.fixed_dictionaries(
                {"node_id": _INT32, "host": _NAME, "port": _INT32, "rack": st.one_of(st.none(), _NAME)}
            ),
            min_size=1,
            max_size=2,
        )
        body["node_endpoints"] = draw(endpoints) if tagged and draw(st.booleans()) else []
    return version, body, tagged


def _frame(version: int, body: dict[str, Any]) -> bytes:
    out = bytearray(b"\x00\x00\x00\x07")  # correlation id
    if PRODUCE.response_header_version(version) >= 1:
        out.append(0)
    PRODUCE.response.encode_version(body, out, version, PRODUCE.is_flexible(version))
    return bytes(out)


def _schema_decode(frame: bytes, version: int) -> Any:
    pos = 5 if PRODUCE.response_header_version(version) >= 1 else 4
    body, end = PRODUCE.response.decode_version(frame, pos, version, PRODUCE.is_flexible(version))
    assert end == len(frame)
    return body


@settings(max_examples=400, deadline=None)
@given(case=_responses())
def test_answers_decode_to_the_schemas_message(case: tuple[int, dict[str, Any], bool]) -> None:
    version, body, tagged = case
    frame = _frame(version, body)
    expected = _schema_decode(frame, version)
    pos = 5 if PRODUCE.response_header_version(version) >= 1 else 4
    fast = decode_produce_body(frame, pos, version)
    has_tags = tagged and (
        body.get("node_endpoints")
        or any(p.get("current_leader") for t in body["responses"] for p in t["partition_responses"])
    )
    if has_tags:
        assert fast is None  # a leader hint: the schema reads it
    else:
        assert fast == (expected, len(frame))
    assert decode_response(PRODUCE, version, frame) == expected


@settings(max_examples=100, deadline=None)
@given(case=_responses(), data=st.data())
def test_a_truncated_answer_fails_as_the_schema_fails(
    case: tuple[int, dict[str, Any], bool], data: st.DataObject
) -> None:
    version, body, _tagged = case
    frame = _frame(version, body)
    cut = data.draw(st.integers(5, len(frame) - 1))
    pos = 5 if PRODUCE.response_header_version(version) >= 1 else 4
    assert decode_produce_body(frame[:cut], pos, version) is None
    with pytest.raises((SchemaError, ValueError)):
        decode_response(PRODUCE, version, frame[:cut])


def test_framing_uses_the_straight_line_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame goes through the codec: a codec that writes nothing leaves the schema's bytes."""
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}]}
    calls: list[int] = []

    def counting(body: Any, out: bytearray, version: int) -> list[Any] | None:
        calls.append(version)
        return produce_body_chunks(body, out, version)

    monkeypatch.setattr(framing, "produce_body_chunks", counting)
    frame = encode_request(PRODUCE, 9, 3, "c", body)
    assert calls == [9]
    monkeypatch.setattr(framing, "produce_body_chunks", lambda *a: None)
    assert encode_request(PRODUCE, 9, 3, "c", body) == frame