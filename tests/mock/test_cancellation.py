"""A caller that stops waiting does not disturb the producer or lose the record."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio


async def test_cancelled_send_still_delivers_and_the_producer_goes_on() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("c", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=200) as p:
            await p.send("c", b"warm-up")
            waiting = asyncio.create_task(p.send("c", b"cancelled-wait"))
            await asyncio.sleep(0.02)  # enqueued, lingering
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            md = await asyncio.wait_for(p.send("c", b"after"), 5)
            await asyncio.wait_for(p.flush(), 5)
        values = [r.value for r in cluster.records("c")]
    assert values == [b"warm-up", b"cancelled-wait", b"after"]
    assert md.offset == 2


async def test_cancelled_enqueue_waiting_for_memory_releases_nothing_it_did_not_take() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("m", partitions=1)
        async with Producer(cluster.bootstrap_servers, linger_ms=50, buffer_memory=4096) as p:
            await p.send("m", b"warm-up")
            cluster.stall_broker(cluster.broker_ids[0])
            futures = []
            while True:  # fill the buffer; the next enqueue has to wait
                task = asyncio.create_task(p.enqueue("m", b"x" * 500))
                await asyncio.sleep(0.01)
                if not task.done():
                    break
                futures.append(task.result())
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            cluster.resume_broker(cluster.broker_ids[0])
            await asyncio.wait_for(p.flush(), 30)
            assert all(f.result().offset >= 0 for f in futures)
            # every byte came back: a buffer-sized batch of records fits again at once
            assert p._pool.available == p._pool.total
        assert len(cluster.records("m")) == len(futures) + 1
