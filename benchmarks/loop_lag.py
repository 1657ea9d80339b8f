"""Event-loop lag while large batches are compressed, with and without offloading.

    python -m benchmarks.loop_lag [--bootstrap host:port] [--codec gzip] [--batch-size 1048576]
                                  [--path enqueue|bulk]

A ticker task asks to wake every millisecond and records how late it wakes;
meanwhile the producer sends compressible records in large batches. The sender
compresses batches of at least ``OFFLOAD_COMPRESSION_BYTES`` in a worker thread;
the "inline" run raises that threshold so every batch compresses on the loop.
The table shows the ticker's p50/p99/max lateness for both, so the effect of
offloading is measured rather than assumed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from aioproducer import Producer, produce_request
from aioproducer.testing.local_broker import bootstrap_or_local


async def measure(
    bootstrap: str, codec: str, batch_size: int, records: int, threshold: int, path: str = "enqueue"
) -> list[float]:
    produce_request.OFFLOAD_COMPRESSION_BYTES = threshold
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - start - 0.001) * 1000)

    # Compressible but not trivial: repeated text with a counter.
    values = [(b"event %08d " % i) * 20 + os.urandom(16) for i in range(1000)]
    async with Producer(
        bootstrap, compression=codec, batch_size=batch_size, linger_ms=50,
        max_request_size=4 * batch_size, buffer_memory=64 << 20,
    ) as producer:
        await producer.send("loop-lag", b"warm-up")
        tick = asyncio.create_task(ticker())
        # One task producing at full speed: it never yields on its own, so the
        # lag shows how often the producer itself gives the loop back.
        if path == "bulk":
            for _ in range(records // 10_000):
                await producer.enqueue_many("loop-lag", values * 10)
        else:
            for i in range(records):
                await producer.enqueue("loop-lag", values[i % 1000])
        await producer.flush()
        stop.set()
        await tick
    return lags


def summary(lags: list[float]) -> str:
    lags = sorted(lags)
    p99 = lags[int(len(lags) * 0.99) - 1] if lags else 0.0
    return f"p50 {statistics.median(lags):6.2f} ms   p99 {p99:6.2f} ms   max {max(lags):6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap")
    parser.add_argument("--codec", default="gzip", choices=["gzip", "zstd", "lz4", "snappy"])
    parser.add_argument("--batch-size", type=int, default=1 << 20)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--path", choices=["enqueue", "bulk"], default="enqueue")
    args = parser.parse_args()
    default = produce_request.OFFLOAD_COMPRESSION_BYTES
    with bootstrap_or_local(args.bootstrap) as bootstrap:
        for name, threshold in (("offloaded", default), ("inline", 1 << 62)):
            lags = asyncio.run(
                measure(bootstrap, args.codec, args.batch_size, args.records, threshold, args.path)
            )
            print(f"{args.path:7s} {args.codec:6s} batch {args.batch_size:>8d} B  {name:9s}  {summary(lags)}")


if __name__ == "__main__":
    main()
