"""A FastAPI service that publishes orders as Avro through a Confluent Schema Registry.

    pip install 'aioproducer[fastapi,avro]'
    KAFKA_BOOTSTRAP=localhost:9092 SCHEMA_REGISTRY_URL=http://localhost:8081 uvicorn examples.avro_service:app

``POST /orders`` takes one order as JSON, ``POST /orders/batch`` a list; each
order is written to the ``orders`` topic as Avro in Confluent's wire format
(magic byte, schema id, Avro binary), keyed by customer, so Confluent's
deserializers, Kafka Connect and ksqlDB read it. The first order registers
``ORDER_SCHEMA`` under the subject ``orders-value`` (TopicNameStrategy); the id
is cached, and no later request calls the registry. A batch is one
``send_many`` call: one schema resolution and one encoding pass for all its
orders.

A registry that cannot be reached, or that refuses the schema, is a 503 and
nothing is produced; the next request asks it again.
"""

import dataclasses
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request

from aioproducer import Producer, errors
from aioproducer.schema_registry import (
    AvroSerializer,
    SchemaRegistryClient,
    SchemaRegistryError,
    SchemaValidationError,
)

CLOSE_TIMEOUT = 10.0  # seconds that pending records get at shutdown

ORDER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "order_id", "type": "string"},
            {"name": "customer", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "currency", "type": "string", "default": "EUR"},
            {
                "name": "items",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Item",
                        "fields": [
                            {"name": "sku", "type": "string"},
                            {"name": "qty", "type": "int"},
                        ],
                    },
                },
            },
            {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)


# FastAPI validates request bodies into these dataclasses.
@dataclasses.dataclass
class Item:
    sku: str
    qty: int


@dataclasses.dataclass
class Order:
    order_id: str
    customer: str
    amount: float
    items: list[Item]
    placed_at: datetime
    currency: str = "EUR"
    note: str | None = None


def get_producer(request: Request) -> Producer:
    return request.app.state.producer  # type: ignore[no-any-return]


ProducerDep = Annotated[Producer, Depends(get_producer)]


def create_app(
    bootstrap_servers: str,
    registry_config: dict[str, str],
    topic: str = "orders",
    **config: Any,
) -> FastAPI:
    """The service; ``registry_config`` takes Confluent's names (``schema.registry.url``, ...)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with SchemaRegistryClient.from_config(registry_config) as registry:
            producer = Producer(
                bootstrap_servers,
                key_serializer=str.encode,
                value_serializer=AvroSerializer(registry, ORDER_SCHEMA),
                **config,
            )
            await producer.start()
            app.state.producer = producer
            try:
                yield
            finally:
                await producer.close(timeout=CLOSE_TIMEOUT)

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders")
    async def publish(order: Order, producer: ProducerDep) -> dict[str, int]:
        with _http_errors():
            md = await producer.send(topic, dataclasses.asdict(order), key=order.customer)
        return {"partition": md.partition, "offset": md.offset}

    @app.post("/orders/batch")
    async def publish_batch(orders: list[Order], producer: ProducerDep) -> dict[str, int]:
        with _http_errors():
            result = await producer.send_many(
                topic, [dataclasses.asdict(o) for o in orders], keys=[o.customer for o in orders]
            )
        return {"published": len(result)}

    return app


@contextmanager
def _http_errors() -> Iterator[None]:
    """The registry's and the producer's errors as HTTP answers."""
    try:
        yield
    except SchemaValidationError as exc:  # the order does not fit the schema
        raise HTTPException(422, str(exc)) from None
    except SchemaRegistryError as exc:  # unreachable, or the schema refused
        raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None
    except errors.KafkaTimeoutError as exc:  # buffer full for max_block_ms: shed load
        raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None


app = create_app(
    os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"),
    {"schema.registry.url": os.environ.get("SCHEMA_REGISTRY_URL", "http://localhost:8081")},
    linger_ms=5,
    max_block_ms=5_000,
)
