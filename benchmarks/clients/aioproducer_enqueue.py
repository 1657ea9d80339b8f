"""aioproducer, fire-and-collect: ``enqueue()`` every record, keep the futures, ``flush()``.

``enqueue()`` waits only for buffer space, so this measures raw pipeline throughput.
"""

from __future__ import annotations

import asyncio
import sys

from benchmarks.clients._common import Config, Span, aioproducer_for, main


async def bench(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with aioproducer_for(cfg) as producer:
        await producer.send(cfg.topic, value)  # warm-up
        span.start()
        enqueue = producer.enqueue
        topic = cfg.topic
        futures: list[asyncio.Future] = []
        append = futures.append
        for _ in range(cfg.records):
            append(await enqueue(topic, value))
        await producer.flush()
        span.stop()
        not_done = sum(1 for f in futures if not f.done())
        failed = [f for f in futures if f.done() and (f.cancelled() or f.exception() is not None)]
        if not_done or failed:
            first = failed[0] if failed else None
            detail = "cancelled" if first is not None and first.cancelled() else (
                repr(first.exception()) if first is not None else "-"
            )
            raise RuntimeError(
                f"after flush(): {not_done} futures pending, {len(failed)} failed (first: {detail})"
            )


if __name__ == "__main__":
    sys.exit(main("aioproducer_enqueue", "aioproducer", bench))
