"""Cost of one sender pass over the accumulator as the number of partitions ever written grows.

Every partition gets one batch, which is drained (so its queue is empty but
known); then each pass appends one record to one partition and runs what the
sender runs per pass on the accumulator: expiry, ready, drain, next expiry.
With the set of non-empty partitions, the cost no longer depends on how many
partitions were written before.

    python benchmarks/sender_pass_cost.py
"""

from __future__ import annotations

import time

from aioproducer.engine.accumulator import RecordAccumulator
from aioproducer.protocol.compression import Codec


def _leader(topic: str, partition: int) -> int:
    return partition % 3


def pass_cost(partitions: int, passes: int = 2000) -> float:
    """Microseconds per pass."""
    acc = RecordAccumulator(
        batch_size=16384, linger_ms=0, codec=Codec.NONE, delivery_timeout_ms=120000
    )
    now = 0.0
    for p in range(partitions):
        acc.append(("t", p), 0, None, b"v", None, None, now)
    acc.drain(now, acc.ready(now, _leader), 1 << 40)
    start = time.perf_counter()
    for i in range(passes):
        now += 0.001
        acc.append(("t", i % partitions), 0, None, b"v", None, None, now)
        acc.expired(now)
        ready = acc.ready(now, _leader)
        acc.drain(now, ready, 1 << 20)
        acc.next_expiry()
    return (time.perf_counter() - start) / passes * 1e6


def main() -> None:
    base = pass_cost(1)
    for n in (1, 1000, 8000):
        cost = pass_cost(n)
        print(
            f"{n:>5} partitions written: {cost:7.1f} us per pass ({cost / base:5.1f}x one partition)"
        )


if __name__ == "__main__":
    main()
