"""Minimal, independent readers for the captured golden frames.

Deliberately written against the protocol guide rather than with
``aioproducer``'s own schema code, so golden tests do not check our code
against itself. Only what the record tests need: Produce requests v3-v12
(record batches per partition) and InitProducerId responses.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tests.tools.capture_proxy import REQUEST, RESPONSE, Frame, load_frames

GOLDEN_DIR = Path(__file__).parent

PRODUCE = 0
INIT_PRODUCER_ID = 22

__all__ = [
    "GOLDEN_DIR",
    "REQUEST",
    "RESPONSE",
    "Frame",
    "init_producer_id_response",
    "load_frames",
    "produce_request_batches",
]


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def take(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        if len(out) != n:
            raise ValueError("frame ends early")
        self.pos += n
        return out

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def produce_request_batches(frame: Frame) -> list[tuple[str, int, bytes]]:
    """``(topic, partition, records)`` of a Produce request frame (v3-v12)."""
    if frame.direction != REQUEST or frame.api_key != PRODUCE:
        raise ValueError("not a Produce request")
    version = frame.api_version
    if not 3 <= version <= 12:
        raise ValueError(f"Produce v{version} not supported here")
    flexible = version >= 9  # KIP-482
    r = _Reader(frame.payload, 8)  # api_key, api_version, correlation_id
    client_id_len = r.fixed(">h")  # request header client_id is never compact
    r.take(max(client_id_len, 0))
    if flexible:
        r.skip_tagged_fields()
        n = r.uvarint() - 1  # transactional_id, compact nullable
    else:
        n = r.fixed(">h")
    r.take(max(n, 0))
    r.fixed(">h")  # acks
    r.fixed(">i")  # timeout_ms
    out = []
    topics = r.uvarint() - 1 if flexible else r.fixed(">i")
    for _ in range(topics):
        name = r.take(r.uvarint() - 1 if flexible else r.fixed(">h")).decode()
        partitions = r.uvarint() - 1 if flexible else r.fixed(">i")
        for _ in range(partitions):
            index = r.fixed(">i")
            size = r.uvarint() - 1 if flexible else r.fixed(">i")
            out.append((name, index, r.take(size)))
            if flexible:
                r.skip_tagged_fields()
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    if r.pos != len(frame.payload):
        raise ValueError(f"{len(frame.payload) - r.pos} bytes left after the Produce request")
    return out


def init_producer_id_response(frame: Frame) -> tuple[int, int, int]:
    """``(error_code, producer_id, producer_epoch)`` of an InitProducerId response."""
    if frame.direction != RESPONSE or frame.api_key != INIT_PRODUCER_ID:
        raise ValueError("not an InitProducerId response")
    r = _Reader(frame.payload, 4)  # correlation_id
    if frame.api_version >= 2:  # flexible versions: response header v1
        r.skip_tagged_fields()
    r.fixed(">i")  # throttle_time_ms
    error = r.fixed(">h")
    producer_id = r.fixed(">q")
    epoch = r.fixed(">h")
    return error, producer_id, epoch
