"""Producer.ping: one fresh metadata round trip, bounded by its timeout."""

from __future__ import annotations

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio


async def test_ping_counts_the_brokers_that_answer() -> None:
    async with MockCluster(brokers=3) as cluster, Producer(cluster.bootstrap_servers) as producer:
        assert await producer.ping(10.0) == 3  # a bound, not a speed: answers come at once


async def test_ping_times_out_on_a_stalled_cluster_and_recovers() -> None:
    async with (
        MockCluster(brokers=1) as cluster,
        Producer(cluster.bootstrap_servers, request_timeout_ms=30_000) as producer,
    ):
        cluster.stall_broker(0)
        with pytest.raises(errors.KafkaTimeoutError, match="within 300 ms"):
            await within(producer.ping(0.3), 5, "ping")
        cluster.resume_broker(0)
        assert await within(producer.ping(5.0), 10, "ping") == 1


async def test_ping_fails_when_no_broker_can_be_reached() -> None:
    cluster = MockCluster(brokers=1)
    await cluster.start()
    producer = Producer(cluster.bootstrap_servers, request_timeout_ms=1_000)
    await producer.start()
    try:
        await cluster.stop()
        with pytest.raises(errors.NoBrokersAvailableError, match="no broker answered"):
            await within(producer.ping(2.0), 10, "ping")
    finally:
        await producer.close(timeout=1)


async def test_ping_needs_a_started_producer() -> None:
    with pytest.raises(errors.IllegalStateError):
        await Producer("127.0.0.1:1").ping()
