"""Shared plumbing for benchmark client processes.

A client module maps pattern names to functions ``bench(cfg, span)`` (sync or
async) and calls :func:`main`. A pattern function builds its producer, sends
one warm-up record and waits for its ack, then calls ``span.start()``,
produces ``cfg.records`` records, waits until all are acknowledged, and calls
``span.stop()``. Setup and warm-up stay outside the measured span so only
steady-state producing is compared. It may return a dict of extra figures
(the latency pattern returns its percentiles).

The patterns, identical for every client that has the API:

* ``a``: produce every record, keep its future (or delivery callback), then flush.
* ``b``: produce every record, keep the futures, then wait for them in chunks of
  ``cfg.chunk`` (1,000) records.
* ``c``: ``cfg.concurrency`` (1,000) tasks, each awaiting ``send()`` (the ack) in a loop.
* ``d``: the client's bulk API.
* ``latency``: ``cfg.rate`` records/s for ``cfg.duration`` s, send->ack latency per record.

The process prints exactly one JSON line on stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")

# Records sent before the measured span; the orchestrator expects them on the broker too.
WARMUP_RECORDS = 1

PatternFn = Callable[["Config", "Span"], Any]  # sync, or async returning a coroutine


@dataclass(frozen=True)
class Config:
    bootstrap: str
    topic: str
    pattern: str
    records: int
    size: int
    linger_ms: int
    batch_size: int
    idempotence: bool
    concurrency: int
    chunk: int
    loop: str
    partitions: int
    rate: int
    duration: float
    compression: str = "none"

    def payload(self) -> bytes:
        # Random bytes: a compressing client gains nothing (compression is off by default).
        return os.urandom(self.size)


class Span:
    """Wall-clock and process CPU time (user+sys, all threads) between start and stop."""

    def __init__(self) -> None:
        self.wall_s: float | None = None
        self.cpu_s: float | None = None
        self._wall0 = 0.0
        self._cpu0 = 0.0

    @staticmethod
    def _cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime

    def start(self) -> None:
        self._cpu0 = self._cpu()
        self._wall0 = time.perf_counter()

    def stop(self) -> None:
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = self._cpu() - self._cpu0


class NotApplicable(Exception):
    """The client has no API for this pattern; reported as a skipped row, not a failure."""


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--pattern", required=True, choices=("a", "b", "c", "d", "latency"))
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--idempotence", choices=("on", "off"), default="on")
    p.add_argument("--concurrency", type=int, default=1000, help="tasks in pattern c")
    p.add_argument("--chunk", type=int, default=1000, help="futures awaited per chunk (pattern b)")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    p.add_argument("--rate", type=int, default=10_000, help="records/s (latency pattern)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds (latency pattern)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none")
    a = p.parse_args(argv)
    return Config(
        bootstrap=a.bootstrap,
        topic=a.topic,
        pattern=a.pattern,
        records=a.records,
        size=a.size,
        linger_ms=a.linger_ms,
        batch_size=a.batch_size,
        idempotence=a.idempotence == "on",
        concurrency=a.concurrency,
        chunk=a.chunk,
        loop=a.loop,
        partitions=a.partitions,
        rate=a.rate,
        duration=a.duration,
        compression=a.compression,
    )


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def run_coroutine(coro: Awaitable[Any], loop: str) -> Any:
    """Run ``coro`` on a fresh event loop of the requested kind."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)  # type: ignore[arg-type]
    return asyncio.run(coro)  # type: ignore[arg-type]


def main(
    client: str,
    library: str,
    patterns: dict[str, PatternFn],
    argv: list[str] | None = None,
) -> int:
    """Run the requested pattern and print its JSON result line; return the exit code.

    Exit codes: 0 ok, 1 failed, 3 skipped (``library`` missing or pattern not applicable).
    """
    cfg = parse_args(argv)
    span = Span()
    base: dict[str, Any] = {
        "client": client,
        "pattern": cfg.pattern,
        "records": cfg.records,
        "size": cfg.size,
        "idempotence": cfg.idempotence,
        "loop": cfg.loop,
        "warmup_records": WARMUP_RECORDS,
        "topic": cfg.topic,
    }
    # Only a missing top-level package means "skip"; an ImportError raised from
    # inside an installed library is a real failure and is reported as such.
    for name in (library, "uvloop" if cfg.loop == "uvloop" else None):
        if name and importlib.util.find_spec(name) is None:
            _emit({**base, "status": "skipped", "error": f"{name} is not installed"})
            return 3
    bench = patterns.get(cfg.pattern)
    if bench is None:
        _emit(
            {**base, "status": "skipped", "error": f"{client} has no API for pattern {cfg.pattern}"}
        )
        return 3
    try:
        if inspect.iscoroutinefunction(bench):
            extra = run_coroutine(bench(cfg, span), cfg.loop)
        else:
            extra = bench(cfg, span)
    except NotApplicable as exc:
        _emit({**base, "status": "skipped", "error": str(exc)})
        return 3
    except BaseException as exc:  # noqa: BLE001 - report everything, even Ctrl-C mid-run
        traceback.print_exc(file=sys.stderr)
        _emit({**base, "status": "failed", "error": f"{type(exc).__name__}: {exc}"})
        return 1
    if span.wall_s is None or span.cpu_s is None:
        _emit({**base, "status": "failed", "error": "measured span was never closed"})
        return 1
    _emit(
        {
            **base,
            **(extra or {}),
            "status": "ok",
            "wall_s": span.wall_s,
            "cpu_s": span.cpu_s,
            "records_per_s": cfg.records / span.wall_s,
            "cpu_us_per_record": span.cpu_s * 1e6 / cfg.records,
        }
    )
    return 0


# -- helpers the client modules share ------------------------------------------


def check_futures(futures: Iterable[asyncio.Future[Any]], expected: int) -> None:
    """Raise unless exactly ``expected`` futures resolved, all successfully."""
    futures = list(futures)
    not_done = sum(1 for f in futures if not f.done())
    failed = [f for f in futures if f.done() and (f.cancelled() or f.exception() is not None)]
    if len(futures) != expected or not_done or failed:
        first = failed[0] if failed else None
        detail = (
            "cancelled"
            if first is not None and first.cancelled()
            else (repr(first.exception()) if first is not None else "-")
        )
        raise RuntimeError(
            f"{len(futures)} futures for {expected} records: {not_done} pending, "
            f"{len(failed)} failed (first: {detail})"
        )


async def gather_in_chunks(futures: list[Any], chunk: int) -> None:
    """Pattern b's wait: ``asyncio.gather`` over ``chunk`` futures at a time (raises on failure)."""
    for i in range(0, len(futures), chunk):
        await asyncio.gather(*futures[i : i + chunk])


async def produce_then_wait(
    cfg: Config,
    span: Span,
    send: Callable[[str, bytes], Awaitable[asyncio.Future[Any]]],
    flush: Callable[[], Awaitable[Any]],
) -> None:
    """Patterns a and b for a client whose ``await send(topic, value)`` returns a future.

    Every record's future is kept; then pattern a awaits ``flush()`` and
    pattern b gathers the futures ``cfg.chunk`` at a time.
    """
    value = cfg.payload()
    topic = cfg.topic
    futures: list[asyncio.Future[Any]] = []
    append = futures.append
    span.start()
    for _ in range(cfg.records):
        append(await send(topic, value))
    if cfg.pattern == "a":
        await flush()
    else:
        await gather_in_chunks(futures, cfg.chunk)
    span.stop()
    check_futures(futures, cfg.records)


async def concurrent_sends(cfg: Config, span: Span, send_one: Callable[[], Awaitable[Any]]) -> None:
    """Pattern c: ``cfg.concurrency`` tasks each awaiting ``send_one()`` (the ack) in a loop."""
    remaining = cfg.records

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1  # claimed before awaiting, so exactly ``cfg.records`` are sent
            await send_one()

    span.start()
    await asyncio.gather(*(worker() for _ in range(max(1, min(cfg.concurrency, cfg.records)))))
    span.stop()


# Latencies are kept as a histogram of 10 µs buckets: exact enough for
# percentiles in milliseconds, and histograms of several runs add up.
BUCKET_MS = 0.01


def histogram(latencies_ms: list[float]) -> dict[str, int]:
    """``{bucket: count}`` of ``latencies_ms`` (string keys, as JSON keeps them)."""
    out: dict[str, int] = {}
    for lat in latencies_ms:
        key = str(int(lat / BUCKET_MS))
        out[key] = out.get(key, 0) + 1
    return out


def merge_histograms(hists: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in hists:
        for key, count in h.items():
            out[key] = out.get(key, 0) + count
    return out


def percentiles(hist: dict[str, int]) -> dict[str, float]:
    """p50/p99/p99.9/max (nearest rank; upper edge of the bucket) of a histogram."""
    buckets = sorted((int(k), c) for k, c in hist.items())
    n = sum(c for _, c in buckets)
    if not n:
        raise RuntimeError("no acknowledgements were measured")
    out: dict[str, float] = {}
    for name, q in (("p50", 0.50), ("p99", 0.99), ("p99_9", 0.999), ("max", 1.0)):
        rank = max(1, int(q * n + 0.5))
        seen = 0
        for bucket, count in buckets:
            seen += count
            if seen >= rank:
                out[name] = (bucket + 1) * BUCKET_MS
                break
    return out


async def paced_latency(
    cfg: Config,
    span: Span,
    send_one: Callable[[], Awaitable[asyncio.Future[Any]]],
    drain: Callable[[], Awaitable[Any]],
) -> dict[str, Any]:
    """Send ``cfg.rate`` records/s for ``cfg.duration`` s and measure send->ack per record.

    Each record's latency runs from the moment it was due (``start + i / rate``)
    to the moment its future's done-callback runs on the loop, so a client that
    falls behind the schedule is charged for it (no coordinated omission).
    ``send_one()`` returns the record's delivery future; ``drain()`` waits for
    whatever is still unacknowledged at the end.
    """
    total = int(cfg.rate * cfg.duration)
    latencies: list[float] = []
    failures: list[BaseException] = []
    clock = time.perf_counter
    futures: list[asyncio.Future[Any]] = []

    def on_done(due: float) -> Callable[[asyncio.Future[Any]], None]:
        def done(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled():
                failures.append(asyncio.CancelledError())
            elif (exc := fut.exception()) is not None:
                failures.append(exc)
            else:
                latencies.append((clock() - due) * 1000.0)

        return done

    span.start()
    start = clock()
    sent = 0
    while sent < total:
        due_now = min(total, int((clock() - start) * cfg.rate) + 1)
        while sent < due_now:
            fut = await send_one()
            fut.add_done_callback(on_done(start + sent / cfg.rate))
            futures.append(fut)
            sent += 1
        # Sleep until the next record is due (about 0.1 ms at 10k/s: the loop's
        # timer resolution makes this a ~1 ms tick that sends ~10 records).
        delay = start + sent / cfg.rate - clock()
        if delay > 0:
            await asyncio.sleep(delay)
    send_wall = clock() - start
    await drain()
    await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 60)
    await asyncio.sleep(0)  # let the last done-callbacks run
    span.stop()
    if failures:
        raise RuntimeError(f"{len(failures)} of {total} records failed, first: {failures[0]!r}")
    if len(latencies) != total:
        raise RuntimeError(f"{len(latencies)} of {total} acknowledgements measured")
    hist = histogram(latencies)
    return {
        "latency_ms": percentiles(hist),
        "latency_hist": hist,
        "offered_rate": cfg.rate,
        "achieved_rate": total / send_wall,
    }


def aioproducer_for(cfg: Config) -> Any:
    """The aioproducer Producer every aioproducer pattern measures, from the run's settings."""
    from aioproducer import Producer

    return Producer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        batch_size=cfg.batch_size,
        enable_idempotence=cfg.idempotence,
        compression=cfg.compression,
    )
