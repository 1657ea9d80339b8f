"""Schema-aware keys and values through Apache Kafka, read back by librdkafka.

For each format (Avro, JSON Schema, Protobuf) records go out through our
Producer with our serializers as ``key_serializer`` and ``value_serializer``
(``send``, ``enqueue`` and the bulk path), to the session's Apache Kafka broker.
confluent-kafka reads them back and decodes keys (``MessageField.KEY``) and
values with its own deserializers against the mock registry; the bytes must be
the ones confluent-kafka's serializers write for the same objects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.schema_registry import (
    AvroSerializer,
    JsonSchemaSerializer,
    ProtobufSerializer,
    SchemaRegistryClient,
    SchemaSerializer,
    split_wire,
)
from tests.support.aio import gather_within, read_back, within

confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("google.protobuf")
from confluent_kafka.schema_registry import avro as c_avro
from confluent_kafka.schema_registry import json_schema as c_json
from confluent_kafka.schema_registry import protobuf as c_proto
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry.protos import Header, Money, Order

pytestmark = pytest.mark.asyncio

AVRO_KEY = json.dumps(
    {
        "type": "record",
        "name": "OrderKey",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}],
    }
)
AVRO_VALUE = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "item", "type": "string"},
            {"name": "price", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)
JSON_KEY = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "shop.OrderKey",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "region": {"type": "string"}},
        "required": ["id", "region"],
    }
)
JSON_VALUE = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "shop.Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "item": {"type": "string"},
            "price": {"type": "number"},
        },
        "required": ["id", "item"],
    }
)
COUNT = 30  # 1 by send, 1 by enqueue, the rest by send_many


@dataclass(frozen=True)
class Format:
    """One format: our serializers, confluent-kafka's, and the objects to write."""

    name: str
    ours: Callable[[SchemaRegistryClient, bool], SchemaSerializer]
    theirs: Callable[[Any, bool], Any]  # (confluent client, is_key) -> serializer
    decoder: Callable[[Any, bool], Any]  # (confluent client, is_key) -> deserializer
    key: Callable[[int], Any]
    value: Callable[[int], Any]


def _avro_key(i: int) -> dict[str, Any]:
    return {"id": i, "region": ["eu", "us", "ünï"][i % 3]}


def _avro_value(i: int) -> dict[str, Any]:
    return {"id": i, "item": f"item-{i}", "price": i * 1.25, "note": None if i % 2 else "gift"}


def _json_value(i: int) -> dict[str, Any]:
    return {"id": i, "item": f"item-{i}", "price": i * 1.25}


FORMATS = [
    Format(
        "avro",
        lambda reg, is_key: AvroSerializer(reg, AVRO_KEY if is_key else AVRO_VALUE, is_key=is_key),
        lambda c, is_key: c_avro.AvroSerializer(c, AVRO_KEY if is_key else AVRO_VALUE),
        lambda c, is_key: c_avro.AvroDeserializer(c),
        _avro_key,
        _avro_value,
    ),
    Format(
        "json",
        lambda reg, is_key: JsonSchemaSerializer(
            reg, JSON_KEY if is_key else JSON_VALUE, is_key=is_key
        ),
        lambda c, is_key: c_json.JSONSerializer(JSON_KEY if is_key else JSON_VALUE, c),
        lambda c, is_key: c_json.JSONDeserializer(None, schema_registry_client=c),
        _avro_key,
        _json_value,
    ),
    Format(
        "protobuf",
        lambda reg, is_key: ProtobufSerializer(reg, Header if is_key else Order, is_key=is_key),
        lambda c, is_key: c_proto.ProtobufSerializer(Header if is_key else Order, c),
        lambda c, is_key: c_proto.ProtobufDeserializer(Header if is_key else Order),
        lambda i: Header(source=f"web-{i % 4}"),
        lambda i: Order(id=i, item=f"item-{i}", price=Money(cents=i * 125)),
    ),
]


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
async def test_keys_and_values_decode_with_confluents_deserializers(
    fmt: Format, kafka_bootstrap: str, topic_factory, schema_registry
) -> None:
    topic = topic_factory(3)
    keys = [fmt.key(i) for i in range(COUNT)]
    values = [fmt.value(i) for i in range(COUNT)]
    async with (
        SchemaRegistryClient(schema_registry.url) as registry,
        Producer(
            kafka_bootstrap,
            linger_ms=5,
            key_serializer=fmt.ours(registry, True),
            value_serializer=fmt.ours(registry, False),
        ) as producer,
    ):
        first = await within(producer.send(topic, values[0], key=keys[0]), 30, "send")
        fut = await producer.enqueue(topic, values[1], key=keys[1])
        result = await within(producer.send_many(topic, values[2:], keys=keys[2:]), 30, "send_many")
        (second,) = await gather_within([fut], 30, "enqueue's future")
    assert first.topic == topic and second.topic == topic
    assert not result.errors
    assert set(schema_registry.subjects) >= {f"{topic}-key", f"{topic}-value"}

    records = await read_back(kafka_bootstrap, topic, COUNT)
    assert len(records) == COUNT
    # One partition per key: the order within a key is the send order.
    by_order = sorted(records, key=lambda r: (r.partition, r.offset))

    def confluent_side(url: str) -> tuple[list[Any], list[Any], list[bytes], list[bytes]]:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        key_ctx = SerializationContext(topic, MessageField.KEY)
        value_ctx = SerializationContext(topic, MessageField.VALUE)
        dk, dv = fmt.decoder(client, True), fmt.decoder(client, False)
        sk, sv = fmt.theirs(client, True), fmt.theirs(client, False)
        decoded_keys = [dk(r.key, key_ctx) for r in by_order]
        decoded_values = [dv(r.value, value_ctx) for r in by_order]
        return (
            decoded_keys,
            decoded_values,
            [sk(k, key_ctx) for k in keys],
            [sv(v, value_ctx) for v in values],
        )

    decoded_keys, decoded_values, their_keys, their_values = await asyncio.to_thread(
        confluent_side, schema_registry.url
    )
    # Every (key, value) written came back once, decoded by confluent-kafka.
    pairs = sorted(zip(decoded_keys, decoded_values), key=lambda kv: _value_id(kv[1]))
    assert [_value_id(v) for _, v in pairs] == list(range(COUNT))
    assert [k for k, _ in pairs] == keys
    assert [v for _, v in pairs] == values
    # Byte for byte what confluent-kafka's serializers write (same schema ids:
    # its serializers found our registrations rather than adding versions).
    got = {_value_id(v): (r.key, r.value) for r, v in zip(by_order, decoded_values)}
    assert [got[i] for i in range(COUNT)] == list(zip(their_keys, their_values))
    assert all(len(v) == 1 for v in schema_registry.subjects.values())
    key_id, value_id = split_wire(their_keys[0])[0], split_wire(their_values[0])[0]
    assert schema_registry.subjects[f"{topic}-key"] == [key_id]
    assert schema_registry.subjects[f"{topic}-value"] == [value_id]


def _value_id(value: Any) -> int:
    return int(value["id"] if isinstance(value, dict) else value.id)
