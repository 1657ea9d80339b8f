"""aioproducer in every pattern (see ``_common``): ``enqueue()`` futures, ``send()``, bulk."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from benchmarks.clients._common import (
    Config,
    NotApplicable,
    Span,
    aioproducer_for,
    concurrent_sends,
    main,
    paced_latency,
    produce_then_wait,
)

# Records per enqueue_many() call in the bulk pattern.
BULK_CHUNK = 10_000


async def futures_then_wait(cfg: Config, span: Span) -> None:
    async with aioproducer_for(cfg) as producer:
        await producer.send(cfg.topic, cfg.payload())  # warm-up: connections and metadata
        await produce_then_wait(cfg, span, producer.enqueue, producer.flush)


async def concurrent_send(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with aioproducer_for(cfg) as producer:
        send = producer.send
        topic = cfg.topic
        await send(topic, value)
        await concurrent_sends(cfg, span, lambda: send(topic, value))


async def bulk(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with aioproducer_for(cfg) as producer:
        enqueue_many = getattr(producer, "enqueue_many", None)
        if enqueue_many is None:
            raise NotApplicable("this aioproducer version has no enqueue_many()")
        await producer.send(cfg.topic, value)
        values = [value] * BULK_CHUNK
        span.start()
        futures = []
        for start in range(0, cfg.records, BULK_CHUNK):
            n = min(BULK_CHUNK, cfg.records - start)
            futures.append(await enqueue_many(cfg.topic, values if n == BULK_CHUNK else values[:n]))
        results = await asyncio.gather(*futures)  # a failed record fails its call's future
        span.stop()
        acked = sum(count for r in results for runs in r.offsets.values() for _, count in runs)
        if acked != cfg.records or any(r.errors for r in results):
            raise RuntimeError(f"{acked} of {cfg.records} records acknowledged")


async def latency(cfg: Config, span: Span) -> dict[str, Any]:
    value = cfg.payload()
    async with aioproducer_for(cfg) as producer:
        await producer.send(cfg.topic, value)
        enqueue = producer.enqueue
        topic = cfg.topic
        return await paced_latency(cfg, span, lambda: enqueue(topic, value), producer.flush)


PATTERNS = {
    "a": futures_then_wait,
    "b": futures_then_wait,
    "c": concurrent_send,
    "d": bulk,
    "latency": latency,
}

if __name__ == "__main__":
    sys.exit(main("aioproducer", "aioproducer", PATTERNS))
