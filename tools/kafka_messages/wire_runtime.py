"""Wire primitives shared by the generated message modules.

Classic versions prefix strings with an int16 length and byte arrays and
arrays with an int32 count, ``-1`` meaning null; flexible versions (KIP-482)
use an unsigned varint holding ``n + 1`` (``0`` meaning null) and end every
struct with a tagged-field section. Readers take ``(buf, pos)`` and return
``(value, pos)``; a short or malformed buffer raises :class:`MessageError`
from the module's ``decode`` (IndexError and struct.error are turned into it
there).
"""

from __future__ import annotations

import struct
import uuid

__all__ = [
    "I8",
    "I16",
    "I32",
    "I64",
    "ZERO_UUID",
    "Buffer",
    "MessageError",
    "UnsupportedVersionError",
    "r_array_len",
    "r_bytes",
    "r_cbytes",
    "r_cstr",
    "r_str",
    "r_uuid",
    "r_uvarint",
    "skip_tags",
    "uvarint",
    "w_bytes",
    "w_cbytes",
    "w_cstr",
    "w_str",
]

Buffer = bytes | bytearray | memoryview

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
ZERO_UUID = uuid.UUID(int=0)

_SMALL: tuple[bytes, ...] = tuple(bytes([i]) for i in range(128))


class MessageError(ValueError):
    """A value does not fit its field, or bytes do not fit the message."""


class UnsupportedVersionError(MessageError):
    """The version is outside the message's range, or cannot carry a value set
    (Java's ``UnsupportedVersionException``: a non-default value of a field the
    version lacks, unless the spec marks the field ``ignorable``)."""


def uvarint(value: int) -> bytes:
    """An unsigned varint (lengths and tags of flexible versions)."""
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        raise MessageError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def r_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise MessageError("varint longer than 10 bytes")


def w_str(out: bytearray, value: str | None, nullable: bool) -> None:
    """A classic string: int16 length (-1: null) and UTF-8 bytes."""
    if value is None:
        if not nullable:
            raise MessageError("a non-nullable string is None")
        out += b"\xff\xff"
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise MessageError(f"string of {len(data)} bytes exceeds 32767")
    out += I16.pack(len(data))
    out += data


def w_cstr(out: bytearray, value: str | None, nullable: bool) -> None:
    """A compact string: uvarint length + 1 (0: null) and UTF-8 bytes."""
    if value is None:
        if not nullable:
            raise MessageError("a non-nullable string is None")
        out.append(0)
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise MessageError(f"string of {len(data)} bytes exceeds 32767")
    out += uvarint(len(data) + 1)
    out += data


def w_bytes(out: bytearray, value: Buffer | None, nullable: bool) -> None:
    """Classic bytes: int32 length (-1: null) and the bytes."""
    if value is None:
        if not nullable:
            raise MessageError("a non-nullable byte array is None")
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(value))
    out += value


def w_cbytes(out: bytearray, value: Buffer | None, nullable: bool) -> None:
    """Compact bytes: uvarint length + 1 (0: null) and the bytes."""
    if value is None:
        if not nullable:
            raise MessageError("a non-nullable byte array is None")
        out.append(0)
        return
    out += uvarint(len(value) + 1)
    out += value


def r_str(buf: Buffer, pos: int) -> tuple[str | None, int]:
    (length,) = I16.unpack_from(buf, pos)
    pos += 2
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise MessageError("buffer ends inside a string")
    return bytes(buf[pos:end]).decode("utf-8"), end


def r_cstr(buf: Buffer, pos: int) -> tuple[str | None, int]:
    length, pos = r_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = pos + length - 1
    if end > len(buf):
        raise MessageError("buffer ends inside a string")
    return bytes(buf[pos:end]).decode("utf-8"), end


def r_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    (length,) = I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise MessageError("buffer ends inside a byte array")
    return bytes(buf[pos:end]), end


def r_cbytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    length, pos = r_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = pos + length - 1
    if end > len(buf):
        raise MessageError("buffer ends inside a byte array")
    return bytes(buf[pos:end]), end


def r_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise MessageError("buffer ends inside a uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def r_array_len(buf: Buffer, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1: null), bounded by the bytes left."""
    if flexible:
        count, pos = r_uvarint(buf, pos)
        count -= 1
    else:
        (count,) = I32.unpack_from(buf, pos)
        pos += 4
    if count > len(buf) - pos:  # every element takes at least one byte
        raise MessageError(f"array count {count} exceeds the bytes left")
    return count, pos


def skip_tags(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field section whose tags this version does not know."""
    count, pos = r_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = r_uvarint(buf, pos)
        size, pos = r_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MessageError("buffer ends inside a tagged field")
    return pos
