"""Variable-length integers as Kafka encodes them.

Two flavours exist on the wire:

* unsigned varints (``uvarint``): compact lengths and tagged-field headers of the
  flexible protocol versions (KIP-482);
* zigzag-encoded signed varints (``varint``/``varlong``): fields of each record
  inside a record batch v2 (KIP-98).

Both use 7 payload bits per byte, least significant group first, with the high
bit set on every byte but the last. Decoders take ``(buf, pos)`` and return
``(value, new_pos)`` so that callers can walk a buffer without slicing it.
"""

from __future__ import annotations

__all__ = [
    "decode_uvarint",
    "decode_varint",
    "encode_uvarint",
    "encode_varint",
    "size_of_uvarint",
    "size_of_varint",
    "unzigzag",
    "zigzag",
]

# The encodings of small values are looked up instead of computed: record
# fields (attributes, offset deltas, short lengths) are nearly always small.
_SMALL_UVARINT: tuple[bytes, ...] = tuple(bytes([i]) for i in range(128))


def zigzag(value: int) -> int:
    """Map a signed 64-bit integer onto an unsigned one (-1 -> 1, 1 -> 2, ...)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    return (value >> 1) ^ -(value & 1)


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint."""
    if value < 128:
        if value < 0:
            raise ValueError(f"unsigned varint cannot encode {value}")
        return _SMALL_UVARINT[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed integer (int32 or int64 range) as a zigzag varint."""
    if -64 <= value < 64:
        return _SMALL_UVARINT[(value << 1) ^ (value >> 63)]
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varint out of the int64 range: {value}")
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``buf[pos:]``; return (value, next position).

    Raises ``ValueError`` if the buffer ends inside the varint or the varint is
    longer than ten bytes (the most a 64-bit value needs).
    """
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ValueError("buffer ends inside a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag signed varint; return (value, next position)."""
    raw, pos = decode_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def size_of_uvarint(value: int) -> int:
    """Number of bytes :func:`encode_uvarint` produces for ``value``."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def size_of_varint(value: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``value``."""
    return size_of_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
