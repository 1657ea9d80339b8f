"""Every compression codec produces batches librdkafka can read."""

from __future__ import annotations

import random

import pytest

from aioproducer import Producer, RecordMetadata
from tests.support.aio import gather_within, read_back

pytestmark = pytest.mark.asyncio

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _value(i: int, rand: random.Random) -> bytes:
    # Half compressible text, half random bytes, so codecs see both.
    return f"record {i:05d} ".encode() * 20 + rand.randbytes(200)


@pytest.mark.parametrize("codec", CODECS)
async def test_large_single_batch_is_readable(kafka_bootstrap: str, topic_factory, codec) -> None:
    topic = topic_factory(1)
    rand = random.Random(codec)
    n = 1000
    values = [_value(i, rand) for i in range(n)]
    headers = [("codec", codec.encode()), ("ü", b"\x00")]
    # All records are appended before the sender runs, and 1 MiB holds them all:
    # one batch, compressed off the event loop (it is larger than 64 KiB).
    async with Producer(kafka_bootstrap, compression=codec, batch_size=1 << 20, linger_ms=500) as p:
        futs = [
            await p.enqueue(topic, v, key=f"k{i}".encode(), headers=headers)
            for i, v in enumerate(values)
        ]
        await p.flush(timeout=30)
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    base = results[0].offset
    assert [md.offset for md in results] == list(range(base, base + n))

    got = await read_back(kafka_bootstrap, topic, expected=n, timeout=60)
    assert len(got) == n
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(n)]
    assert all(r.headers == headers for r in got)


@pytest.mark.parametrize("codec", CODECS)
async def test_many_small_batches_are_readable(kafka_bootstrap: str, topic_factory, codec) -> None:
    topic = topic_factory(3)
    n = 300
    async with Producer(kafka_bootstrap, compression=codec, batch_size=600, linger_ms=0) as p:
        futs = [
            await p.enqueue(topic, f"{codec}-{i}".encode() * 5, key=str(i % 11).encode())
            for i in range(n)
        ]
        results = await gather_within(futs, 30, "sends")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    got = await read_back(kafka_bootstrap, topic, expected=n)
    assert sorted(r.value for r in got) == sorted(f"{codec}-{i}".encode() * 5 for i in range(n))
