"""Testing a service that publishes events with aioproducer, against the mock cluster.

    pytest examples/test_order_service.py

The ``kafka_cluster`` and ``producer`` fixtures come with aioproducer (a pytest
plugin); pytest-asyncio runs the async tests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_asyncio

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.testing import MockCluster
from aioproducer.testing.pytest_plugin import ProducerFactory


class OrderService:
    """Publishes one event per order change to the ``orders`` topic.

    Events are keyed by order id, so all events of one order land in one
    partition, in the order they were published.
    """

    def __init__(self, producer: Producer, topic: str = "orders") -> None:
        self._producer = producer
        self._topic = topic

    async def place(self, order_id: str, customer: str, total_cents: int) -> RecordMetadata:
        return await self._publish(
            order_id, "placed", {"customer": customer, "total_cents": total_cents}
        )

    async def cancel(self, order_id: str, reason: str) -> RecordMetadata:
        return await self._publish(order_id, "cancelled", {"reason": reason})

    async def _publish(self, order_id: str, kind: str, fields: dict[str, Any]) -> RecordMetadata:
        event = {"order_id": order_id, "type": kind, **fields}
        # send() returns once the cluster has acknowledged the event, so a
        # caller that got an answer can rely on the event being stored.
        return await self._producer.send(
            self._topic,
            json.dumps(event).encode(),
            key=order_id.encode(),
            headers=[("event-type", kind.encode())],
        )


# Every test is async (strict mode needs the marker) and runs against a
# three-broker mock cluster that creates topics on first use.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=3, default_partitions=3, auto_create_topics=True),
]


@pytest_asyncio.fixture
async def orders(producer: ProducerFactory) -> OrderService:
    # Short timeouts: a test that goes wrong fails in seconds instead of hanging.
    return OrderService(
        await producer(linger_ms=0, request_timeout_ms=1_000, delivery_timeout_ms=5_000)
    )


def events(cluster: MockCluster) -> list[dict[str, Any]]:
    return [json.loads(record.value) for record in cluster.records("orders")]


async def test_the_events_of_an_order_are_stored_in_order(
    kafka_cluster: MockCluster, orders: OrderService
) -> None:
    placed = await orders.place("o-1", "alice", 1250)
    cancelled = await orders.cancel("o-1", "out of stock")

    assert cancelled.partition == placed.partition
    assert cancelled.offset > placed.offset
    assert [(e["order_id"], e["type"]) for e in events(kafka_cluster)] == [
        ("o-1", "placed"),
        ("o-1", "cancelled"),
    ]
    first = kafka_cluster.records("orders")[0]
    assert first.key == b"o-1"
    assert dict(first.headers) == {"event-type": b"placed"}


async def test_a_leader_change_is_retried_without_the_caller_noticing(
    kafka_cluster: MockCluster, orders: OrderService
) -> None:
    placed = await orders.place("o-2", "bob", 990)
    # The partition's leader moves and its next two writes are refused as
    # NOT_LEADER_OR_FOLLOWER: the producer refreshes its metadata and retries.
    kafka_cluster.move_leader("orders", placed.partition)
    kafka_cluster.fail_produce(
        "orders", placed.partition, errors.NotLeaderOrFollowerError.code, count=2
    )

    await orders.cancel("o-2", "changed my mind")

    assert [e["type"] for e in events(kafka_cluster)] == ["placed", "cancelled"]


async def test_a_rejected_event_reaches_the_caller(
    kafka_cluster: MockCluster, orders: OrderService
) -> None:
    kafka_cluster.create_topic("orders", partitions=1)
    kafka_cluster.fail_produce("orders", 0, errors.TopicAuthorizationFailedError.code)

    with pytest.raises(errors.TopicAuthorizationFailedError):
        await orders.place("o-3", "carol", 100)
    assert events(kafka_cluster) == []
