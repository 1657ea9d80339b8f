"""Shared plumbing for benchmark client processes.

A client module defines ``bench(cfg, span)`` (sync or async). It must build its
producer, send one warm-up record and wait for its ack, then call
``span.start()``, produce ``cfg.records`` records, wait until all are
acknowledged, and call ``span.stop()``. Setup and warm-up stay outside the
measured span so only steady-state producing is compared.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# Records sent before the measured span; the orchestrator expects them on the broker too.
WARMUP_RECORDS = 1


@dataclass(frozen=True)
class Config:
    bootstrap: str
    topic: str
    records: int
    size: int
    linger_ms: int
    batch_size: int
    idempotence: bool
    concurrency: int
    chunk: int

    def payload(self) -> bytes:
        # Random bytes so a compressing client would gain nothing; compression is off anyway.
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


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--idempotence", choices=("on", "off"), default="off")
    p.add_argument("--concurrency", type=int, default=1000, help="workers for send()-style clients")
    p.add_argument("--chunk", type=int, default=10_000, help="futures gathered per chunk")
    a = p.parse_args(argv)
    return Config(
        bootstrap=a.bootstrap,
        topic=a.topic,
        records=a.records,
        size=a.size,
        linger_ms=a.linger_ms,
        batch_size=a.batch_size,
        idempotence=a.idempotence == "on",
        concurrency=a.concurrency,
        chunk=a.chunk,
    )


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def main(
    client: str,
    library: str,
    bench: Callable[[Config, Span], Awaitable[None] | None],
    argv: list[str] | None = None,
) -> int:
    """Run ``bench`` and print its JSON result line; return the process exit code.

    Exit codes: 0 ok, 1 failed, 3 skipped (``library`` is not installed).
    """
    cfg = parse_args(argv)
    span = Span()
    base: dict[str, Any] = {
        "client": client,
        "records": cfg.records,
        "size": cfg.size,
        "idempotence": cfg.idempotence,
        "warmup_records": WARMUP_RECORDS,
        "topic": cfg.topic,
    }
    # Only a missing top-level package means "skip"; an ImportError raised from
    # inside an installed library is a real failure and is reported as such.
    if importlib.util.find_spec(library) is None:
        _emit({**base, "status": "skipped", "error": f"{library} is not installed"})
        return 3
    try:
        if inspect.iscoroutinefunction(bench):
            asyncio.run(bench(cfg, span))
        else:
            bench(cfg, span)
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
            "status": "ok",
            "wall_s": span.wall_s,
            "cpu_s": span.cpu_s,
            "records_per_s": cfg.records / span.wall_s,
            "cpu_us_per_record": span.cpu_s * 1e6 / cfg.records,
        }
    )
    return 0


def aioproducer_for(cfg: Config) -> Any:
    """The aioproducer Producer both aioproducer clients measure, from the run's settings."""
    from aioproducer import Producer

    return Producer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        batch_size=cfg.batch_size,
        enable_idempotence=cfg.idempotence,
    )
