"""The mock registry takes two texts for one schema as Confluent's registry does.

Avro by the parsed schema (``AvroSchema.equivalent``: formatting, key order and
``"string"`` against ``{"type": "string"}`` do not matter; defaults and docs do),
JSON Schema by the re-written document (whitespace does not matter, key order
does unless ``normalize=true``), Protobuf descriptors without source locations.
Registering and the lookup (``POST /subjects/{subject}``) agree.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from aioproducer.schema_registry import (
    AvroSerializer,
    Schema,
    SchemaNotFoundError,
    SchemaRegistryClient,
    split_wire,
)
from aioproducer.testing.registry_canonical import canonical

pytestmark = pytest.mark.asyncio

RECORD = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "doc": "an order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": {"type": "string"}},
        {"name": "next", "type": ["null", "Order"], "default": None},
    ],
}
# The same schema spelt otherwise: full name instead of namespace, keys in
# another order, a primitive as an object, a reference by full name, layout.
RECORD_SPELT_OTHERWISE = (
    '{"fields": [{"type": {"type": "long"}, "name": "id"}, {"name": "item", "type": "string"},'
    '\n  {"default": null, "type": ["null", "shop.Order"], "name": "next"}],'
    ' "doc": "an order", "name": "shop.Order", "type": "record"}'
)


def with_field_change(**change: object) -> str:
    fields = [dict(f) for f in RECORD["fields"]]  # type: ignore[union-attr, arg-type]
    fields[0].update(change)
    return json.dumps({**RECORD, "fields": fields})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('"string"', '{"type": "string"}'),
        ('"bytes"', '{"type":"bytes"}'),
        (json.dumps(RECORD), RECORD_SPELT_OTHERWISE),
        (json.dumps(["null", "string"]), '[ "null", {"type": "string"} ]'),
        (
            json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}),
            json.dumps(
                {
                    "type": "record",
                    "name": "R",
                    "namespace": "",
                    "fields": [{"name": "a", "type": "int", "order": "ascending"}],
                }
            ),
        ),
        (
            json.dumps(
                {
                    "type": "enum",
                    "name": "E",
                    "namespace": "n",
                    "symbols": ["A"],
                    "aliases": ["X", "m.Y"],
                }
            ),
            json.dumps(
                {"aliases": ["m.Y", "n.X"], "symbols": ["A"], "name": "n.E", "type": "enum"}
            ),
        ),
    ],
)
async def test_avro_same_schema(a: str, b: str) -> None:
    assert canonical("AVRO", a) == canonical("AVRO", b)


@pytest.mark.parametrize(
    "other",
    [
        with_field_change(default=0),  # a default is part of the schema to the registry
        with_field_change(doc="the id"),
        with_field_change(aliases=["ident"]),
        with_field_change(order="descending"),
        with_field_change(type={"type": "long", "logicalType": "timestamp-millis"}),
        json.dumps({**RECORD, "doc": "another"}),
        json.dumps({**RECORD, "namespace": "other"}),
        json.dumps({**RECORD, "fields": list(reversed(RECORD["fields"]))}),  # type: ignore[call-overload]
    ],
)
async def test_avro_different_schema(other: str) -> None:
    assert canonical("AVRO", json.dumps(RECORD)) != canonical("AVRO", other)


async def test_registering_and_looking_up_another_spelling(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        first = await client.register_schema("s", Schema('{"type": "string"}'))
        # The same schema again: the same id, and no second version.
        assert await client.register_schema("s", Schema('"string"')) == first
        assert schema_registry.subjects["s"] == [first]
        found = await client.lookup_schema("s", Schema('"string"'))
        assert (found.schema_id, found.version) == (first, 1)
        order = await client.register_schema("o", Schema(json.dumps(RECORD)))
        assert (await client.lookup_schema("o", Schema(RECORD_SPELT_OTHERWISE))).schema_id == order
        # Adding a default is a new version (PCF would call it the same schema).
        assert await client.register_schema("o", Schema(with_field_change(default=0))) != order
        assert len(schema_registry.subjects["o"]) == 2


async def test_json_schema_as_the_registry_compares_it(schema_registry) -> None:
    doc = '{"type": "object", "properties": {"a": {"type": "integer"}}}'
    spaced = '{ "type" : "object",\n  "properties" : { "a" : { "type" : "integer" } } }'
    reordered = '{"properties": {"a": {"type": "integer"}}, "type": "object"}'
    async with SchemaRegistryClient(schema_registry.url) as client:
        first = await client.register_schema("j", Schema(doc, "JSON"))
        assert (await client.lookup_schema("j", Schema(spaced, "JSON"))).schema_id == first
        # Jackson keeps key order: another order is another schema, unless normalized.
        with pytest.raises(SchemaNotFoundError):
            await client.lookup_schema("j", Schema(reordered, "JSON"))
        normalized = await client.register_schema("n", Schema(doc, "JSON"), normalize=True)
        again = await client.lookup_schema("n", Schema(reordered, "JSON"), normalize=True)
        assert again.schema_id == normalized


async def test_protobuf_descriptor_without_source_locations() -> None:
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    proto = descriptor_pb2.FileDescriptorProto(name="a.proto", package="shop", syntax="proto3")
    proto.message_type.add(name="Order").field.add(
        name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64
    )
    plain = base64.b64encode(proto.SerializeToString()).decode()
    proto.source_code_info.location.add(path=[4, 0], span=[1, 0, 3])
    located = base64.b64encode(proto.SerializeToString()).decode()
    assert plain != located
    assert canonical("PROTOBUF", plain) == canonical("PROTOBUF", located)
    text = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\n'
    laid_out = 'syntax="proto3"; package shop;\n\nmessage Order {\n  int64 id = 1;\n}'
    assert canonical("PROTOBUF", text) == canonical("PROTOBUF", laid_out)
    assert canonical("PROTOBUF", text) != canonical("PROTOBUF", text.replace("id", "ident"))


async def test_confluents_serializer_looks_up_what_ours_registered(schema_registry) -> None:
    confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
    from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    async with SchemaRegistryClient(schema_registry.url) as client:
        registered = await client.register_schema("names-value", Schema('{"type": "string"}'))
        ours = AvroSerializer(client, '"string"', auto_register_schemas=False)
        await ours.prepare("names")  # a lookup: found, though spelt otherwise
        ours_bytes = ours("ada", "names")

    def confluent_side(url: str) -> bytes:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        theirs = ConfluentAvroSerializer(client, '"string"', conf={"auto.register.schemas": False})
        return theirs("ada", SerializationContext("names", MessageField.VALUE))

    their_bytes = await asyncio.to_thread(confluent_side, schema_registry.url)
    assert split_wire(their_bytes)[0] == split_wire(ours_bytes)[0] == registered
    assert their_bytes == ours_bytes
    assert schema_registry.subjects["names-value"] == [registered]
