"""Errors about a closed producer say so once, with what was refused.

``ProducerClosedError``'s fixed description ("The producer is closed") comes
first in ``str()``; the per-call message adds only the circumstance.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.kafka_cluster(brokers=1, default_partitions=1)]


def assert_says_closed_once(exc: BaseException) -> str:
    text = str(exc)
    assert len(re.findall(r"\bclosed\b", text, flags=re.IGNORECASE)) == 1, text
    assert text.startswith("The producer is closed"), text
    return text


async def test_calls_after_close_say_the_producer_is_closed_once(
    kafka_cluster: MockCluster,
) -> None:
    producer = Producer(kafka_cluster.bootstrap_servers, linger_ms=0)
    await producer.start()
    await producer.close()

    with pytest.raises(errors.ProducerClosedError) as sent:
        await producer.send("t", b"late")
    assert "cannot send" in assert_says_closed_once(sent.value)
    with pytest.raises(errors.ProducerClosedError) as enqueued:
        await producer.enqueue("t", b"late")
    assert_says_closed_once(enqueued.value)
    with pytest.raises(errors.ProducerClosedError) as bulk:
        await producer.send_many("t", [b"a", b"b"])
    assert_says_closed_once(bulk.value)
    with pytest.raises(errors.ProducerClosedError) as restarted:
        await producer.start()
    assert "create a new producer" in assert_says_closed_once(restarted.value)


async def test_a_call_waiting_for_buffer_memory_when_close_comes_says_why(
    kafka_cluster: MockCluster,
) -> None:
    producer = Producer(
        kafka_cluster.bootstrap_servers, buffer_memory=4096, batch_size=1024, max_block_ms=30_000
    )
    await producer.start()
    await producer.send("t", b"warm-up")  # the topic's metadata is known
    kafka_cluster.stall_broker(kafka_cluster.broker_ids[0])
    blocked = None
    for _ in range(100):  # fill the buffer behind the stalled broker
        call = asyncio.ensure_future(producer.enqueue("t", b"x" * 500))
        await asyncio.sleep(0.01)
        if not call.done():
            blocked = call
            break
        call.result()
    assert blocked is not None, "the buffer never filled"
    await producer.close(timeout=0)
    with pytest.raises(errors.ProducerClosedError) as waited:
        await asyncio.wait_for(blocked, 10)
    assert "buffer memory" in assert_says_closed_once(waited.value)
