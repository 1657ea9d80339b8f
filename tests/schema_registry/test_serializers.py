"""AvroSerializer and JsonSchemaSerializer: wire format, subjects, options, bad values."""

from __future__ import annotations

import asyncio
import io
import json

import fastavro
import pytest
import pytest_asyncio

from aioproducer.errors import ConfigurationError, SerializationError
from aioproducer.schema_registry import (
    AvroSerializer,
    JsonSchemaSerializer,
    Schema,
    SchemaNotFoundError,
    SchemaRegistryClient,
    SchemaValidationError,
    SubjectNotFoundError,
    split_wire,
)

pytestmark = pytest.mark.asyncio

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": "double"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)
ORDER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "shop.Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}},
        "required": ["id", "amount"],
    }
)


def avro_decode(schema_str: str, payload: bytes) -> object:
    return fastavro.schemaless_reader(
        io.BytesIO(payload), fastavro.parse_schema(json.loads(schema_str))
    )


@pytest_asyncio.fixture
async def client(schema_registry):
    async with SchemaRegistryClient(schema_registry.url) as c:
        yield c


async def test_avro_wire_format_and_registered_subject(schema_registry, client) -> None:
    ser = AvroSerializer(client, ORDER)
    await ser.prepare("orders")
    data = ser({"id": 7, "amount": 9.5, "note": "hi"}, "orders")
    schema_id, payload = split_wire(data)
    assert data[0] == 0 and data[1:5] == schema_id.to_bytes(4, "big")
    assert schema_registry.subjects == {"orders-value": [schema_id]}
    assert avro_decode(ORDER, payload) == {"id": 7, "amount": 9.5, "note": "hi"}
    assert ser(None, "orders") is None  # a tombstone stays null
    assert ser({"id": 1, "amount": 0.0}) is not None  # the one prepared topic is the default


async def test_subject_name_strategies_and_key_role(schema_registry, client) -> None:
    for strategy in ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"):
        await AvroSerializer(client, ORDER, is_key=True, subject_name_strategy=strategy).prepare(
            "t"
        )
    assert set(schema_registry.subjects) == {"t-key", "shop.Order", "t-shop.Order"}
    json_ser = JsonSchemaSerializer(
        client, ORDER_JSON, subject_name_strategy="TopicRecordNameStrategy"
    )
    await json_ser.prepare("j")
    assert "j-shop.Order" in schema_registry.subjects  # the title names a JSON record
    with pytest.raises(ConfigurationError, match="unknown subject name strategy"):
        AvroSerializer(client, ORDER, subject_name_strategy="TopicStrategy")


async def test_without_auto_register_the_schema_must_exist(schema_registry, client) -> None:
    ser = AvroSerializer(client, ORDER, auto_register_schemas=False)
    with pytest.raises(SubjectNotFoundError):
        await ser.prepare("orders")
    assert not ser.prepared("orders") and schema_registry.subjects == {}
    other = json.dumps({"type": "record", "name": "Other", "fields": []})
    await client.register_schema("orders-value", Schema(other))
    with pytest.raises(SchemaNotFoundError):  # the subject exists, this schema is not in it
        await ser.prepare("orders")
    await client.set_compatibility("NONE", "orders-value")
    schema_id = await client.register_schema("orders-value", Schema(ORDER))
    await ser.prepare("orders")
    assert split_wire(ser({"id": 1, "amount": 2.0}, "orders"))[0] == schema_id


async def test_use_latest_version_writes_with_the_latest_schema(schema_registry, client) -> None:
    v1 = await client.register_schema("orders-value", Schema(ORDER))
    newer = json.loads(ORDER)
    newer["fields"].append({"name": "currency", "type": "string", "default": "EUR"})
    v2 = await client.register_schema("orders-value", Schema(json.dumps(newer)))
    assert v1 != v2
    ser = AvroSerializer(client, None, use_latest_version=True)
    await ser.prepare("orders")
    schema_id, payload = split_wire(ser({"id": 1, "amount": 2.0, "currency": "CHF"}, "orders"))
    assert schema_id == v2
    assert avro_decode(json.dumps(newer), payload)["currency"] == "CHF"
    assert len(schema_registry.subjects["orders-value"]) == 2  # nothing registered


async def test_normalize_is_passed_to_the_registry(schema_registry, client) -> None:
    await AvroSerializer(client, ORDER, normalize_schemas=True).prepare("orders")
    posts = [r for r in schema_registry.requests if r.method == "POST"]
    assert posts[-1].query == {"normalize": "true"}


async def test_avro_value_not_matching_names_the_field(client) -> None:
    ser = AvroSerializer(client, ORDER)
    await ser.prepare("orders")
    with pytest.raises(SchemaValidationError, match=r"shop\.Order\.amount") as bad:
        ser({"id": 1, "amount": "lots"}, "orders")
    assert isinstance(bad.value, SerializationError)
    with pytest.raises(SchemaValidationError, match="id"):
        ser({"amount": 1.0}, "orders")  # a required field missing


async def test_json_schema_validation_names_the_path_and_can_be_off(
    schema_registry, client
) -> None:
    ser = JsonSchemaSerializer(client, ORDER_JSON)
    await ser.prepare("orders")
    data = ser({"id": 3, "amount": 1.25}, "orders")
    schema_id, payload = split_wire(data)
    assert schema_registry.schemas[schema_id][0] == "JSON"
    assert json.loads(payload) == {"id": 3, "amount": 1.25}
    with pytest.raises(SchemaValidationError, match="'amount'.*not of type 'number'"):
        ser({"id": 3, "amount": "x"}, "orders")
    with pytest.raises(SchemaValidationError, match="'amount' is a required property"):
        ser({"id": 3}, "orders")
    trusting = JsonSchemaSerializer(client, ORDER_JSON, validate=False)
    await trusting.prepare("orders")
    assert json.loads(split_wire(trusting({"id": "x"}, "orders"))[1]) == {"id": "x"}


async def test_unprepared_topic_and_bad_schema_are_clear_errors(client) -> None:
    ser = AvroSerializer(client, ORDER)
    with pytest.raises(SerializationError, match=r"not prepared for topic 'orders'.*prepare"):
        ser({"id": 1, "amount": 1.0}, "orders")
    with pytest.raises(ConfigurationError, match="invalid Avro schema"):
        AvroSerializer(client, '{"type": "recrd", "name": "X"}')
    with pytest.raises(ConfigurationError, match="invalid JSON Schema"):
        JsonSchemaSerializer(client, '{"type": 12}')
    with pytest.raises(ConfigurationError, match="use_latest_version"):
        AvroSerializer(client)


async def test_concurrent_prepares_ask_the_registry_once(schema_registry, client) -> None:
    ser = AvroSerializer(client, ORDER)
    await asyncio.gather(*(ser.prepare("orders") for _ in range(20)))
    assert sum(1 for r in schema_registry.requests if r.method == "POST") == 1


RICH = json.dumps(
    {
        "type": "record",
        "name": "Rich",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {
                "name": "line",
                "type": {
                    "type": "record",
                    "name": "Line",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
            {"name": "extra", "type": ["null", "Line"], "default": None},
            {
                "name": "tags",
                "type": {"type": "map", "values": {"type": "array", "items": "string"}},
            },
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        ],
    }
)


def rich(i: int) -> dict[str, object]:
    from datetime import date, datetime, timezone
    from decimal import Decimal

    return {
        "id": i,
        "at": datetime(2024, 5, 1, 12, 0, i % 60, tzinfo=timezone.utc),
        "day": date(2024, 1, 1 + i % 28),
        "price": Decimal(f"{i}.25"),
        "line": {"sku": f"s{i}", "qty": i % 7},
        "extra": None if i % 2 else {"sku": "gift", "qty": 1},
        "tags": {"a": ["x", str(i)]} if i % 3 else {},
        "kind": "AB"[i % 2],
    }


async def test_many_writes_what_one_by_one_writes(client) -> None:
    """The bulk path's one call per column: the same bytes, nulls kept in place."""
    ser = AvroSerializer(client, RICH)
    await ser.prepare("rich")
    serialize = ser.for_topic("rich")
    values = [None if i % 10 == 3 else rich(i) for i in range(200)]
    many = serialize.many(values)  # type: ignore[attr-defined]
    assert many == [serialize(v) for v in values]
    assert many[3] is None and all(type(b) is bytes for i, b in enumerate(many) if i % 10 != 3)
    assert avro_decode(RICH, split_wire(many[4])[1])["price"] == rich(4)["price"]  # type: ignore[index,arg-type]

    json_ser = JsonSchemaSerializer(client, ORDER_JSON)
    await json_ser.prepare("rich-json")
    j = json_ser.for_topic("rich-json")
    objs = [{"id": i, "amount": i / 2} for i in range(50)] + [None]
    assert j.many(objs) == [j(o) for o in objs]  # type: ignore[attr-defined]


async def test_many_with_a_bad_value_names_it(client) -> None:
    ser = AvroSerializer(client, RICH)
    await ser.prepare("rich")
    values = [rich(i) for i in range(20)]
    values[13]["line"] = {"sku": "s", "qty": "many"}
    with pytest.raises(SchemaValidationError, match="qty"):
        ser.for_topic("rich").many(values)  # type: ignore[attr-defined]
