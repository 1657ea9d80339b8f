"""Message schemas as data, and the one interpreter that encodes and decodes them.

Kafka defines each request and response as a tree of named fields, each present
in a range of versions. We write those trees down as :class:`Struct` values (see
``messages.py``) and walk them here, instead of hand-writing a class per version.

Two wire dialects exist for the same schema:

* classic versions: strings and byte arrays carry int16/int32 lengths, arrays an
  int32 count, ``-1`` meaning null;
* flexible versions (KIP-482): lengths and counts are unsigned varints holding
  ``n + 1`` (``0`` meaning null), and every struct ends with a tagged-field
  section. A field declared with a ``tag`` lives there (written only when it
  differs from its default, read when present); unknown tags are skipped.

Decoded messages are :class:`Message` objects: dicts that also allow attribute
access, so callers can write ``resp.brokers[0].host``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .varint import decode_uvarint, encode_uvarint

__all__ = [
    "BOOL",
    "BYTES",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UUID",
    "Array",
    "Field",
    "Message",
    "SchemaError",
    "Struct",
    "parse_versions",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MISSING: Any = object()


class SchemaError(ValueError):
    """A value does not fit its field, or bytes do not fit the schema."""


class Message(dict[str, Any]):
    """A decoded (or to-be-encoded) struct: a dict with attribute access."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def parse_versions(spec: str | None) -> tuple[int, int]:
    """Parse ``"3+"``, ``"1-4"`` or ``"2"`` into an inclusive (low, high) range."""
    if spec is None or spec == "none":
        return (1, 0)  # empty range
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    if "-" in spec:
        low, high = spec.split("-")
        return (int(low), int(high))
    return (int(spec), int(spec))


class _Type:
    """A wire type: knows how to write a value and read it back."""

    name = "?"

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        raise NotImplementedError

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        raise NotImplementedError

    def default(self) -> Any:
        return None


class _Fixed(_Type):
    def __init__(self, name: str, fmt: struct.Struct, zero: Any) -> None:
        self.name = name
        self._fmt = fmt
        self._zero = zero

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        try:
            out += self._fmt.pack(value)
        except struct.error as exc:
            raise SchemaError(f"{self.name} cannot hold {value!r}: {exc}") from None

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        end = pos + self._fmt.size
        if end > len(buf):
            raise SchemaError(f"buffer ends inside an {self.name}")
        return self._fmt.unpack_from(buf, pos)[0], end

    def default(self) -> Any:
        return self._zero


class _Bool(_Type):
    name = "bool"

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        out.append(1 if value else 0)

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        if pos >= len(buf):
            raise SchemaError("buffer ends inside a bool")
        return buf[pos] != 0, pos + 1

    def default(self) -> Any:
        return False


class _Uuid(_Type):
    name = "uuid"
    _ZERO = b"\x00" * 16

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        out += self._ZERO if value is None else uuid.UUID(str(value)).bytes

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        if pos + 16 > len(buf):
            raise SchemaError("buffer ends inside a uuid")
        raw = bytes(buf[pos : pos + 16])
        return (None if raw == self._ZERO else uuid.UUID(bytes=raw)), pos + 16


def _write_length(out: bytearray, length: int | None, flexible: bool, width: struct.Struct) -> None:
    if flexible:
        out += encode_uvarint(0 if length is None else length + 1)
    else:
        out += width.pack(-1 if length is None else length)


def _read_length(buf: Any, pos: int, flexible: bool, width: struct.Struct) -> tuple[int, int]:
    """Return (length, pos); length -1 means null."""
    if flexible:
        raw, pos = decode_uvarint(buf, pos)
        return raw - 1, pos
    end = pos + width.size
    if end > len(buf):
        raise SchemaError("buffer ends inside a length")
    return width.unpack_from(buf, pos)[0], end


class _String(_Type):
    name = "string"

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise SchemaError("string field is not nullable in this version")
            _write_length(out, None, flexible, _I16)
            return
        data = value.encode("utf-8")
        _write_length(out, len(data), flexible, _I16)
        out += data

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        length, pos = _read_length(buf, pos, flexible, _I16)
        if length < 0:
            return None, pos
        end = pos + length
        if end > len(buf):
            raise SchemaError("buffer ends inside a string")
        return bytes(buf[pos:end]).decode("utf-8"), end

    def default(self) -> Any:
        return ""


class _Bytes(_Type):
    name = "bytes"

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        if value is None:
            if not nullable:
                raise SchemaError("bytes field is not nullable in this version")
            _write_length(out, None, flexible, _I32)
            return
        _write_length(out, len(value), flexible, _I32)
        out += value

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        length, pos = _read_length(buf, pos, flexible, _I32)
        if length < 0:
            return None, pos
        end = pos + length
        if end > len(buf):
            raise SchemaError("buffer ends inside a byte array")
        return bytes(buf[pos:end]), end

    def default(self) -> Any:
        return b""


INT8 = _Fixed("int8", _I8, 0)
INT16 = _Fixed("int16", _I16, 0)
INT32 = _Fixed("int32", _I32, 0)
INT64 = _Fixed("int64", _I64, 0)
BOOL = _Bool()
UUID = _Uuid()
STRING = _String()
BYTES = _Bytes()
# Record batches travel as a nullable byte array whose content protocol/records.py owns.
RECORDS = _Bytes()


class Field:
    """One named field of a struct, present in ``versions``, nullable in ``nullable``.

    ``tag`` makes it a tagged field (KIP-482): it travels in the struct's
    tagged-field section of flexible versions, and only when not its default.
    """

    __slots__ = ("default", "high", "low", "name", "null_high", "null_low", "tag", "type")

    def __init__(
        self,
        name: str,
        type_: _Type,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        default: Any = _MISSING,
        tag: int | None = None,
    ) -> None:
        self.name = name
        self.type = type_
        self.low, self.high = parse_versions(versions)
        self.null_low, self.null_high = parse_versions(nullable)
        self.default = type_.default() if default is _MISSING else default
        self.tag = tag

    def present(self, version: int) -> bool:
        return self.low <= version <= self.high

    def nullable(self, version: int) -> bool:
        return self.null_low <= version <= self.null_high

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type.name}, {self.low}-{self.high})"


class Struct(_Type):
    """An ordered list of fields; encodes from and decodes to :class:`Message`."""

    name = "struct"

    def __init__(self, *fields: Field) -> None:
        self.fields = fields
        self._plans: dict[int, tuple[tuple[Field, bool], ...]] = {}
        self._tag_plans: dict[int, dict[int, Field]] = {}

    def _plan(self, version: int) -> tuple[tuple[Field, bool], ...]:
        plan = self._plans.get(version)
        if plan is None:
            plan = tuple(
                (f, f.nullable(version)) for f in self.fields if f.present(version) and f.tag is None
            )
            self._plans[version] = plan
        return plan

    def _tagged(self, version: int) -> dict[int, Field]:
        """The tagged fields of ``version`` by tag, in tag order (usually none)."""
        tagged = self._tag_plans.get(version)
        if tagged is None:
            tagged = {
                f.tag: f
                for f in sorted(self.fields, key=lambda f: f.tag or 0)
                if f.tag is not None and f.present(version)
            }
            self._tag_plans[version] = tagged
        return tagged

    def encode_version(self, value: Any, out: bytearray, version: int, flexible: bool) -> None:
        get: Callable[[str, Any], Any] = value.get
        for field, nullable in self._plan(version):
            item = get(field.name, _MISSING)
            if item is _MISSING:
                item = field.default
            if isinstance(field.type, Array):
                field.type.encode_version(item, out, version, flexible, nullable)
            elif isinstance(field.type, Struct):  # a struct is never null: no nullable to pass
                field.type.encode_version(item, out, version, flexible)
            else:
                try:
                    field.type.encode(item, out, flexible, nullable)
                except SchemaError as exc:
                    raise SchemaError(f"field {field.name!r} (v{version}): {exc}") from None
        if flexible:
            tagged = self._tagged(version)
            if tagged:
                self._encode_tagged(get, out, version, tagged)
            else:
                out.append(0)  # no tagged fields

    def _encode_tagged(
        self, get: Callable[[str, Any], Any], out: bytearray, version: int, tagged: dict[int, Field]
    ) -> None:
        sections: list[tuple[int, bytearray]] = []
        for tag, field in tagged.items():
            item = get(field.name, _MISSING)
            if item is _MISSING or item is None or item == field.default:
                continue  # a tagged field at its default is not written
            data = bytearray()
            nullable = field.nullable(version)
            if isinstance(field.type, Array):
                field.type.encode_version(item, data, version, True, nullable)
            elif isinstance(field.type, Struct):
                field.type.encode_version(item, data, version, True)
            else:
                field.type.encode(item, data, True, nullable)
            sections.append((tag, data))
        out += encode_uvarint(len(sections))
        for tag, data in sections:
            out += encode_uvarint(tag)
            out += encode_uvarint(len(data))
            out += data

    def decode_version(self, buf: Any, pos: int, version: int, flexible: bool) -> tuple[Message, int]:
        msg = Message()
        for field, _nullable in self._plan(version):
            if isinstance(field.type, (Struct, Array)):
                msg[field.name], pos = field.type.decode_version(buf, pos, version, flexible)
            else:
                msg[field.name], pos = field.type.decode(buf, pos, flexible)
        if flexible:
            tagged = self._tagged(version)
            if tagged:
                pos = self._decode_tagged(buf, pos, version, tagged, msg)
            else:
                pos = skip_tagged_fields(buf, pos)
        return msg, pos

    def _decode_tagged(
        self, buf: Any, pos: int, version: int, tagged: dict[int, Field], msg: Message
    ) -> int:
        for field in tagged.values():
            # Absent means the default (a fresh list, never a shared one).
            msg[field.name] = [] if field.default == [] else field.default
        count, pos = decode_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = decode_uvarint(buf, pos)
            size, pos = decode_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise SchemaError("buffer ends inside a tagged field")
            known = tagged.get(tag)
            if known is not None:
                if isinstance(known.type, (Struct, Array)):
                    value, read = known.type.decode_version(buf, pos, version, True)
                else:
                    value, read = known.type.decode(buf, pos, True)
                if read != end:
                    raise SchemaError(f"tagged field {known.name!r} is {size} bytes, read {read - pos}")
                msg[known.name] = value
            pos = end
        return pos

    def encode(self, value: Any, out: bytearray, flexible: bool, nullable: bool) -> None:
        raise SchemaError("a struct is encoded with encode_version()")

    def decode(self, buf: Any, pos: int, flexible: bool) -> tuple[Any, int]:
        raise SchemaError("a struct is decoded with decode_version()")


class Array(_Type):
    """A length-prefixed sequence of a struct or of a primitive type."""

    name = "array"

    def __init__(self, item: _Type) -> None:
        self.item = item

    def encode_version(
        self, value: Any, out: bytearray, version: int, flexible: bool, nullable: bool = False
    ) -> None:
        if value is None:
            if not nullable:
                raise SchemaError("array field is not nullable in this version")
            _write_length(out, None, flexible, _I32)
            return
        _write_length(out, len(value), flexible, _I32)
        item = self.item
        if isinstance(item, Struct):
            for element in value:
                item.encode_version(element, out, version, flexible)
        else:
            for element in value:
                item.encode(element, out, flexible, False)

    def decode_version(self, buf: Any, pos: int, version: int, flexible: bool) -> tuple[Any, int]:
        count, pos = _read_length(buf, pos, flexible, _I32)
        if count < 0:
            return None, pos
        if count > len(buf) - pos:  # every element takes at least one byte
            raise SchemaError(f"array count {count} exceeds the bytes left")
        items = []
        item = self.item
        if isinstance(item, Struct):
            for _ in range(count):
                element, pos = item.decode_version(buf, pos, version, flexible)
                items.append(element)
        else:
            for _ in range(count):
                element, pos = item.decode(buf, pos, flexible)
                items.append(element)
        return items, pos

    def default(self) -> Any:
        return []


def skip_tagged_fields(buf: Any, pos: int) -> int:
    """Skip a tagged-field section (KIP-482) of a struct that declares no tags."""
    count, pos = decode_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = decode_uvarint(buf, pos)
        size, pos = decode_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise SchemaError("buffer ends inside a tagged field")
    return pos


