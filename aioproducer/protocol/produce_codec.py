"""Produce request and response bodies, written out by hand for the hot path.

Every Produce request carries a few batches, and every answer a few
partitions: walking the generic schema (:data:`~.messages.PRODUCE`, a tree of
fields interpreted per value) costs dozens of calls per request. These two
functions do the same for Produce v3-v12 in straight-line code (other versions
take the schema). The schema
stays the reference: tests/unit/test_produce_codec.py proves both give the
same bytes and the same :class:`Message` on random bodies and answers, and
whatever is out of the ordinary falls back to it:

- :func:`encode_produce_body` hands back False (having written nothing) for a
  value the wire types cannot hold, so the schema raises its own typed error
  (and :func:`produce_body_chunks` None);
- :func:`decode_produce_body` returns None for a truncated or malformed body
  and for any non-empty tagged-field section (KIP-951's ``current_leader`` and
  ``node_endpoints`` come only with a refusal), which the schema then decodes.

Like the schema's decoder, the decoder sets only the fields a version has,
plus each tagged field at its default (flexible versions from v9, tagged
fields from v10).
"""

from __future__ import annotations

import struct
from typing import Any

from .schema import Message
from .varint import encode_uvarint as _uvarint

__all__ = ["decode_produce_body", "encode_produce_body", "produce_body_chunks"]

_FIRST_VERSION = 3  # record batch v2 (KIP-98); older versions take the schema
_LAST_VERSION = 12  # v13 names topics by id (KIP-516): not written out here
_FLEXIBLE_FROM = 9
_TAGGED_FROM = 10  # current_leader and node_endpoints (KIP-951)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ACKS_TIMEOUT = struct.Struct(">hi")
# index, error_code, base_offset, log_append_time_ms
_PARTITION_HEAD = struct.Struct(">ihqq")
# A flexible partition answer's tail in the usual case: record_errors empty,
# error_message null, no tagged fields.
_NO_RECORD_ERRORS = b"\x01\x00\x00"


def encode_produce_body(body: Any, out: bytearray, version: int) -> bool:
    """Append the request body of Produce ``version`` to ``out``; False (and
    ``out`` unchanged) when a value is out of range: the schema then reports it."""
    chunks = produce_body_chunks(body, out, version)
    if chunks is None:
        return False
    for chunk in chunks[1:]:  # chunks[0] is out itself
        out += chunk
    return True


def produce_body_chunks(body: Any, out: bytearray, version: int) -> list[Any] | None:
    """The request body of Produce ``version`` as buffers that follow ``out``.

    The result starts with ``out`` itself (the body's first fields appended to
    it); each batch's records follow as the very buffer the body holds, with
    the small fields between batches in buffers of their own. Written out with
    ``writelines`` the records are copied once, straight into the socket's
    buffer (or a single join), instead of into a request buffer that grows
    batch by batch. None (``out`` unchanged) when a value is out of range.
    """
    if not _FIRST_VERSION <= version <= _LAST_VERSION:
        return None
    start = len(out)
    chunks: list[Any] = [out]
    try:
        _encode(body, out, version, chunks)
    except (struct.error, TypeError, AttributeError, KeyError, UnicodeError):
        del out[start:]
        return None
    return chunks


def _encode(body: Any, out: bytearray, version: int, chunks: list[Any]) -> None:
    """Write the body to ``out``; each batch's records go to ``chunks`` by
    reference, and a fresh buffer takes the fields after them."""
    flexible = version >= _FLEXIBLE_FROM
    tid = body.get("transactional_id")
    if tid is None:
        out += b"\x00" if flexible else b"\xff\xff"
    else:
        data = tid.encode("utf-8")
        out += _uvarint(len(data) + 1) if flexible else _I16.pack(len(data))
        out += data
    out += _ACKS_TIMEOUT.pack(body.get("acks", 0), body.get("timeout_ms", 0))
    topics = body["topic_data"]
    out += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for topic in topics:
        name = topic["name"].encode("utf-8")
        out += _uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
        out += name
        parts = topic["partition_data"]
        out += _uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for part in parts:
            out += _I32.pack(part["index"])
            records = part["records"]
            if records is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                out += _uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
                memoryview(records)  # a buffer, or TypeError (the schema reports it)
                chunks.append(records)
                out = bytearray()
                chunks.append(out)
            if flexible:
                out.append(0)  # no tagged fields
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)


class _Fallback(Exception):
    """Something the straight-line decoder leaves to the schema."""


def decode_produce_body(frame: bytes, pos: int, version: int) -> tuple[Message, int] | None:
    """The response body of Produce ``version`` at ``frame[pos:]`` and where it
    ends, or None to have the schema decode it (see the module docstring)."""
    if not _FIRST_VERSION <= version <= _LAST_VERSION:
        return None
    try:
        return _decode(frame, pos, version)
    except (_Fallback, struct.error, IndexError, UnicodeDecodeError):
        return None


def _length(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array/string length (-1: null) in the version's form."""
    if not flexible:
        return _I32.unpack_from(frame, pos)[0], pos + 4
    raw = frame[pos]
    if raw < 0x80:
        return raw - 1, pos + 1
    value, shift = 0, 0
    while True:
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value - 1, pos
        shift += 7
        if shift > 63:
            raise _Fallback


def _string(frame: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        length, pos = _length(frame, pos, True)
    else:
        length, pos = _I16.unpack_from(frame, pos)[0], pos + 2
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(frame):
        raise _Fallback
    return frame[pos:end].decode("utf-8"), end


def _no_tags(frame: bytes, pos: int) -> int:
    if frame[pos] != 0:
        raise _Fallback  # a tagged field is present: the schema reads it
    return pos + 1


def _decode(frame: bytes, pos: int, version: int) -> tuple[Message, int]:
    flexible = version >= _FLEXIBLE_FROM
    tagged = version >= _TAGGED_FROM
    count, pos = _length(frame, pos, flexible)
    if count < 0 or count > len(frame) - pos:
        raise _Fallback
    responses = []
    for _ in range(count):
        name, pos = _string(frame, pos, flexible)
        if name is None:
            raise _Fallback
        n_parts, pos = _length(frame, pos, flexible)
        if n_parts < 0 or n_parts > len(frame) - pos:
            raise _Fallback
        parts = []
        for _ in range(n_parts):
            index, error_code, base_offset, append_time = _PARTITION_HEAD.unpack_from(frame, pos)
            pos += _PARTITION_HEAD.size
            part = Message(
                index=index, error_code=error_code, base_offset=base_offset,
                log_append_time_ms=append_time,
            )
            if version >= 5:
                part["log_start_offset"] = _I64.unpack_from(frame, pos)[0]
                pos += 8
            if flexible and frame[pos : pos + 3] == _NO_RECORD_ERRORS:
                # The usual answer, read at once: no record errors (compact
                # length 1: empty), no error message (0: null), no tagged fields.
                part["record_errors"] = []
                part["error_message"] = None
                if tagged:
                    part["current_leader"] = None
                parts.append(part)
                pos += 3
                continue
            if version >= 8:
                n_errors, pos = _length(frame, pos, flexible)
                if n_errors > len(frame) - pos:
                    raise _Fallback
                record_errors: list[Message] | None = None
                if n_errors >= 0:
                    record_errors = []
                    for _ in range(n_errors):
                        batch_index = _I32.unpack_from(frame, pos)[0]
                        message, pos = _string(frame, pos + 4, flexible)
                        if flexible:
                            pos = _no_tags(frame, pos)
                        record_errors.append(
                            Message(batch_index=batch_index, batch_index_error_message=message)
                        )
                part["record_errors"] = record_errors
                part["error_message"], pos = _string(frame, pos, flexible)
            if tagged:
                part["current_leader"] = None
            if flexible:
                pos = _no_tags(frame, pos)
            parts.append(part)
        topic = Message(name=name, partition_responses=parts)
        if flexible:
            pos = _no_tags(frame, pos)
        responses.append(topic)
    body = Message(responses=responses, throttle_time_ms=_I32.unpack_from(frame, pos)[0])
    pos += 4
    if tagged:
        body["node_endpoints"] = []
    if flexible:
        pos = _no_tags(frame, pos)
    return body, pos
