"""aioproducer on uvloop against a real broker, read back with librdkafka."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from aioproducer import Producer
from tests.support.verify import read_records

uvloop = pytest.importorskip("uvloop", reason="the 'uvloop' extra is not installed")


def test_round_trip_on_uvloop(kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(3)
    sent = {b"k%d" % i: b"value-%d" % i for i in range(2000)}

    async def produce() -> list[tuple[int, int]]:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        async with Producer(kafka_bootstrap, linger_ms=5) as producer:
            futures = [await producer.enqueue(topic, v, key=k) for k, v in sent.items()]
            # 1,000 concurrent send() calls: many waiters on one loop.
            concurrent = await asyncio.wait_for(
                asyncio.gather(*(producer.send(topic, b"c%d" % i) for i in range(1000))), 60
            )
            await asyncio.wait_for(producer.flush(), 60)
            return [(f.result().partition, f.result().offset) for f in futures] + [
                (md.partition, md.offset) for md in concurrent
            ]

    positions = uvloop.run(produce())
    records = read_records(kafka_bootstrap, topic, 3000, timeout=60)
    assert len(records) == 3000
    assert sorted((r.partition, r.offset) for r in records) == sorted(positions)
    assert {r.key: r.value for r in records if r.key is not None} == sent
    assert sorted(r.value for r in records if r.key is None) == sorted(
        b"c%d" % i for i in range(1000)
    )
