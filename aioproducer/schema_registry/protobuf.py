"""Protobuf values in Confluent's wire format (extra ``protobuf``).

After the magic byte and the schema id comes the message's index path in its
``.proto`` file: which top-level message, then which nested one, as a count
and zigzag varints; the common ``[0]`` (the file's first message) is the single
byte ``0``. Then the serialized message. The schema is the file's descriptor
(``FileDescriptorProto``, base64), as confluent-kafka registers it; the files
it imports are registered first under their own names and referenced, except
the well-known ones (``google/protobuf/``, ``google/type/``, ``confluent/``)
which the registry knows.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import ConfigurationError
from .client import Schema, SchemaReference
from .errors import SchemaValidationError
from .serializer import SchemaSerializer

__all__ = ["ProtobufSerializer", "message_indexes"]

BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def message_indexes(descriptor: Any) -> list[int]:
    """The index path of a message descriptor in its file (top level first)."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    top = list(descriptor.file.message_types_by_name)
    path.append(top.index(current.name))
    return path[::-1]


def encode_indexes(indexes: list[int]) -> bytes:
    """Confluent's encoding of the index path: ``[0]`` as one 0 byte, else count + entries."""
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _schema_str(file_descriptor: Any) -> str:
    return base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii")


class ProtobufSerializer(SchemaSerializer):
    """Serialize messages of one generated Protobuf class (or dicts, parsed into it).

    ``ProtobufSerializer(client, OrderMessage, ...)``; the options are
    :class:`~aioproducer.schema_registry.serializer.SchemaSerializer`'s.
    RecordNameStrategy uses the message's full name. Imported files are
    registered under their file name (``reference_subject`` changes that).
    """

    schema_type: ClassVar[str] = "PROTOBUF"

    def __init__(
        self,
        client: Any,
        message_type: type,
        *,
        reference_subject: Callable[[str], str] | None = None,
        **options: Any,
    ) -> None:
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "full_name"):
            raise ConfigurationError(
                f"ProtobufSerializer needs a generated message class, got {message_type!r}"
            )
        self._message_type = message_type
        self._descriptor = descriptor
        self._reference_subject = reference_subject or (lambda name: name)
        super().__init__(client, _schema_str(descriptor.file), **options)

    def _parse(self, schema_str: str) -> Any:
        # The writer is always the message class; with use_latest_version only
        # the id of the latest schema is taken (as Confluent's serializer does).
        return self._descriptor

    def _record_name(self, parsed: Any) -> str | None:
        return str(self._descriptor.full_name)

    async def _full_schema(self) -> Schema:
        refs = await self._references(self._descriptor.file)
        return Schema(_schema_str(self._descriptor.file), self.schema_type, refs)

    async def _references(self, file_descriptor: Any) -> tuple[SchemaReference, ...]:
        refs = []
        for dep in file_descriptor.dependencies:
            if dep.name.startswith(BUILTIN_PREFIXES):
                continue
            schema = Schema(_schema_str(dep), self.schema_type, await self._references(dep))
            subject = self._reference_subject(dep.name)
            if self._auto_register:
                await self.client.register_schema(subject, schema, normalize=self._normalize)
            found = await self.client.lookup_schema(subject, schema, normalize=self._normalize)
            refs.append(SchemaReference(dep.name, subject, found.version))
        return tuple(refs)

    def _encoder(self, parsed: Any) -> Callable[[Any], bytes]:
        prefix = encode_indexes(message_indexes(self._descriptor))
        cls = self._message_type
        name = self._descriptor.full_name

        def encode(obj: Any) -> bytes:
            if isinstance(obj, dict):
                obj = _from_dict(cls, obj, name)
            elif not isinstance(obj, cls):
                raise SchemaValidationError(
                    f"value does not match its schema (Protobuf {name!r}): "
                    f"got {type(obj).__name__}, expected a {name} message or a dict"
                )
            try:
                data: bytes = obj.SerializeToString()  # obj: a generated (untyped) message
                return prefix + data
            except Exception as exc:  # EncodeError: a proto2 required field unset
                raise SchemaValidationError(
                    f"value does not match its schema (Protobuf {name!r}): {exc}"
                ) from exc

        return encode


def _from_dict(cls: type, obj: dict[str, Any], name: str) -> Any:
    from google.protobuf import json_format

    try:
        return json_format.ParseDict(obj, cls())
    except json_format.ParseError as exc:
        raise SchemaValidationError(
            f"value does not match its schema (Protobuf {name!r}): {exc}"
        ) from exc
