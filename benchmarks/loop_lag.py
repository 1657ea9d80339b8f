"""Event-loop lag while one task produces at full speed into large compressed batches.

    python -m benchmarks.loop_lag [--bootstrap host:port] [--codec gzip] [--batch-size 1048576]
                                  [--path enqueue|bulk] [--runs 3] [--gc-freeze] [--attribute]

A ticker task asks to wake every millisecond and records how late it wakes;
meanwhile one task produces compressible records as fast as it can (it never
yields on its own, so the lag shows how often the producer gives the loop
back). The sender compresses batches of at least ``OFFLOAD_COMPRESSION_BYTES``
in a worker thread; the "inline" run raises that threshold so every batch
compresses on the loop. Each line shows the ticker's p50/p99/max lateness.

The ``gc`` line under it lists the cyclic garbage collector's pauses per
generation (count, longest, total) and how many ticks later than 10 ms
overlapped one. ``--gc-freeze`` calls ``gc.freeze()`` once the producer is
started, as an application may after its start-up: collections then skip
the objects that existed before (the process's modules, classes, functions)
and walk only what the run creates, mainly the per-record futures.

``--attribute`` times every event-loop callback, wall clock and CPU time of
the loop's thread, and prints the ones that ran longest: a callback whose CPU
time is far below its wall time was descheduled (a busy machine), not busy.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.events
import gc
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aioproducer import Producer
from aioproducer.embedded import bootstrap_or_local
from aioproducer.engine import produce_request

LATE_MS = 10.0  # ticks at least this late are matched against GC pauses


class GcPauses:
    """Collections seen through ``gc.callbacks``: (start, seconds, generation)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._start = now
        else:
            self.pauses.append((self._start, now - self._start, info["generation"]))

    def summary(self, ticks: list[tuple[float, float]]) -> str:
        parts = []
        for gen in (0, 1, 2):
            ms = [d * 1000 for _s, d, g in self.pauses if g == gen]
            if ms:
                parts.append(f"gen{gen} n={len(ms)} max {max(ms):.1f} total {sum(ms):.1f} ms")
        late = [(s, e) for s, e in ticks if (e - s) * 1000 - 1 >= LATE_MS]
        # A tick is late because of collections when they took at least half its lateness.
        by_gc = sum(
            1
            for s, e in late
            if sum(max(0.0, min(e, ps + d) - max(s, ps)) for ps, d, _g in self.pauses)
            >= (e - s - 0.001) / 2
        )
        return (
            f"gc: {'; '.join(parts) or 'none'}; ticks >= {LATE_MS:.0f} ms late: {len(late)}, "
            f"{by_gc} of them half or more in a collection"
        )


class CallbackTimes:
    """Wall and loop-thread CPU time of every event-loop callback (``--attribute``)."""

    def __init__(self, gc_pauses: GcPauses) -> None:
        self._gc = gc_pauses
        self.slow: list[
            tuple[float, float, float, float, str]
        ] = []  # start; wall, cpu, gc ms; name

    @contextmanager
    def installed(self) -> Iterator[None]:
        original = asyncio.events.Handle._run
        times = self

        def run(handle: asyncio.Handle) -> None:
            start, cpu, seen = time.perf_counter(), time.thread_time(), len(times._gc.pauses)
            original(handle)
            wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
            if wall >= 0.002:
                in_gc = sum(d for _s, d, _g in times._gc.pauses[seen:])
                times.slow.append((start, wall * 1000, cpu * 1000, in_gc * 1000, _name(handle)))

        asyncio.events.Handle._run = run  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            asyncio.events.Handle._run = original  # type: ignore[method-assign]

    def summary(self, ticks: list[tuple[float, float]], top: int = 6) -> str:
        """The callbacks that ran longest (by CPU) while the ticker ran."""
        worst: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        for start, wall, cpu, in_gc, name in self.slow:
            if ticks and ticks[0][0] <= start <= ticks[-1][1]:
                worst[name].append((wall, cpu, in_gc))
        lines = []
        for name, runs in sorted(worst.items(), key=lambda kv: -max(r[1] for r in kv[1]))[:top]:
            wall, cpu, in_gc = max(runs, key=lambda r: r[1])
            lines.append(
                f"    {name[:60]:60s} n>=2ms {len(runs):4d}  longest: cpu {cpu:5.1f} ms "
                f"(wall {wall:5.1f}, in gc {in_gc:5.1f})"
            )
        return "\n".join(lines)


def _name(handle: asyncio.Handle) -> str:
    callback = handle._callback  # type: ignore[attr-defined]
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        return f"task {getattr(owner.get_coro(), '__qualname__', owner.get_name())}"
    return getattr(callback, "__qualname__", type(callback).__name__)


async def measure(
    bootstrap: str,
    codec: str,
    batch_size: int,
    records: int,
    threshold: int,
    path: str = "enqueue",
    *,
    freeze: bool = False,
    gc_pauses: GcPauses | None = None,
) -> list[tuple[float, float]]:
    """Produce ``records`` records; return the ticker's (asked, woken) times."""
    produce_request.OFFLOAD_COMPRESSION_BYTES = threshold
    ticks: list[tuple[float, float]] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            ticks.append((start, time.perf_counter()))

    # Compressible but not trivial: repeated text with a counter.
    values = [(b"event %08d " % i) * 20 + os.urandom(16) for i in range(1000)]
    async with Producer(
        bootstrap,
        compression=codec,
        batch_size=batch_size,
        linger_ms=50,
        max_request_size=4 * batch_size,
        buffer_memory=64 << 20,
    ) as producer:
        await producer.send("loop-lag", b"warm-up")
        if freeze:
            gc.freeze()
        if gc_pauses is not None:
            gc.callbacks.append(gc_pauses)
        try:
            tick = asyncio.create_task(ticker())
            if path == "bulk":
                for _ in range(records // 10_000):
                    await producer.enqueue_many("loop-lag", values * 10)
            else:
                for i in range(records):
                    await producer.enqueue("loop-lag", values[i % 1000])
            await producer.flush()
            stop.set()
            await tick
        finally:
            if gc_pauses is not None:
                gc.callbacks.remove(gc_pauses)
            if freeze:
                gc.unfreeze()
    return ticks


def summary(ticks: list[tuple[float, float]]) -> str:
    lags = sorted((end - start) * 1000 - 1 for start, end in ticks)
    p99 = lags[int(len(lags) * 0.99) - 1] if lags else 0.0
    return f"p50 {statistics.median(lags):6.2f} ms   p99 {p99:6.2f} ms   max {max(lags):6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap")
    parser.add_argument("--codec", default="gzip", choices=["gzip", "zstd", "lz4", "snappy"])
    parser.add_argument("--batch-size", type=int, default=1 << 20)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--path", choices=["enqueue", "bulk"], default="enqueue")
    parser.add_argument("--runs", type=int, default=1, help="runs of each mode")
    parser.add_argument("--offloaded-only", action="store_true", help="skip the inline runs")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after start-up")
    parser.add_argument("--attribute", action="store_true", help="time every loop callback")
    args = parser.parse_args()
    default = produce_request.OFFLOAD_COMPRESSION_BYTES
    modes = [("offloaded", default)] + ([] if args.offloaded_only else [("inline", 1 << 62)])
    with bootstrap_or_local(args.bootstrap) as bootstrap:
        for _run in range(args.runs):
            for name, threshold in modes:
                pauses = GcPauses()
                times = CallbackTimes(pauses)
                run = measure(
                    bootstrap,
                    args.codec,
                    args.batch_size,
                    args.records,
                    threshold,
                    args.path,
                    freeze=args.gc_freeze,
                    gc_pauses=pauses,
                )
                if args.attribute:
                    with times.installed():
                        ticks = asyncio.run(run)
                else:
                    ticks = asyncio.run(run)
                print(
                    f"{args.path:7s} {args.codec:6s} batch {args.batch_size:>8d} B  {name:9s}  "
                    f"{summary(ticks)}"
                )
                print(f"    {pauses.summary(ticks)}")
                if args.attribute:
                    print(times.summary(ticks))


if __name__ == "__main__":
    main()
