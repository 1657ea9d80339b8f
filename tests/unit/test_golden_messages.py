"""The generated messages against bytes that librdkafka, kafka-python and the broker really sent.

Requests are decoded and re-encoded: the result must be the captured bytes,
which checks field order, types and version ranges from both directions.
Responses (written by the broker) are decoded whole, with no bytes left over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aioproducer.protocol.apis import (
    APIS_BY_KEY,
    COORDINATOR_KEY_TRANSACTION,
    FIND_COORDINATOR,
)
from aioproducer.protocol.framing import decode_request, decode_response, encode_request
from aioproducer.protocol.record_parsing import parse_record_batches
from tests.tools.capture_proxy import REQUEST, Frame, load_frames

GOLDEN = Path(__file__).parent.parent / "golden"
CAPTURES = sorted(GOLDEN.glob("*.frames"))


def _ours(frame: Frame) -> bool:
    api = APIS_BY_KEY.get(frame.api_key)
    return api is not None and api.min_version <= frame.api_version <= api.max_version


def _frames(direction: str) -> list[tuple[str, Frame]]:
    out = []
    for path in CAPTURES:
        for frame in load_frames(path):
            if frame.direction == direction and _ours(frame):
                out.append((f"{path.stem}:{frame.api_key}v{frame.api_version}", frame))
    return out


def test_captures_cover_every_api_we_speak() -> None:
    seen = {(f.api_key, f.direction) for path in CAPTURES for f in load_frames(path) if _ours(f)}
    for key in APIS_BY_KEY:
        assert (key, REQUEST) in seen and (key, "<") in seen, key


@pytest.mark.parametrize(
    ("name", "frame"), _frames(REQUEST), ids=lambda v: v if isinstance(v, str) else ""
)
def test_request_decodes_and_reencodes_to_the_same_bytes(name: str, frame: Frame) -> None:
    api, version, cid, client_id, body = decode_request(frame.payload, APIS_BY_KEY)
    assert (api.key, version, cid) == (frame.api_key, frame.api_version, frame.correlation_id)
    assert client_id and client_id.startswith("golden-")
    again = encode_request(api, version, cid, client_id, body)
    assert again[4:] == frame.payload


@pytest.mark.parametrize(
    ("name", "frame"), _frames("<"), ids=lambda v: v if isinstance(v, str) else ""
)
def test_broker_response_decodes_completely(name: str, frame: Frame) -> None:
    api = APIS_BY_KEY[frame.api_key]
    msg = decode_response(api, frame.api_version, frame.payload)  # raises on leftovers
    if api.name == "ApiVersions":
        assert msg.error_code == 0
        keys = {k.api_key for k in msg.api_keys}
        assert {0, 3, 18, 22} <= keys
    elif api.name == "Metadata":
        assert msg.brokers and msg.brokers[0].port > 0
        assert any(t.name.startswith("golden") for t in msg.topics)
    elif api.name == "InitProducerId":
        assert msg.error_code == 0 and msg.producer_id >= 0 and msg.producer_epoch >= 0
    elif api.name == "Produce":
        assert msg.responses and all(t.name.startswith("golden") for t in msg.responses)
        for topic in msg.responses:
            for part in topic.partition_responses:
                assert part.error_code == 0 and part.base_offset >= 0, part
    elif api.name == "FindCoordinator":
        found = msg.coordinators if frame.api_version >= 4 else [msg]
        assert found and all(c.error_code == 0 and c.node_id >= 0 and c.port > 0 for c in found)
    elif api.name == "AddPartitionsToTxn":
        results = [p for t in msg.results_by_topic_v3_and_below for p in t.results_by_partition]
        assert results and all(p.partition_error_code == 0 for p in results)
    elif api.name in ("AddOffsetsToTxn", "EndTxn"):
        assert msg.error_code == 0
    elif api.name == "TxnOffsetCommit":
        results = [p for t in msg.topics for p in t.partitions]
        assert results and all(p.error_code == 0 for p in results)
    elif api.name == "SaslHandshake":
        # Tansu offers SCRAM and OAUTHBEARER; the captured runs asked for SCRAM.
        assert msg.error_code == 0 and any(m.startswith("SCRAM-") for m in msg.mechanisms)
    elif api.name == "SaslAuthenticate":
        # A server-first message (r=..., s=..., i=...) or Tansu's server-final
        # refusal of a user it does not know.
        assert msg.error_code == 0 and msg.auth_bytes
        assert msg.auth_bytes.startswith(b"r=") or msg.auth_bytes == b"e=unknown-user"
        assert msg.session_lifetime_ms >= 0
    else:
        raise AssertionError(f"no checks for {api.name} responses")


def test_produce_request_records_parse_with_the_producer_id_from_init() -> None:
    for path in CAPTURES:
        if "_sasl_" in path.stem:  # authentication refused: nothing was produced
            continue
        frames = load_frames(path)
        init = [f for f in frames if f.api_key == 22 and f.direction == "<"]
        produce = [f for f in frames if f.api_key == 0 and f.direction == REQUEST]
        assert init and produce, path.name
        pid = decode_response(APIS_BY_KEY[22], init[0].api_version, init[0].payload).producer_id
        _, _, _, _, body = decode_request(produce[0].payload, APIS_BY_KEY)
        records = body.topic_data[0].partition_data[0].records
        (batch,) = parse_record_batches(records)
        assert batch.producer_id == pid and batch.base_sequence == 0
        assert len(batch.records) >= 1


def test_sasl_scram_exchange_is_client_first_then_client_final() -> None:
    """librdkafka's SCRAM over SaslAuthenticate: n,, then c=biws (RFC 5802)."""
    for path in (p for p in CAPTURES if "scram" in p.stem):
        frames = [f for f in load_frames(path) if f.direction == REQUEST and f.api_key == 36]
        first, final = (decode_request(f.payload, APIS_BY_KEY)[4].auth_bytes for f in frames)
        assert first.startswith(b"n,,n=alice,r=")
        assert final.startswith(b"c=biws,r=") and b",p=" in final


TRANSACTIONAL = [path for path in CAPTURES if "transactional" in path.stem]


@pytest.mark.parametrize("path", TRANSACTIONAL, ids=lambda p: p.stem)
def test_transactional_session_follows_the_protocol(path: Path) -> None:
    """Each partition is added to the transaction before its records are produced."""
    frames = [f for f in load_frames(path) if f.direction == REQUEST]
    bodies = [
        (frame.api_key, decode_request(frame.payload, APIS_BY_KEY)[4])
        for frame in frames
        if frame.api_key in (0, 10, 22, 24, 25, 26, 28)
    ]
    (txn_id,) = {b.transactional_id for key, b in bodies if key == 22}
    lookups = {
        (b.key_type, k) for key, b in bodies if key == 10 for k in (b.coordinator_keys or [b.key])
    }
    assert (COORDINATOR_KEY_TRANSACTION, txn_id) in lookups
    added: set[tuple[str, int]] = set()
    ends = []
    for key, body in bodies:
        if key == 24:  # v0-3: the one transaction at top level
            assert body.v3_and_below_transactional_id == txn_id
            added |= {(t.name, p) for t in body.v3_and_below_topics for p in t.partitions}
        elif key in (25, 26, 28):
            assert body.transactional_id == txn_id
        if key == 26:
            ends.append(body.committed)
            added.clear()
        elif key == 0:
            assert body.transactional_id == txn_id
            for topic in body.topic_data:
                for part in topic.partition_data:
                    assert (topic.name, part.index) in added
                    (batch,) = parse_record_batches(part.records)
                    assert batch.is_transactional
    assert ends == [True, False]  # one committed transaction, then one aborted


def test_find_coordinator_batched_shape_above_our_max() -> None:
    """kafka-python sends FindCoordinator v6: the v4 batched shape (KIP-699).

    v5 only adds the TRANSACTION_ABORTABLE error (KIP-890) and v6 the share
    group key type (KIP-932); the generated class reads and writes them all.
    """
    frames = [f for path in CAPTURES for f in load_frames(path) if f.api_key == 10]
    assert {f.api_version for f in frames if f.api_version >= 4}, "no batched capture"
    for frame in frames:
        if frame.direction == REQUEST:
            _, version, cid, client_id, body = decode_request(frame.payload, APIS_BY_KEY)
            assert (body.coordinator_keys == []) == (version < 4)
            again = encode_request(FIND_COORDINATOR, version, cid, client_id, body)
            assert again[4:] == frame.payload
        else:
            msg = decode_response(FIND_COORDINATOR, frame.api_version, frame.payload)
            assert bool(msg.coordinators) == (frame.api_version >= 4)
