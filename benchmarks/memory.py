"""Resident memory while the broker is stalled, against ``buffer_memory``.

    python -m benchmarks.memory [--buffer-mb 32] [--value-size 100] [--path enqueue|bulk]

Starts a private Tansu broker, sends one record so metadata and the producer id
are in place, then stops the broker with SIGSTOP (``LocalBroker.pause``) and
produces 100-byte records until ``enqueue`` gives up waiting for buffer
memory (``max_block_ms``). Every record produced is then held by the
producer: its encoded bytes, and for the per-record path its future and
bookkeeping. The script prints the process's RSS growth, the number of
records held, and the ratio to ``buffer_memory``; the bound to meet is
``2 * buffer_memory + 20 MB``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc

import psutil

from aioproducer import Producer, errors
from aioproducer.embedded import LocalBroker


async def fill(
    bootstrap: str, broker: LocalBroker, buffer_mb: int, value_size: int, path: str
) -> None:
    process = psutil.Process()
    value = b"v" * value_size
    async with Producer(
        bootstrap,
        buffer_memory=buffer_mb << 20,
        max_block_ms=1000,
        linger_ms=5,
        delivery_timeout_ms=600_000,
        request_timeout_ms=300_000,
    ) as producer:
        await producer.send("memory", b"warm-up")
        gc.collect()
        before = process.memory_info().rss
        broker.pause()
        held: list[asyncio.Future[object]] = []  # as a user keeping the futures would
        try:
            if path == "bulk":
                chunk = [value] * 10_000
                while True:
                    held.append(await producer.enqueue_many("memory", chunk))
            else:
                while True:
                    held.append(await producer.enqueue("memory", value))
        except errors.KafkaTimeoutError:
            pass
        gc.collect()
        grown = process.memory_info().rss - before
        records = len(held) * (10_000 if path == "bulk" else 1)
        bound = 2 * (buffer_mb << 20) + 20 * 10**6
        print(
            f"{path:8s} value {value_size} B  buffer_memory {buffer_mb} MiB: {records:,} records held, "
            f"RSS +{grown / 2**20:.1f} MiB = {grown / (buffer_mb << 20):.2f} x buffer_memory "
            f"(bound 2x + 20 MB = {bound / 2**20:.1f} MiB: {'ok' if grown <= bound else 'EXCEEDED'}); "
            f"{grown / max(records, 1):.0f} B per record"
        )
        broker.resume()
        await producer.flush()
        for fut in held:
            if fut.done() and not fut.cancelled():
                fut.exception()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--buffer-mb", type=int, default=32)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--path", choices=["enqueue", "bulk"], default="enqueue")
    args = parser.parse_args()
    with LocalBroker() as broker:
        asyncio.run(
            fill(broker.bootstrap_servers, broker, args.buffer_mb, args.value_size, args.path)
        )


if __name__ == "__main__":
    main()
