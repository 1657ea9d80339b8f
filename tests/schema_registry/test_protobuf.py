"""ProtobufSerializer: message indexes, references, bad values, confluent-kafka interop."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer
from aioproducer.errors import ConfigurationError
from aioproducer.schema_registry import (
    ProtobufSerializer,
    SchemaRegistryClient,
    SchemaValidationError,
    split_wire,
)
from aioproducer.schema_registry.protobuf import encode_indexes, message_indexes
from aioproducer.testing import MockCluster

pytest.importorskip("google.protobuf")
from tests.schema_registry.protos import Header, Line, Money, Order

pytestmark = pytest.mark.asyncio


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos


def split_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """The index path and the message bytes after the schema id."""
    count, pos = read_varint(payload, 0)
    if count == 0:
        return [0], payload[pos:]
    indexes = []
    for _ in range(count):
        index, pos = read_varint(payload, pos)
        indexes.append(index)
    return indexes, payload[pos:]


async def test_message_indexes() -> None:
    assert message_indexes(Header.DESCRIPTOR) == [0]
    assert message_indexes(Order.DESCRIPTOR) == [1]
    assert message_indexes(Line.DESCRIPTOR) == [1, 0]
    assert encode_indexes([0]) == b"\x00"
    assert encode_indexes([1, 0]) == b"\x04\x02\x00"  # count 2, then 1 and 0, zigzag
    assert split_indexes(encode_indexes([3, 70, 1]) + b"x") == ([3, 70, 1], b"x")


async def test_references_are_registered_and_values_framed(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as registry:
        ser = ProtobufSerializer(registry, Order)
        await ser.prepare("orders")
        value = Order(id=7, item="tea", price=Money(cents=250))
        schema_id, payload = split_wire(ser(value, "orders"))
        # A dict is parsed into the message class.
        from_dict = ser({"id": 7, "item": "tea", "price": {"cents": 250}}, "orders")
        latest = await registry.get_latest_version("orders-value")
    indexes, body = split_indexes(payload)
    assert (indexes, Order.FromString(body)) == ([1], value)
    assert split_wire(from_dict) == (schema_id, payload)
    # The imported file is a subject of its own, referenced; the well-known one is not.
    assert set(schema_registry.subjects) == {"orders-value", "shop/common.proto"}
    assert latest.schema_id == schema_id and latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("shop/common.proto", "shop/common.proto", 1)
    ]


async def test_values_of_another_type_name_the_problem(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as registry:
        ser = ProtobufSerializer(registry, Order)
        await ser.prepare("orders")
        with pytest.raises(SchemaValidationError, match=r"got Header, expected a shop\.Order"):
            ser(Header(source="x"), "orders")
        with pytest.raises(SchemaValidationError, match="colour"):
            ser({"id": 1, "colour": "red"}, "orders")
        with pytest.raises(ConfigurationError, match="generated message class"):
            ProtobufSerializer(registry, dict)


async def test_bytes_equal_confluents_and_decode_with_its_deserializer(schema_registry) -> None:
    confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer as ConfluentDeserializer,
    )
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufSerializer as ConfluentSerializer,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    cases = [
        (Header, "headers", Header(source="web")),
        (Order, "orders", Order(id=5, item="milk", price=Money(cents=99))),
        (Line, "lines", Line(sku="a-1", count=3)),
    ]
    ours = {}
    async with SchemaRegistryClient(schema_registry.url) as registry:
        for cls, topic, value in cases:
            ser = ProtobufSerializer(registry, cls)
            await ser.prepare(topic)
            ours[topic] = ser(value, topic)

    def confluent_side(url: str) -> list[tuple[bytes, object]]:
        client = confluent_sr.SchemaRegistryClient({"url": url})
        out = []
        for cls, topic, value in cases:
            ctx = SerializationContext(topic, MessageField.VALUE)
            theirs = ConfluentSerializer(cls, client)(value, ctx)
            out.append((theirs, ConfluentDeserializer(cls)(ours[topic], ctx)))
        return out

    results = await asyncio.to_thread(confluent_side, schema_registry.url)
    for (cls, topic, value), (theirs, decoded) in zip(cases, results):
        assert ours[topic] == theirs, cls
        assert decoded == value


async def test_through_the_producer(schema_registry) -> None:
    values = [Order(id=i, item=f"x{i}") for i in range(20)]
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=ProtobufSerializer(registry, Order)
        ) as producer:
            await producer.send("orders", values[0])
            await producer.send_many("orders", values[1:])
        stored = sorted(cluster.records("orders"), key=lambda r: r.offset)
    decoded = []
    for record in stored:
        _, payload = split_wire(record.value)
        indexes, body = split_indexes(payload)
        assert indexes == [1]
        decoded.append(Order.FromString(body))
    assert decoded == values
