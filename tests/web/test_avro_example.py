"""The Avro FastAPI example on Apache Kafka and the mock Schema Registry, read back with confluent-kafka.

The app runs in the test's event loop (httpx's ASGI transport), as does the
mock registry; librdkafka and confluent-kafka's registry client are
synchronous, so the read-back runs in a thread while the loop keeps serving
the registry.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("fastavro")
httpx = pytest.importorskip("httpx")
confluent_sr = pytest.importorskip("confluent_kafka.schema_registry")

from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from aioproducer.schema_registry import split_wire
from aioproducer.testing.mock_schema_registry import MockSchemaRegistry
from examples.avro_service import create_app
from tests.support.verify import count_records, read_records

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


def order(i: int, customer: str = "c-1") -> dict[str, Any]:
    return {
        "order_id": f"o-{i}",
        "customer": customer,
        "amount": 10.5 + i,
        "items": [{"sku": "tea", "qty": i % 3 + 1}],
        "placed_at": f"2024-05-01T12:00:{i % 60:02d}.250Z",
        **({"note": "gift"} if i % 2 else {}),
    }


def expected(i: int, customer: str = "c-1") -> dict[str, Any]:
    sent = order(i, customer)
    return {
        **sent,
        "currency": "EUR",
        "note": sent.get("note"),
        "placed_at": datetime(2024, 5, 1, 12, 0, i % 60, 250_000, tzinfo=timezone.utc),
    }


def read_back(
    bootstrap: str, topic: str, registry_url: str, n: int
) -> list[tuple[bytes, Any, int]]:
    """(key, decoded value, schema id) of each record, decoded by confluent-kafka."""
    deserializer = AvroDeserializer(confluent_sr.SchemaRegistryClient({"url": registry_url}))
    out = []
    for r in read_records(bootstrap, topic, n, timeout=60):
        value = deserializer(r.value, SerializationContext(topic, MessageField.VALUE))
        out.append((r.key, value, split_wire(r.value)[0]))  # type: ignore[arg-type]
    return out


async def test_orders_are_avro_that_confluent_kafka_decodes(
    kafka_bootstrap: str, topic_factory: Any, schema_registry: MockSchemaRegistry
) -> None:
    topic = topic_factory(3)
    app = create_app(
        kafka_bootstrap, {"schema.registry.url": schema_registry.url}, topic=topic, linger_ms=5
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            for i in range(3):
                resp = await client.post("/orders", json=order(i))
                assert resp.status_code == 200, resp.text
            batch = [order(i, f"c-{i % 4}") for i in range(3, 103)]
            resp = await client.post("/orders/batch", json=batch)
            assert resp.json() == {"published": 100}
            bad = await client.post("/orders", json={**order(0), "items": "none"})
            assert bad.status_code == 422  # refused by FastAPI before the producer
    got = await asyncio.to_thread(read_back, kafka_bootstrap, topic, schema_registry.url, 103)
    assert len(got) == 103
    by_id = {value["order_id"]: (key, value, schema_id) for key, value, schema_id in got}
    for i in range(103):
        customer = "c-1" if i < 3 else f"c-{i % 4}"
        key, value, _ = by_id[f"o-{i}"]
        assert (key, value) == (customer.encode(), expected(i, customer))
    assert {schema_id for _, _, schema_id in got} == {schema_registry.subjects[f"{topic}-value"][0]}
    # Registered once: the batch and the later orders used the cached id.
    registrations = [
        r
        for r in schema_registry.requests
        if r.method == "POST" and r.path == f"/subjects/{topic}-value/versions"
    ]
    assert len(registrations) == 1


async def test_an_unreachable_registry_is_503_and_nothing_is_produced(
    kafka_bootstrap: str, topic_factory: Any, schema_registry: MockSchemaRegistry
) -> None:
    topic = topic_factory(1)
    app = create_app(
        kafka_bootstrap,
        {"schema.registry.url": schema_registry.url, "max.retries": "1", "retries.wait.ms": "10"},
        topic=topic,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            schema_registry.fail_next(2, 503)  # the first attempt and its one retry
            resp = await client.post("/orders", json=order(1))
            assert resp.status_code == 503
            assert resp.headers["Retry-After"] == "5"
            assert "failed after 2 attempt(s): HTTP 503" in resp.text
            resp = await client.post("/orders", json=order(2))  # the registry is back
            assert resp.status_code == 200, resp.text
    records = await asyncio.to_thread(count_records, kafka_bootstrap, topic, 1, grace=1.0)
    assert records == 1
