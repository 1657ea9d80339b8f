"""Our schemas against bytes that librdkafka, kafka-python and the broker really sent.

Requests are decoded and re-encoded: the result must be the captured bytes,
which checks field order, types and version ranges from both directions.
Responses (written by the broker) are decoded whole, with no bytes left over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aioproducer.protocol.framing import decode_request, decode_response, encode_request
from aioproducer.protocol.apis import APIS_BY_KEY
from aioproducer.protocol.records import parse_record_batches
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


@pytest.mark.parametrize(("name", "frame"), _frames(REQUEST), ids=lambda v: v if isinstance(v, str) else "")
def test_request_decodes_and_reencodes_to_the_same_bytes(name: str, frame: Frame) -> None:
    api, version, cid, client_id, body = decode_request(frame.payload, APIS_BY_KEY)
    assert (api.key, version, cid) == (frame.api_key, frame.api_version, frame.correlation_id)
    assert client_id and client_id.startswith("golden-")
    again = encode_request(api, version, cid, client_id, body)
    assert again[4:] == frame.payload


@pytest.mark.parametrize(("name", "frame"), _frames("<"), ids=lambda v: v if isinstance(v, str) else "")
def test_broker_response_decodes_completely(name: str, frame: Frame) -> None:
    api = APIS_BY_KEY[frame.api_key]
    msg = decode_response(api, frame.api_version, frame.payload)  # raises on leftovers
    if api.name == "ApiVersions":
        assert msg.error_code == 0
        keys = {k.api_key for k in msg.api_keys}
        assert {0, 3, 18, 22} <= keys
    elif api.name == "Metadata":
        assert msg.brokers and msg.brokers[0].port > 0
        assert any(t.name == "golden" for t in msg.topics)
    elif api.name == "InitProducerId":
        assert msg.error_code == 0 and msg.producer_id >= 0 and msg.producer_epoch >= 0
    elif api.name == "Produce":
        (topic,) = msg.responses
        (part,) = topic.partition_responses
        assert (topic.name, part.index, part.error_code) == ("golden", 0, 0)
        assert part.base_offset >= 0


def test_produce_request_records_parse_with_the_producer_id_from_init() -> None:
    for path in CAPTURES:
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
