"""aioproducer, request/response style: many tasks each awaiting ``send()`` (the ack) in a loop.

Models an application where each request handler awaits its own produce.
"""

from __future__ import annotations

import asyncio
import sys

from benchmarks.clients._common import Config, Span, aioproducer_for, main


async def bench(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with aioproducer_for(cfg) as producer:
        await producer.send(cfg.topic, value)  # warm-up
        remaining = cfg.records
        send = producer.send
        topic = cfg.topic

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1  # claimed before awaiting, so exactly cfg.records are sent
                await send(topic, value)

        workers = max(1, min(cfg.concurrency, cfg.records))
        span.start()
        await asyncio.gather(*(worker() for _ in range(workers)))
        span.stop()


if __name__ == "__main__":
    sys.exit(main("aioproducer_send", "aioproducer", bench))
