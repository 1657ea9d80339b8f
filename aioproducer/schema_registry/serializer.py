"""The Confluent wire format and the base of the schema-aware serializers.

A serialized value is ``0x00`` (the magic byte), the schema id as a 4-byte
big-endian integer, then the payload (Avro binary, JSON text, ...), the framing
every Confluent deserializer expects.

Resolving a schema id is network I/O, a serializer call is not: a serializer is
first prepared for a topic with ``await serializer.prepare(topic)`` (register
or look up the schema once; cached), after which ``serializer(obj, topic)`` is
a plain synchronous call. The :class:`~aioproducer.Producer` does this itself
for a ``key_serializer``/``value_serializer`` that has ``prepare``: once per
topic, before serializing the first record of that topic.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..errors import ConfigurationError, SerializationError
from .client import Schema, SchemaRegistryClient

__all__ = [
    "MAGIC_BYTE",
    "SchemaSerializer",
    "record_name_strategy",
    "split_wire",
    "topic_name_strategy",
    "topic_record_name_strategy",
    "wire_header",
]

log = logging.getLogger(__name__)

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")

SubjectNameStrategy = Callable[[str, bool, "str | None"], str]
ManyEncoder = Callable[[bytes, Sequence[Any]], "list[bytes | None]"]


def wire_header(schema_id: int) -> bytes:
    """The 5 bytes before the payload: magic byte 0, then the id (big-endian)."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def split_wire(data: bytes) -> tuple[int, bytes]:
    """``(schema_id, payload)`` of a value in the wire format."""
    if len(data) < _HEADER.size or data[0] != MAGIC_BYTE:
        raise SerializationError("not in Confluent's wire format (magic byte 0, 4-byte id)")
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, bytes(data[_HEADER.size :])


def topic_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    """``<topic>-key`` / ``<topic>-value``: the default, one schema per topic."""
    return f"{topic}-{'key' if is_key else 'value'}"


def record_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    """The record's fully-qualified name: one schema per type, across topics."""
    if not record_name:
        raise ConfigurationError("RecordNameStrategy needs a named schema (record name or title)")
    return record_name


def topic_record_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    """``<topic>-<record name>``: several types per topic."""
    return f"{topic}-{record_name_strategy(topic, is_key, record_name)}"


STRATEGIES: dict[str, SubjectNameStrategy] = {
    "TopicNameStrategy": topic_name_strategy,
    "RecordNameStrategy": record_name_strategy,
    "TopicRecordNameStrategy": topic_record_name_strategy,
}


class SchemaSerializer:
    """Base of the schema-aware serializers; a subclass encodes the payload.

    Args:
        client: the registry client (shared by serializers; closed by its owner).
        schema_str: the writer's schema. With ``use_latest_version`` it may be
            None, and the subject's latest schema is used.
        is_key: serialize keys (subject suffix ``-key``) rather than values.
        subject_name_strategy: a callable ``(topic, is_key, record_name) ->
            subject`` or one of "TopicNameStrategy" (default),
            "RecordNameStrategy", "TopicRecordNameStrategy".
        auto_register_schemas: register the schema under its subject (default);
            otherwise it must already be there (looked up).
        use_latest_version: write with the subject's latest schema instead.
        normalize_schemas: ask the registry to normalize schemas (``normalize=true``).
    """

    schema_type: ClassVar[str] = "AVRO"

    def __init__(
        self,
        client: SchemaRegistryClient,
        schema_str: str | None = None,
        *,
        is_key: bool = False,
        subject_name_strategy: SubjectNameStrategy | str = topic_name_strategy,
        auto_register_schemas: bool = True,
        use_latest_version: bool = False,
        normalize_schemas: bool = False,
    ) -> None:
        if isinstance(subject_name_strategy, str):
            try:
                subject_name_strategy = STRATEGIES[subject_name_strategy]
            except KeyError:
                raise ConfigurationError(
                    f"unknown subject name strategy {subject_name_strategy!r}; "
                    f"known: {sorted(STRATEGIES)}"
                ) from None
        if schema_str is None and not use_latest_version:
            raise ConfigurationError("a schema is required unless use_latest_version=True")
        if use_latest_version and auto_register_schemas:
            # As Confluent's serializers: the latest version is what is written,
            # so registering the given schema would be pointless.
            auto_register_schemas = False
        self.client = client
        self.is_key = is_key
        self._strategy = subject_name_strategy
        self._auto_register = auto_register_schemas
        self._use_latest = use_latest_version
        self._normalize = normalize_schemas
        self._schema = None if schema_str is None else Schema(schema_str, self.schema_type)
        self._writer: Any = None if schema_str is None else self._parse(schema_str)
        self._bound: dict[str, Callable[[Any], bytes | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # -- what a subclass provides ---------------------------------------------

    def _parse(self, schema_str: str) -> Any:
        """The parsed schema (what :meth:`_encode` takes); ConfigurationError if invalid."""
        raise NotImplementedError

    def _record_name(self, parsed: Any) -> str | None:
        """The name RecordNameStrategy uses."""
        raise NotImplementedError

    def _encoder(self, parsed: Any) -> Callable[[Any], bytes]:
        """A function encoding one object to the payload (SchemaValidationError if it does not fit)."""
        raise NotImplementedError

    def _many_encoder(self, parsed: Any) -> ManyEncoder | None:
        """A faster way to frame many objects at once, if the format has one.

        ``(header, objs) -> [header + payload or None]``; any exception makes the
        caller encode the objects one by one instead (which then raises the right error).
        """
        return None

    async def _full_schema(self) -> Schema:
        """The schema to register, with its references (registered first if need be)."""
        assert self._schema is not None
        return self._schema

    # -- preparing -------------------------------------------------------------

    def prepared(self, topic: str) -> bool:
        """Whether :meth:`prepare` has resolved the schema id for ``topic``."""
        return topic in self._bound

    async def prepare(self, topic: str) -> None:
        """Resolve (register or look up) the schema id for ``topic``; once, then cached."""
        if topic in self._bound:
            return
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:  # concurrent first records of a topic ask the registry once
            if topic in self._bound:
                return
            self._bound[topic] = await self._resolve(topic)

    async def _resolve(self, topic: str) -> Callable[[Any], bytes | None]:
        parsed = self._writer
        record_name = None if parsed is None else self._record_name(parsed)
        if self._use_latest:
            if record_name is None and self._strategy is not topic_name_strategy:
                raise ConfigurationError(
                    "use_latest_version without a schema needs TopicNameStrategy"
                )
            subject = self._strategy(topic, self.is_key, record_name)
            latest = await self.client.get_latest_version(subject)
            if latest.schema.schema_type != self.schema_type:
                raise ConfigurationError(
                    f"the latest schema of subject {subject!r} is {latest.schema.schema_type}, "
                    f"not {self.schema_type}"
                )
            parsed = self._parse(latest.schema.schema_str)
            schema_id = latest.schema_id
        else:
            schema = await self._full_schema()
            subject = self._strategy(topic, self.is_key, record_name)
            if self._auto_register:
                schema_id = await self.client.register_schema(
                    subject, schema, normalize=self._normalize
                )
            else:
                found = await self.client.lookup_schema(subject, schema, normalize=self._normalize)
                schema_id = found.schema_id
        return _framed(wire_header(schema_id), self._encoder(parsed), self._many_encoder(parsed))

    # -- serializing -----------------------------------------------------------

    def for_topic(self, topic: str) -> Callable[[Any], bytes | None]:
        """The synchronous serializer of ``topic``; :meth:`prepare` must have run for it."""
        try:
            return self._bound[topic]
        except KeyError:
            raise SerializationError(
                f"{type(self).__name__} is not prepared for topic {topic!r}: "
                f"await serializer.prepare({topic!r}) first"
            ) from None

    def __call__(self, obj: Any, topic: str | None = None) -> bytes | None:
        """Serialize ``obj`` for ``topic`` (the only prepared topic when None); None stays None."""
        if topic is None:
            if len(self._bound) != 1:
                raise SerializationError(
                    f"{type(self).__name__} needs the topic: prepared for {sorted(self._bound)}"
                )
            (serialize,) = self._bound.values()
            return serialize(obj)
        return self.for_topic(topic)(obj)


def _framed(
    header: bytes, encode: Callable[[Any], bytes], many: ManyEncoder | None
) -> Callable[[Any], bytes | None]:
    """The topic's serializer; its ``many`` attribute serializes a sequence in one call.

    The bulk path (``enqueue_many``) uses ``many``: one call per column instead
    of one per record, and a format's faster way to encode many, if it has one.
    """

    def serialize(obj: Any) -> bytes | None:
        if obj is None:  # a null key, a tombstone: no schema id, as Confluent's serializers
            return None
        return header + encode(obj)

    def serialize_many(objs: Sequence[Any]) -> list[bytes | None]:
        if many is not None:
            try:
                return many(header, objs)
            except Exception as exc:  # noqa: BLE001 - one by one, which raises the right error
                log.debug("encoding %d values in one call failed (%r); one by one", len(objs), exc)
        return [None if obj is None else header + encode(obj) for obj in objs]

    serialize.many = serialize_many  # type: ignore[attr-defined]  # a function attribute
    return serialize
