"""Top-level ``bytes`` and ``string`` Avro schemas framed exactly as confluent-kafka frames them.

Confluent's serializers write a ``bytes`` value raw after the 5-byte header and
their deserializers read it raw; a ``string`` is Avro-encoded (length prefix).
Checked both ways: confluent-kafka's own serializers and deserializers against
the mock registry (over HTTP, in a thread), and ours against confluent-kafka's
in-process ``MockSchemaRegistryClient`` (an independent registry).
"""

from __future__ import annotations

import asyncio
import decimal
import json
from typing import Any

import pytest

from aioproducer.schema_registry import (
    AvroSerializer,
    RegisteredSchema,
    Schema,
    SchemaRegistryClient,
    split_wire,
)

confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry.avro import (
    AvroDeserializer as ConfluentAvroDeserializer,
)
from confluent_kafka.schema_registry.avro import (
    AvroSerializer as ConfluentAvroSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.asyncio

# An empty payload is framed alike too, but confluent's deserializers refuse a
# message of the header alone, so it is compared as bytes only.
PAYLOADS = [b"", b"\x00", b"hello", bytes(range(256)) * 3]
TEXTS = ["", "a", "ünïcødé", "x" * 300]
BYTES_SCHEMAS = ['"bytes"', '{"type": "bytes"}']
STRING_SCHEMAS = ['"string"', '{"type": "string"}']


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


async def ours_on(url: str, schema: str, topic: str, values: list[Any]) -> list[bytes]:
    """Our serializer's bytes, one by one and through the bulk path (which must agree)."""
    async with SchemaRegistryClient(url) as registry:
        ser = AvroSerializer(registry, schema)
        await ser.prepare(topic)
        one_by_one = [ser(v, topic) for v in values]
        bulk = ser.for_topic(topic).many(values)  # type: ignore[attr-defined]
    assert bulk == one_by_one
    return one_by_one


def theirs_on(url: str, schema: str, topic: str, values: list[Any], ours: list[bytes]) -> tuple:
    """confluent-kafka's bytes for ``values``, and what its deserializer reads from ``ours``."""
    client = confluent_sr.SchemaRegistryClient({"url": url})
    ser = ConfluentAvroSerializer(client, schema)
    de = ConfluentAvroDeserializer(client)
    return [ser(v, ctx(topic)) for v in values], [de(b, ctx(topic)) for b in ours if len(b) > 5]


@pytest.mark.parametrize("schema", BYTES_SCHEMAS)
async def test_bytes_schema_is_raw_like_confluents(schema_registry, schema: str) -> None:
    ours = await ours_on(schema_registry.url, schema, "blobs", PAYLOADS)
    theirs, read_back = await asyncio.to_thread(
        theirs_on, schema_registry.url, schema, "blobs", PAYLOADS, ours
    )
    assert [split_wire(b)[1] for b in ours] == PAYLOADS  # no Avro length prefix
    assert ours == theirs
    assert read_back == PAYLOADS[1:]  # confluent's deserializer: no stray prefix byte


@pytest.mark.parametrize("schema", STRING_SCHEMAS)
async def test_string_schema_is_avro_encoded_like_confluents(schema_registry, schema: str) -> None:
    ours = await ours_on(schema_registry.url, schema, "names", TEXTS)
    theirs, read_back = await asyncio.to_thread(
        theirs_on, schema_registry.url, schema, "names", TEXTS, ours
    )
    assert ours == theirs
    assert read_back == TEXTS
    assert split_wire(ours[1])[1] == b"\x02a"  # zig-zag length 1, then the UTF-8


async def test_bytes_like_values_and_a_decimal_on_bytes(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as registry:
        plain = AvroSerializer(registry, '"bytes"')
        await plain.prepare("blobs")
        assert split_wire(plain(bytearray(b"ab"), "blobs"))[1] == b"ab"
        assert split_wire(plain(memoryview(b"cd"), "blobs"))[1] == b"cd"
        dec = AvroSerializer(
            registry,
            json.dumps({"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}),
        )
        await dec.prepare("prices")
        data = dec(decimal.Decimal("-1.50"), "prices")

    def confluent_reads(url: str) -> object:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        return ConfluentAvroDeserializer(client)(data, ctx("prices"))

    # Both Confluent deserializers read a bytes-typed writer schema raw: the
    # unscaled value, big-endian two's complement (-150), with no length prefix.
    assert split_wire(data)[1] == (-150).to_bytes(2, "big", signed=True)
    assert await asyncio.to_thread(confluent_reads, schema_registry.url) == b"\xff\x6a"


class ConfluentMockRegistry:
    """Our serializers' registry calls, answered by confluent-kafka's in-process mock."""

    def __init__(self) -> None:
        self.inner = confluent_sr.SchemaRegistryClient.new_client({"url": "mock://parity"})

    async def register_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> int:
        theirs = confluent_sr.Schema(schema.schema_str, schema.schema_type)
        return int(self.inner.register_schema(subject, theirs, normalize))

    async def lookup_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> RegisteredSchema:
        found = self.inner.lookup_schema(
            subject, confluent_sr.Schema(schema.schema_str, schema.schema_type), normalize
        )
        return RegisteredSchema(found.schema_id, schema, subject, found.version)


@pytest.mark.parametrize(
    ("schema", "values"),
    [
        ('"bytes"', PAYLOADS),
        ('"string"', TEXTS),
        (
            '{"type": "record", "name": "R", "fields": [{"name": "b", "type": "bytes"}]}',
            [{"b": p} for p in PAYLOADS],
        ),
    ],
)
async def test_ours_against_confluents_own_registry(schema: str, values: list[Any]) -> None:
    registry = ConfluentMockRegistry()
    ours = AvroSerializer(registry, schema)  # type: ignore[arg-type]
    await ours.prepare("t")
    ours_bytes = [ours(v, "t") for v in values]
    theirs = ConfluentAvroSerializer(registry.inner, schema)
    de = ConfluentAvroDeserializer(registry.inner)
    their_bytes = [theirs(v, ctx("t")) for v in values]
    # That mock compares schemas as written, and confluent's serializer registers
    # '"bytes"' as '{"type":"bytes"}': two ids there (one in a real registry), so
    # the payloads after the header are compared.
    assert [split_wire(b)[1] for b in ours_bytes] == [split_wire(b)[1] for b in their_bytes]
    assert [de(b, ctx("t")) for b in ours_bytes if len(b) > 5] == [
        v for v, b in zip(values, ours_bytes) if len(b) > 5
    ]
