"""Interoperability with confluent-kafka's Schema Registry client and (de)serializers.

confluent-kafka's client is synchronous: it runs in a thread while the mock
registry (and the producer) keep running on the test's event loop.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from aioproducer import Producer
from aioproducer.schema_registry import (
    AvroSerializer,
    JsonSchemaSerializer,
    Schema,
    SchemaRegistryClient,
    split_wire,
)
from aioproducer.testing import MockCluster

confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry.avro import (
    AvroDeserializer as ConfluentAvroDeserializer,
)
from confluent_kafka.schema_registry.avro import (
    AvroSerializer as ConfluentAvroSerializer,
)
from confluent_kafka.schema_registry.json_schema import (
    JSONDeserializer as ConfluentJSONDeserializer,
)
from confluent_kafka.schema_registry.json_schema import (
    JSONSerializer as ConfluentJSONSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.asyncio

USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    }
)
USER_V2 = json.dumps(
    {
        **json.loads(USER),
        "fields": [
            *json.loads(USER)["fields"],
            {"name": "score", "type": "double", "default": 0.0},
        ],
    }
)
USER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "example.User",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "age"],
    }
)
USERS = [
    {"name": "ada", "age": 36, "tags": ["math"], "email": "ada@example.org"},
    {"name": "grace", "age": 85, "tags": [], "email": None},
    {"name": "ünïcødé", "age": -1, "tags": ["a", "b"], "email": None},
]


def ctx(topic: str, field: str = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


async def test_confluent_client_talks_to_the_mock(schema_registry) -> None:
    def confluent_side(url: str) -> tuple:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        first = client.register_schema("users-value", confluent_sr.Schema(USER, "AVRO"))
        second = client.register_schema("users-value", confluent_sr.Schema(USER_V2, "AVRO"))
        latest = client.get_latest_version("users-value")
        v1 = client.get_version("users-value", 1)
        looked = client.lookup_schema("users-value", confluent_sr.Schema(USER, "AVRO"))
        ok = client.test_compatibility("users-value", confluent_sr.Schema(USER, "AVRO"))
        client.set_compatibility("users-value", "NONE")
        level = client.get_compatibility("users-value")
        schema = client.get_schema(first)
        return first, second, latest, v1, looked, ok, level, schema

    first, second, latest, v1, looked, ok, level, schema = await asyncio.to_thread(
        confluent_side, schema_registry.url
    )
    assert first != second
    assert (latest.schema_id, latest.version) == (second, 2)
    assert (v1.schema_id, v1.version, looked.schema_id) == (first, 1, first)
    assert ok is True  # dropping a field with a default: BACKWARD compatible
    assert level == "NONE" and schema.schema_str == USER and schema.schema_type == "AVRO"
    # What confluent-kafka registered, ours reads back the same.
    async with SchemaRegistryClient(schema_registry.url) as ours:
        assert (await ours.get_schema(first)).schema_str == USER
        assert await ours.register_schema("users-value", Schema(USER_V2)) == second
        assert await ours.get_compatibility("users-value") == "NONE"


async def test_avro_bytes_equal_confluents_both_ways(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as registry:
        ours = AvroSerializer(registry, USER)
        await ours.prepare("users")
        ours_bytes = [ours(u, "users") for u in USERS]

        def confluent_side(url: str) -> tuple[list[bytes], list[object], list[object]]:
            client = confluent_sr.SchemaRegistryClient({"url": url})
            theirs = ConfluentAvroSerializer(client, USER)
            decoder = ConfluentAvroDeserializer(client)
            their_bytes = [theirs(u, ctx("users")) for u in USERS]
            return (
                their_bytes,
                [decoder(b, ctx("users")) for b in ours_bytes],
                [decoder(b, ctx("users")) for b in their_bytes],
            )

        their_bytes, decoded_ours, decoded_theirs = await asyncio.to_thread(
            confluent_side, schema_registry.url
        )
    assert ours_bytes == their_bytes  # same schema id, same Avro encoding, byte for byte
    assert decoded_ours == decoded_theirs == USERS
    assert len(schema_registry.subjects["users-value"]) == 1


async def test_json_bytes_equal_confluents_both_ways(schema_registry) -> None:
    values = [{k: v for k, v in u.items() if k != "email"} for u in USERS]
    async with SchemaRegistryClient(schema_registry.url) as registry:
        ours = JsonSchemaSerializer(registry, USER_JSON)
        await ours.prepare("users")
        ours_bytes = [ours(u, "users") for u in values]

        def confluent_side(url: str) -> tuple[list[bytes], list[object]]:
            client = confluent_sr.SchemaRegistryClient({"url": url})
            theirs = ConfluentJSONSerializer(USER_JSON, client)
            decoder = ConfluentJSONDeserializer(None, schema_registry_client=client)
            their_bytes = [theirs(u, ctx("users")) for u in values]
            return their_bytes, [decoder(b, ctx("users")) for b in ours_bytes]

        their_bytes, decoded_ours = await asyncio.to_thread(confluent_side, schema_registry.url)
    assert [split_wire(b)[0] for b in their_bytes] == [split_wire(b)[0] for b in ours_bytes]
    assert [json.loads(split_wire(b)[1]) for b in their_bytes] == values
    assert ours_bytes == their_bytes
    assert decoded_ours == values


async def test_records_from_the_producer_decode_with_confluents_deserializers(
    schema_registry,
) -> None:
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("users", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            value_serializer=AvroSerializer(registry, USER),
            key_serializer=JsonSchemaSerializer(registry, '{"type": "string"}', is_key=True),
        ) as producer:
            await producer.send("users", USERS[0], key=USERS[0]["name"])
            await producer.send_many("users", USERS[1:], keys=[u["name"] for u in USERS[1:]])
        stored = sorted(cluster.records("users"), key=lambda r: r.offset)

    def confluent_side(url: str) -> list[tuple[object, object]]:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        values = ConfluentAvroDeserializer(client)
        keys = ConfluentJSONDeserializer(None, schema_registry_client=client)
        return [
            (keys(r.key, ctx("users", MessageField.KEY)), values(r.value, ctx("users")))
            for r in stored
        ]

    decoded = await asyncio.to_thread(confluent_side, schema_registry.url)
    assert decoded == [(u["name"], u) for u in USERS]
