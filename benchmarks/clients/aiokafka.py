"""aiokafka in every pattern (see ``_common``).

``await producer.send()`` returns a delivery future (it waits only while the
accumulator is full); ``send_and_wait()`` is its request/response form; the
bulk API fills a ``create_batch()`` builder and hands it to ``send_batch()``,
one partition after the other.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from benchmarks.clients._common import (
    Config,
    Span,
    check_futures,
    concurrent_sends,
    main,
    paced_latency,
    produce_then_wait,
)


@asynccontextmanager
async def _producer(cfg: Config) -> AsyncIterator[Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        max_batch_size=cfg.batch_size,
        enable_idempotence=cfg.idempotence,
        compression_type=None if cfg.compression == "none" else cfg.compression,
    )
    try:
        await producer.start()
    except Exception as exc:
        # An idempotent producer starts with InitProducerId; name the step that failed.
        await producer.stop()
        raise RuntimeError(f"AIOKafkaProducer.start() failed: {type(exc).__name__}: {exc}") from exc
    try:
        await producer.send_and_wait(cfg.topic, cfg.payload())  # warm-up
        yield producer
    finally:
        await producer.stop()


async def futures_then_wait(cfg: Config, span: Span) -> None:
    async with _producer(cfg) as producer:
        await produce_then_wait(cfg, span, producer.send, producer.flush)


async def concurrent_send(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with _producer(cfg) as producer:
        send_and_wait = producer.send_and_wait
        topic = cfg.topic
        await concurrent_sends(cfg, span, lambda: send_and_wait(topic, value))


async def bulk(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with _producer(cfg) as producer:
        partitions = sorted(await producer.partitions_for(cfg.topic))
        span.start()
        futures: list[asyncio.Future[Any]] = []
        counts: list[int] = []
        left = cfg.records
        turn = 0
        while left:
            batch = producer.create_batch()
            n = 0
            while n < left and batch.append(key=None, value=value, timestamp=None) is not None:
                n += 1
            if n == 0:
                raise RuntimeError("a record does not fit in an empty batch")
            batch.close()
            partition = partitions[turn % len(partitions)]
            turn += 1
            futures.append(await producer.send_batch(batch, cfg.topic, partition=partition))
            counts.append(n)
            left -= n
        await asyncio.gather(*futures)
        span.stop()
        check_futures(futures, len(counts))
        if sum(counts) != cfg.records:
            raise RuntimeError(f"{sum(counts)} of {cfg.records} records batched")


async def latency(cfg: Config, span: Span) -> dict[str, Any]:
    value = cfg.payload()
    async with _producer(cfg) as producer:
        send = producer.send
        topic = cfg.topic
        return await paced_latency(cfg, span, lambda: send(topic, value), producer.flush)


PATTERNS = {
    "a": futures_then_wait,
    "b": futures_then_wait,
    "c": concurrent_send,
    "d": bulk,
    "latency": latency,
}

if __name__ == "__main__":
    sys.exit(main("aiokafka", "aiokafka", PATTERNS))
