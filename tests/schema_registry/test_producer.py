"""Schema-aware serializers through a Producer on MockCluster: send, enqueue, the bulk path."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import socket

import fastavro
import pytest

from aioproducer import Producer
from aioproducer.errors import ProducerClosedError
from aioproducer.schema_registry import (
    AvroSerializer,
    IncompatibleSchemaError,
    JsonSchemaSerializer,
    SchemaRegistryClient,
    SchemaRegistryUnavailableError,
    SchemaValidationError,
    split_wire,
)
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
    }
)
KEY = json.dumps(
    {
        "type": "object",
        "title": "OrderKey",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
    }
)


def decode(schema_registry, data: bytes) -> object:
    schema_id, payload = split_wire(data)
    schema = fastavro.parse_schema(json.loads(schema_registry.schemas[schema_id][1]))
    return fastavro.schemaless_reader(io.BytesIO(payload), schema)


def registry_posts(schema_registry) -> int:
    return sum(1 for r in schema_registry.requests if r.method == "POST")


async def test_send_enqueue_and_bulk_write_the_wire_format(schema_registry) -> None:
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("orders", partitions=2)
        values = AvroSerializer(registry, ORDER)
        keys = JsonSchemaSerializer(registry, KEY, is_key=True)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=values, key_serializer=keys
        ) as producer:
            await producer.send("orders", {"id": 1, "item": "tea"}, key={"id": 1})
            fut = await producer.enqueue("orders", {"id": 2, "item": "milk"}, key={"id": 2})
            await fut
            await producer.send("orders", None, key={"id": 2})  # a tombstone
            result = await producer.send_many(
                "orders",
                [{"id": i, "item": f"x{i}"} for i in range(3, 53)],
                keys=[{"id": i} for i in range(3, 53)],
            )
            assert not result.errors
        stored = sorted(cluster.records("orders"), key=lambda r: (r.partition, r.offset))
    assert set(schema_registry.subjects) == {"orders-value", "orders-key"}
    # One registration per serializer and topic, not per record.
    assert registry_posts(schema_registry) == 2
    by_key = {}
    for record in stored:
        key_id, key_payload = split_wire(record.key)
        assert schema_registry.schemas[key_id][0] == "JSON"
        by_key.setdefault(json.loads(key_payload)["id"], []).append(record.value)
    assert len(stored) == 53
    assert [decode(schema_registry, v) for v in by_key[1]] == [{"id": 1, "item": "tea"}]
    assert by_key[2][0] is not None and by_key[2][1] is None
    assert decode(schema_registry, by_key[2][0]) == {"id": 2, "item": "milk"}
    assert all(
        decode(schema_registry, by_key[i][0]) == {"id": i, "item": f"x{i}"} for i in range(3, 53)
    )


async def test_a_value_not_matching_its_schema_buffers_nothing(schema_registry) -> None:
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
        ) as producer:
            with pytest.raises(SchemaValidationError, match=r"shop\.Order\.id"):
                await producer.send("orders", {"id": "one", "item": "tea"})
            with pytest.raises(SchemaValidationError, match="item"):
                await producer.enqueue_many("orders", [{"id": 1, "item": "a"}, {"id": 2}])
            await producer.send("orders", {"id": 3, "item": "ok"})
        stored = cluster.records("orders")
    assert [decode(schema_registry, r.value) for r in stored] == [{"id": 3, "item": "ok"}]


async def test_unreachable_registry_fails_the_call_and_buffers_nothing() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with (
        MockCluster() as cluster,
        SchemaRegistryClient(
            f"http://127.0.0.1:{port}", max_retries=1, retry_backoff_s=0.001
        ) as registry,
    ):
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
        ) as producer:
            with pytest.raises(SchemaRegistryUnavailableError):
                await producer.send("orders", {"id": 1, "item": "tea"})
            with pytest.raises(SchemaRegistryUnavailableError):
                await producer.send_many("orders", [{"id": 1, "item": "tea"}])
            await producer.flush()
        assert cluster.records("orders") == []


async def test_the_registry_is_asked_again_after_a_failure(schema_registry) -> None:
    async with (
        MockCluster() as cluster,
        SchemaRegistryClient(schema_registry.url, max_retries=0) as registry,
    ):
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
        ) as producer:
            schema_registry.fail_next(1, status=503)
            with pytest.raises(SchemaRegistryUnavailableError):
                await producer.send("orders", {"id": 1, "item": "tea"})
            await producer.send("orders", {"id": 2, "item": "tea"})
        stored = cluster.records("orders")
    assert [decode(schema_registry, r.value)["id"] for r in stored] == [2]


class Upper:
    def on_send(self, record):
        return dataclasses.replace(
            record, value={**record.value, "item": record.value["item"].upper()}
        )

    def on_acknowledgement(self, metadata, exception):
        pass


async def test_bulk_path_with_interceptors_uses_the_prepared_serializer(schema_registry) -> None:
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("orders", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            value_serializer=AvroSerializer(registry, ORDER),
            interceptors=[Upper()],
        ) as producer:
            await producer.send_many("orders", [{"id": 1, "item": "a"}, {"id": 2, "item": "b"}])
        stored = cluster.records("orders")
    assert [decode(schema_registry, r.value)["item"] for r in stored] == ["A", "B"]


async def test_plain_serializers_need_no_preparation() -> None:
    producer = Producer("127.0.0.1:9", value_serializer=str.encode)
    assert producer._serializers.prep is None


class SlowPrepare:
    """A prepared serializer whose prepare waits until released."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def prepare(self, topic: str) -> None:
        self.entered.set()
        await self.release.wait()

    def for_topic(self, topic: str):
        return lambda value: b"v" if value is not None else None

    def __call__(self, value, topic=None):
        return self.for_topic(topic)(value)


async def test_close_during_prepare_buffers_nothing() -> None:
    serializer = SlowPrepare()
    async with MockCluster() as cluster:
        cluster.create_topic("orders", partitions=1)
        producer = Producer(cluster.bootstrap_servers, value_serializer=serializer)
        await producer.start()
        sending = asyncio.ensure_future(producer.send("orders", {"id": 1}))
        await asyncio.wait_for(serializer.entered.wait(), 10)
        await asyncio.wait_for(producer.close(), 10)
        serializer.release.set()
        with pytest.raises(ProducerClosedError):
            await asyncio.wait_for(sending, 10)
        assert cluster.records("orders") == []


ORDER_BREAKING = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        # A new field without a default: v2 readers cannot read v1 data (not BACKWARD).
        "fields": [*json.loads(ORDER)["fields"], {"name": "qty", "type": "int"}],
    }
)


async def test_an_incompatible_schema_fails_every_call_and_buffers_nothing(
    schema_registry,
) -> None:
    async with MockCluster() as cluster, SchemaRegistryClient(schema_registry.url) as registry:
        cluster.create_topic("orders", partitions=1)
        cluster.create_topic("fresh", partitions=1)
        v1 = AvroSerializer(registry, ORDER)
        await v1.prepare("orders")
        assert await registry.get_compatibility("orders-value") == "BACKWARD"
        value = {"id": 1, "item": "tea", "qty": 2}
        async with Producer(
            cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER_BREAKING)
        ) as producer:
            # A record the user holds on a topic where the schema is the first version.
            held = await producer.enqueue("fresh", value)
            with pytest.raises(IncompatibleSchemaError, match="orders-value") as refused:
                await producer.send("orders", value)
            assert refused.value.status == 409
            with pytest.raises(IncompatibleSchemaError):
                await producer.enqueue("orders", value)
            with pytest.raises(IncompatibleSchemaError):
                await producer.send_many("orders", [value, value])
            with pytest.raises(IncompatibleSchemaError):
                await producer.enqueue_many("orders", [value])
            # Concurrent first records of the topic: each call gets the error.
            outcomes = await asyncio.wait_for(
                asyncio.gather(
                    *(producer.send("orders", value) for _ in range(5)), return_exceptions=True
                ),
                10,
            )
            assert all(isinstance(o, IncompatibleSchemaError) for o in outcomes), outcomes
            await asyncio.wait_for(producer.flush(), 10)
            assert held.done()
            assert (await held).topic == "fresh"
        assert cluster.records("orders") == []
        assert len(cluster.records("fresh")) == 1
    # The subject still holds v1 alone.
    assert len(schema_registry.subjects["orders-value"]) == 1
