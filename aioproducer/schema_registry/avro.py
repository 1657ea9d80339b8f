"""Avro values in Confluent's wire format, with fastavro (extra ``avro``).

The schema is parsed once (``fastavro.parse_schema``); each value is written
with ``schemaless_writer``, as Confluent's AvroSerializer does, so the bytes
are the same. A value that does not fit the schema raises SchemaValidationError
naming the field and the problem (fastavro's validator is run only then, to
keep the common case at one pass).

A schema that is just ``bytes`` is the exception Confluent makes: the payload
is the value's bytes as they are, without Avro's length prefix (see
:func:`is_raw_bytes`). A top-level ``string`` is Avro-encoded as usual.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..errors import ConfigurationError
from .errors import SchemaValidationError
from .serializer import SchemaSerializer

__all__ = ["AvroSerializer", "is_raw_bytes"]

log = logging.getLogger(__name__)


def is_raw_bytes(parsed: Any) -> bool:
    """Whether Confluent frames values of this (parsed) schema as raw bytes.

    Java's ``AbstractKafkaAvroSerializer`` writes a ``byte[]`` value straight
    after the 5-byte header, and ``AbstractKafkaAvroDeserializer`` reads the
    rest of the message as the value when the writer schema's type is BYTES
    (logical types on bytes included). confluent-kafka-python does the same in
    ``AvroSerializer.__call__`` / ``AvroDeserializer.__call__``
    (``confluent_kafka/schema_registry/_sync/avro.py``, its ``is_bytes`` branch:
    ``"bytes"`` or a dict whose ``type`` is ``"bytes"``).
    Every other top-level type, ``string`` included, is Avro binary (a string
    keeps its length prefix in both clients).
    """
    return parsed == "bytes" or (isinstance(parsed, dict) and parsed.get("type") == "bytes")


def _without_length(encoded: bytes) -> bytes:
    """Avro ``bytes`` without its zig-zag varint length prefix."""
    i = 0
    while encoded[i] & 0x80:
        i += 1
    return encoded[i + 1 :]


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "AvroSerializer needs fastavro: pip install 'aioproducer[avro]'"
        ) from exc
    return fastavro


class AvroSerializer(SchemaSerializer):
    """Serialize dicts (or anything fastavro writes) with an Avro schema.

    ``AvroSerializer(client, schema_str, ...)``; see
    :class:`~aioproducer.schema_registry.serializer.SchemaSerializer` for the
    options. ``to_dict`` turns an application object into what fastavro writes.
    """

    schema_type: ClassVar[str] = "AVRO"

    def __init__(
        self,
        client: Any,
        schema_str: str | None = None,
        *,
        to_dict: Callable[[Any], Any] | None = None,
        **options: Any,
    ) -> None:
        self._to_dict = to_dict
        super().__init__(client, schema_str, **options)

    def _parse(self, schema_str: str) -> Any:
        fastavro = _fastavro()
        try:
            return fastavro.parse_schema(json.loads(schema_str))
        except (ValueError, TypeError, fastavro.schema.SchemaParseException) as exc:
            raise ConfigurationError(f"invalid Avro schema: {exc}") from exc

    def _record_name(self, parsed: Any) -> str | None:
        return parsed.get("name") if isinstance(parsed, dict) else None

    def _encoder(self, parsed: Any) -> Callable[[Any], bytes]:
        if is_raw_bytes(parsed):
            return self._raw_encoder(parsed)
        fastavro = _fastavro()
        write = fastavro.schemaless_writer
        to_dict = self._to_dict

        def encode(obj: Any) -> bytes:
            if to_dict is not None:
                obj = to_dict(obj)
            buf = io.BytesIO()
            try:
                write(buf, parsed, obj)
            except Exception as exc:
                raise SchemaValidationError(_explain(fastavro, parsed, obj, exc)) from exc
            return buf.getvalue()

        return encode

    def _raw_encoder(self, parsed: Any) -> Callable[[Any], bytes]:
        """A top-level ``bytes`` schema: the value's bytes, as Confluent frames them."""
        fastavro = _fastavro()
        write = fastavro.schemaless_writer
        to_dict = self._to_dict

        def encode(obj: Any) -> bytes:
            if to_dict is not None:
                obj = to_dict(obj)
            if isinstance(obj, (bytes, bytearray, memoryview)):
                return bytes(obj)
            # Anything else must be what a logical type on bytes takes (a
            # Decimal): fastavro checks and encodes it, the prefix is dropped,
            # which is what Confluent's deserializers read.
            buf = io.BytesIO()
            try:
                write(buf, parsed, obj)
            except Exception as exc:
                raise SchemaValidationError(_explain(fastavro, parsed, obj, exc)) from exc
            return _without_length(buf.getvalue())

        return encode

    def _many_encoder(
        self, parsed: Any
    ) -> Callable[[bytes, Sequence[Any]], list[bytes | None]] | None:
        if is_raw_bytes(parsed):
            return None  # one by one: there is nothing to batch in copying bytes
        # fastavro's compiled write_data appends to one bytearray: the per-call
        # set-up of schemaless_writer (a writer, a file object, the schema's
        # named types) is paid once per call instead of once per record.
        try:
            from fastavro._write import (  # type: ignore[attr-defined,unused-ignore]  # .pyi lacks it
                write_data,
            )
        except ImportError:  # pragma: no cover - fastavro without its compiled modules
            return None

        fastavro = _fastavro()
        named: dict[str, Any] = {}
        schema = fastavro.parse_schema(parsed, named)
        options = {"strict": False, "strict_allow_default": False, "disable_tuple_notation": False}
        to_dict = self._to_dict

        def encode_many(header: bytes, objs: Sequence[Any]) -> list[bytes | None]:
            buf = bytearray()
            ends: list[int] = []
            append = ends.append
            for obj in objs:
                if obj is not None:
                    write_data(
                        buf, obj if to_dict is None else to_dict(obj), schema, named, "", options
                    )
                append(len(buf))
            data = memoryview(buf)
            out: list[bytes | None] = []
            start = 0
            for obj, end in zip(objs, ends):
                out.append(None if obj is None else header + data[start:end])
                start = end
            return out

        return encode_many


def _explain(fastavro: Any, parsed: Any, obj: Any, exc: Exception) -> str:
    """What is wrong with ``obj``: the validator's findings (field paths), else the writer's."""
    name = parsed.get("name", parsed.get("type")) if isinstance(parsed, dict) else parsed
    problems = ""
    try:
        fastavro.validation.validate(obj, parsed, raise_errors=True)
    except fastavro.validation.ValidationError as invalid:
        problems = "; ".join(str(e) for e in invalid.errors) or str(invalid)
    except Exception as other:  # noqa: BLE001 - the validator failing: the writer's word
        log.debug("fastavro's validator failed: %r", other)
    if problems:
        return f"value does not match its schema (Avro {name!r}): {problems}"
    return f"value does not match its schema (Avro {name!r}): {type(exc).__name__}: {exc}"
