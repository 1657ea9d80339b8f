"""confluent-kafka's classic ``Producer`` bridged to asyncio futures (patterns c and latency).

What an asyncio application writes without ``AIOProducer``: ``produce()`` on
the loop, a thread that serves delivery reports with ``poll()``, and a
delivery callback that resolves the record's asyncio future through
``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from benchmarks.clients._common import Config, Span, concurrent_sends, main, paced_latency
from benchmarks.clients.confluent import _conf


def _resolve(fut: asyncio.Future[Any], err: Any, msg: Any) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(msg)
    else:
        from confluent_kafka import KafkaException

        fut.set_exception(KafkaException(err))


@asynccontextmanager
async def _bridge(cfg: Config) -> AsyncIterator[Callable[[bytes], asyncio.Future[Any]]]:
    """Yield ``produce(value) -> future``; a poll thread runs while the block is open."""
    from confluent_kafka import Producer

    loop = asyncio.get_running_loop()
    producer = Producer(_conf(cfg))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    thread = threading.Thread(target=serve, name="delivery-reports", daemon=True)
    thread.start()
    topic = cfg.topic

    def produce(value: bytes) -> asyncio.Future[Any]:
        fut = loop.create_future()

        def on_delivery(err: Any, msg: Any) -> None:
            loop.call_soon_threadsafe(_resolve, fut, err, msg)

        while True:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                return fut
            except BufferError:
                # librdkafka's queue is full: the poll thread frees room.
                threading.Event().wait(0.001)

    try:
        await produce(cfg.payload())  # warm-up
        yield produce
    finally:
        await asyncio.to_thread(producer.flush, 30)
        stop.set()
        await asyncio.to_thread(thread.join, 5)


async def concurrent_send(cfg: Config, span: Span) -> None:
    value = cfg.payload()
    async with _bridge(cfg) as produce:
        await concurrent_sends(cfg, span, lambda: produce(value))


async def latency(cfg: Config, span: Span) -> dict[str, Any]:
    value = cfg.payload()

    async def send_one() -> asyncio.Future[Any]:
        return produce(value)

    async def drain() -> None:
        return None  # the futures themselves are awaited by paced_latency

    async with _bridge(cfg) as produce:
        return await paced_latency(cfg, span, send_one, drain)


PATTERNS = {"c": concurrent_send, "latency": latency}

if __name__ == "__main__":
    sys.exit(main("confluent_bridge", "confluent_kafka", PATTERNS))
