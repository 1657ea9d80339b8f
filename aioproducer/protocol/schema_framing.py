"""Request and response frames encoded with the hand schemas (``schema.py``).

The mock broker and the tests that drive it still speak these while they move
to the generated classes of :mod:`.framing`; this module goes with the hand
schemas. Framing itself (size prefixes, headers) is :mod:`.framing`'s.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from .framing import FrameDecoder, FrameTooLargeError, read_correlation_id
from .messages import API_VERSIONS, PRODUCE, Api
from .produce_codec import decode_produce_body, produce_body_chunks
from .schema import Message, SchemaError, skip_tagged_fields

__all__ = [
    "FrameDecoder",
    "FrameTooLargeError",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_chunks",
    "encode_response",
    "read_correlation_id",
]

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_NULL_CLIENT_ID = b"\xff\xff"


def _client_id_bytes(client_id: str | None) -> bytes:
    # The client id keeps its classic int16-length form even in header v2 (KIP-482).
    if client_id is None:
        return _NULL_CLIENT_ID
    data = client_id.encode("utf-8")
    return _SIZE.pack(len(data))[2:] + data


def encode_request_chunks(
    api: Api,
    version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> list[Any]:
    """A whole request frame, size prefix included, as buffers to write in order.

    A Produce request's record batches are among them by reference (see
    :func:`~.produce_codec.produce_body_chunks`): the caller hands the list to
    ``writelines`` and must not change those buffers while the frame is
    written. Any other request is one buffer.
    """
    out = bytearray(4)
    out += _REQUEST_HEADER.pack(api.key, version, correlation_id)
    out += _client_id_bytes(client_id)
    if api.request_header_version(version) >= 2:
        out.append(0)  # empty tagged fields of header v2
    # Produce, the one request on the hot path, has a straight-line twin of its schema.
    if api is PRODUCE:
        chunks = produce_body_chunks(body, out, version)
        if chunks is not None:
            if not chunks[-1]:
                chunks.pop()
            _SIZE.pack_into(out, 0, sum(map(len, chunks)) - 4)
            return chunks
    api.request.encode_version(body, out, version, api.is_flexible(version))
    _SIZE.pack_into(out, 0, len(out) - 4)
    return [out]


def encode_request(
    api: Api,
    version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> bytes:
    """Encode a whole request frame, size prefix included."""
    return b"".join(encode_request_chunks(api, version, correlation_id, client_id, body))


def decode_response(api: Api, version: int, frame: bytes) -> Message:
    """Decode a response frame body (after the size prefix) into a Message.

    An ApiVersions answer to a version the broker does not know comes back in
    v0 form with error UNSUPPORTED_VERSION (35), listing what the broker speaks;
    it is decoded as v0 so the caller can retry with a version from that list.
    """
    pos = 4
    if api.response_header_version(version) >= 1:
        pos = skip_tagged_fields(frame, pos)
    if api is API_VERSIONS and version > 0 and frame[pos : pos + 2] == b"\x00\x23":
        version = 0
    fast = decode_produce_body(frame, pos, version) if api is PRODUCE else None
    if fast is not None and fast[1] == len(frame):
        body, end = fast
    else:
        body, end = api.response.decode_version(frame, pos, version, api.is_flexible(version))
    if end != len(frame):
        raise SchemaError(
            f"{api.name} v{version} response has {len(frame) - end} unread trailing bytes"
        )
    return body


def decode_request(frame: bytes, apis: Mapping[int, Api]) -> tuple[Api, int, int, str | None, Message]:
    """Decode a request frame body: (api, version, correlation id, client id, body).

    Used by the mock broker and by tests that check our own encoder.
    """
    if len(frame) < 10:
        raise SchemaError("request frame shorter than its header")
    api_key, version, correlation_id = _REQUEST_HEADER.unpack_from(frame, 0)
    api = apis.get(api_key)
    if api is None:
        raise SchemaError(f"unknown api key {api_key}")
    (length,) = struct.unpack_from(">h", frame, 8)
    pos = 10
    client_id = None
    if length >= 0:
        client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        pos += length
    if api.request_header_version(version) >= 2:
        pos = skip_tagged_fields(frame, pos)
    body, _ = api.request.decode_version(frame, pos, version, api.is_flexible(version))
    return api, version, correlation_id, client_id, body


def encode_response(api: Api, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """Encode a whole response frame, size prefix included (mock broker side)."""
    out = bytearray(4)
    out += _CORRELATION.pack(correlation_id)
    if api.response_header_version(version) >= 1:
        out.append(0)
    api.response.encode_version(body, out, version, api.is_flexible(version))
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)
