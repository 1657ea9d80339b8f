"""A record that fails at the delivery timeout says what kept its partition from progressing.

Java's message ("N ms has passed since batch creation") leaves the user
guessing; ours names the last error its partition was answered with, also for
batches that expire while in flight or queued behind a retry, and chains it as
``__cause__``.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster
from tests.support.aio import until, within

pytestmark = pytest.mark.asyncio


def _retries(producer: Producer) -> float:
    return sum(v for k, v in producer.metrics().items() if k.name == "record-retry-total")


async def test_batches_expiring_in_flight_or_queued_name_the_last_error() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=1)
        leader = cluster.leader("t", 0)
        producer = Producer(
            cluster.bootstrap_servers,
            linger_ms=0,
            # One request at a time: a second batch waits in the accumulator.
            max_in_flight_requests_per_connection=1,
            # The retry goes out after the broker is stalled below, and the
            # request then outlives the delivery timeout: no later error.
            retry_backoff_ms=500,
            retry_backoff_max_ms=500,
            request_timeout_ms=2500,
            delivery_timeout_ms=2500,
        )
        await within(producer.start(), 10, "start")
        try:
            await within(producer.send("t", b"warm-up", key=b"k"), 10, "warm-up")
            cluster.fail_produce("t", 0, errors.NotEnoughReplicasError.code)
            first = await producer.enqueue("t", b"first", key=b"k")
            await until(lambda: _retries(producer) >= 1, 10, "the refused batch is retried")
            cluster.stall_broker(leader)
            queued = await producer.enqueue("t", b"queued", key=b"k")
            results = await asyncio.wait_for(
                asyncio.gather(first, queued, return_exceptions=True), 15
            )
            for result in results:
                assert isinstance(result, errors.KafkaTimeoutError), result
                assert "NOT_ENOUGH_REPLICAS" in str(result), str(result)
                assert isinstance(result.__cause__, errors.NotEnoughReplicasError)
            assert "in flight" in str(results[0]) and "in the accumulator" in str(results[1])
            cluster.resume_broker(leader)
            await within(producer.send("t", b"after", key=b"k"), 10, "send after resume")
        finally:
            cluster.clear_faults()
            await within(producer.close(), 10, "close")


async def test_a_refused_batch_fails_at_its_delivery_timeout_not_a_backoff_early() -> None:
    """Java retries while the delivery timeout has not passed; the batch fails at it.

    With a one-second backoff and a two-second delivery timeout, the second
    refusal comes about one second in: the next retry would be due at the
    deadline. The batch must still be given its whole delivery timeout (the
    cluster may recover meanwhile) and then fail naming the refusal.
    """
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        producer = Producer(
            cluster.bootstrap_servers,
            linger_ms=0,
            retry_backoff_ms=1000,
            retry_backoff_max_ms=1000,
            request_timeout_ms=2000,
            delivery_timeout_ms=2000,
        )
        await within(producer.start(), 10, "start")
        try:
            await within(producer.send("t", b"warm-up"), 10, "warm-up")
            cluster.fail_produce("t", 0, errors.NotEnoughReplicasError.code, count=1_000)
            loop = asyncio.get_running_loop()
            started = loop.time()
            fut = await producer.enqueue("t", b"refused")
            with pytest.raises(errors.KafkaTimeoutError) as caught:
                await within(fut, 15, "the refused record")
            # A lower bound only: a slow machine makes it later, never earlier.
            assert loop.time() - started >= 2.0 - 0.005
            assert "NOT_ENOUGH_REPLICAS" in str(caught.value)
            assert isinstance(caught.value.__cause__, errors.NotEnoughReplicasError)
        finally:
            cluster.clear_faults()
            await within(producer.close(), 10, "close")
