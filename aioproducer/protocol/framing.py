"""Size-prefixed frames and request/response headers.

Every Kafka message on the wire is ``int32 size`` followed by ``size`` bytes.
A request frame holds a request header then the body; a response frame holds a
response header (just the correlation id, plus tagged fields in header v1) then
the body. Bodies are Kafka's generated message classes (``protocol/generated``),
named per API by :mod:`.apis`. :class:`FrameDecoder` accepts input in
arbitrary pieces, so the I/O layer can hand it whatever a socket read returned.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, TypeVar

from .apis import API_VERSIONS, Api
from .generated._wire import MessageError, skip_tags

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

Resp = TypeVar("Resp")

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_NULL_CLIENT_ID = b"\xff\xff"
_UNSUPPORTED_VERSION = b"\x00\x23"  # error 35 at the head of an ApiVersions body

# Far above any sane response (message.max.bytes defaults to 1 MiB, fetch.max.bytes
# to 50 MiB); a larger prefix means we are not talking to a Kafka broker.
DEFAULT_MAX_FRAME = 256 * 1024 * 1024


class FrameTooLargeError(ValueError):
    """A size prefix larger than the decoder allows (or negative)."""


class FrameDecoder:
    """Split a byte stream into frames. Feed it bytes; it returns whole frames."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add ``data``; return every frame body now complete (without the prefix)."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise FrameTooLargeError(f"frame size {size} outside 0..{self._max}")
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)


def _client_id_bytes(client_id: str | None) -> bytes:
    # The client id keeps its classic int16-length form even in header v2 (KIP-482).
    if client_id is None:
        return _NULL_CLIENT_ID
    data = client_id.encode("utf-8")
    return _SIZE.pack(len(data))[2:] + data


def encode_request_chunks(
    api: Api[Any, Any], version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Any]:
    """A whole request frame, size prefix included, as buffers to write in order.

    ``body`` is an instance of ``api.request``; a value that does not fit its
    field at ``version`` raises :class:`~.generated._wire.MessageError`. A
    Produce request's record batches are among the buffers by reference (the
    generated ``encode_chunks``): the caller hands the list to ``writelines``
    and must not change those buffers while the frame is written. Any other
    request is one buffer.
    """
    if type(body) is not api.request:
        raise TypeError(
            f"{api.name} request must be a {api.request.__name__}, not {type(body).__name__}"
        )
    out = bytearray(4)
    out += _REQUEST_HEADER.pack(api.key, version, correlation_id)
    out += _client_id_bytes(client_id)
    if api.request_header_version(version) >= 2:
        out.append(0)  # empty tagged fields of header v2
    encode_chunks = getattr(body, "encode_chunks", None)
    if encode_chunks is not None:
        chunks: list[Any] = encode_chunks(out, version)
        if not chunks[-1]:
            chunks.pop()  # the empty buffer after the last record set
        _SIZE.pack_into(out, 0, sum(map(len, chunks)) - 4)
        return chunks
    body.encode_into(out, version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return [out]


def encode_request(
    api: Api[Any, Any], version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """Encode a whole request frame, size prefix included."""
    return b"".join(encode_request_chunks(api, version, correlation_id, client_id, body))


def read_correlation_id(frame: bytes) -> int:
    """The correlation id at the start of any response frame body."""
    if len(frame) < 4:
        raise MessageError("response frame shorter than its header")
    return int(_CORRELATION.unpack_from(frame, 0)[0])


def decode_response(api: Api[Any, Resp], version: int, frame: bytes) -> Resp:
    """Decode a response frame body (after the size prefix) into ``api.response``.

    An ApiVersions answer to a version the broker does not know comes back in
    v0 form with error UNSUPPORTED_VERSION (35), listing what the broker speaks;
    it is decoded as v0 so the caller can retry with a version from that list
    (Java's ``ApiVersionsResponse`` fallback, KIP-511).
    """
    try:
        pos = 4
        if api.response_header_version(version) >= 1:
            pos = skip_tags(frame, pos)
        if api is API_VERSIONS and version > 0 and frame[pos : pos + 2] == _UNSUPPORTED_VERSION:
            version = 0
        decode_from = api.response.decode_from  # type: ignore[attr-defined]  # generated classmethod
        body, end = decode_from(frame, pos, version)
    except IndexError:
        raise MessageError(f"{api.name} v{version} response ends early") from None
    if end != len(frame):
        raise MessageError(
            f"{api.name} v{version} response has {len(frame) - end} unread trailing bytes"
        )
    return body  # type: ignore[no-any-return]  # an instance of api.response


def decode_request(
    frame: bytes, apis: Mapping[int, Api[Any, Any]]
) -> tuple[Api[Any, Any], int, int, str | None, Any]:
    """Decode a request frame body: (api, version, correlation id, client id, body).

    Used by the mock broker and by tests that check our own encoder.
    """
    if len(frame) < 10:
        raise MessageError("request frame shorter than its header")
    api_key, version, correlation_id = _REQUEST_HEADER.unpack_from(frame, 0)
    api = apis.get(api_key)
    if api is None:
        raise MessageError(f"unknown api key {api_key}")
    (length,) = struct.unpack_from(">h", frame, 8)
    pos = 10
    client_id = None
    if length >= 0:
        client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        pos += length
    try:
        if api.request_header_version(version) >= 2:
            pos = skip_tags(frame, pos)
    except IndexError:
        raise MessageError(f"{api.name} v{version} request header ends early") from None
    body, _ = api.request.decode_from(frame, pos, version)
    return api, version, correlation_id, client_id, body


def encode_response(api: Api[Any, Any], version: int, correlation_id: int, body: Any) -> bytes:
    """Encode a whole response frame, size prefix included (mock broker side)."""
    if type(body) is not api.response:
        raise TypeError(
            f"{api.name} response must be a {api.response.__name__}, not {type(body).__name__}"
        )
    out = bytearray(4)
    out += _CORRELATION.pack(correlation_id)
    if api.response_header_version(version) >= 1:
        out.append(0)
    body.encode_into(out, version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)
