"""aiokafka: ``await producer.send()`` returns a delivery future; futures are gathered in chunks.

This is aiokafka's fastest non-blocking pattern: sending never waits for acks,
and gathering a chunk only after the next one was sent keeps the pipeline full.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque

from benchmarks.clients._common import Config, Span, main


async def bench(cfg: Config, span: Span) -> None:
    from aiokafka import AIOKafkaProducer

    value = cfg.payload()
    producer = AIOKafkaProducer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        max_batch_size=cfg.batch_size,
        enable_idempotence=cfg.idempotence,
    )
    await producer.start()
    try:
        await (await producer.send(cfg.topic, value))  # warm-up: connections and metadata
        span.start()
        pending: deque[list[asyncio.Future]] = deque()
        chunk: list[asyncio.Future] = []
        for _ in range(cfg.records):
            chunk.append(await producer.send(cfg.topic, value))
            if len(chunk) >= cfg.chunk:
                pending.append(chunk)
                chunk = []
                if len(pending) > 1:
                    await asyncio.gather(*pending.popleft())
        pending.append(chunk)
        while pending:
            await asyncio.gather(*pending.popleft())
        span.stop()
    finally:
        await producer.stop()


if __name__ == "__main__":
    sys.exit(main("aiokafka", "aiokafka", bench))
