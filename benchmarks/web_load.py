"""Load on the aiohttp ingest service: aioproducer against the same service on aiokafka.

    python -m benchmarks.web_load                                  # 1,000 clients, 100,000 requests
    python -m benchmarks.web_load --clients 100 --requests 5000    # a quick run
    python -m benchmarks.web_load --impls aioproducer --bootstrap 127.0.0.1:9092

One run per implementation, each in three processes: the embedded Tansu broker
(shared), the service (``examples/aiohttp_service.py``'s handler in acknowledged
mode; on aiokafka the same handler behind a thin adapter), and a load generator
(aiohttp client, ``--clients`` concurrent connections, each posting one JSON
event per request and waiting for the answer). The generator reports requests/s
and p50/p99/max latency; every event the service acknowledged (200) is then read
back with confluent-kafka and must be there exactly once.

Numbers are for this machine only: compare the two implementations of one run,
not runs on different machines. With few cores, the load generator competes
with the service for CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
IMPLS = ("aioproducer", "aiokafka")


# -- the service (role "serve") ----------------------------------------------------------------


class AiokafkaAdapter:
    """aiokafka's producer with the two calls the ingest handler makes."""

    def __init__(self, bootstrap: str, linger_ms: int) -> None:
        from aiokafka import AIOKafkaProducer

        # Idempotence off: aiokafka's InitProducerId fails against Tansu (as in benchmarks.run).
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=linger_ms, acks="all"
        )

    async def start(self) -> None:
        await self._producer.start()

    async def close(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._producer.stop(), timeout)

    async def enqueue(self, topic: str, value: bytes, *, key: bytes | None = None) -> Any:
        return await self._producer.send(topic, value, key=key)  # a future of the metadata


def build_app(impl: str, bootstrap: str, linger_ms: int, idempotence: bool) -> Any:
    from aiohttp import web
    from prometheus_client import CollectorRegistry

    from aioproducer import Producer
    from examples import aiohttp_service as svc

    if impl == "aioproducer":
        return svc.create_app(
            lambda: Producer(bootstrap, linger_ms=linger_ms, enable_idempotence=idempotence),
            svc.Settings(),
        )
    # The same handler and settings; only the producer differs.
    app = web.Application(client_max_size=svc.Settings().max_body_bytes)
    registry = CollectorRegistry()
    app[svc.SETTINGS] = svc.Settings()
    app[svc.REGISTRY] = registry
    app[svc.METRICS] = svc.IngestMetrics(registry)

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        adapter = AiokafkaAdapter(bootstrap, linger_ms)
        await adapter.start()
        app[svc.PRODUCER] = adapter  # type: ignore[assignment]  # duck-typed for the handler
        yield
        await adapter.close(10)

    app.cleanup_ctx.append(lifetime)
    app.router.add_post("/events/{topic}", svc.post_events)
    return app


async def serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    app = build_app(args.impl, args.bootstrap, args.linger_ms, args.idempotence == "on")
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    host, port = runner.addresses[0][:2]
    print(f"READY http://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


# -- the load generator (role "load") -----------------------------------------------------------


async def load(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    url = f"{args.url}/events/{args.topic}"
    pad = "x" * args.size
    latencies: list[float] = []
    acked: list[str] = []
    failures: collections.Counter[str] = collections.Counter()
    next_index = iter(range(args.requests))
    connector = aiohttp.TCPConnector(limit=args.clients)
    timeout = aiohttp.ClientTimeout(total=120)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def client() -> None:
            for i in next_index:
                event_id = f"{args.run_id}-{i}"
                body = json.dumps({"id": event_id, "pad": pad}).encode()
                sent = time.perf_counter()
                try:
                    async with session.post(
                        url, data=body, headers={"Content-Type": "application/json"}
                    ) as resp:
                        await resp.read()
                        status = resp.status
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    failures[type(exc).__name__] += 1
                    continue
                if status == 200:
                    latencies.append((time.perf_counter() - sent) * 1000)
                    acked.append(event_id)
                else:
                    failures[f"HTTP {status}"] += 1

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(args.clients)))
        elapsed = time.perf_counter() - start

    Path(args.ids_file).write_text("\n".join(acked))
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[max(0, math.ceil(q * len(latencies)) - 1)] if latencies else math.nan

    return {
        "requests": args.requests,
        "ok": len(acked),
        "failures": dict(failures),
        "elapsed_s": elapsed,
        "requests_per_s": len(acked) / elapsed,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": latencies[-1] if latencies else math.nan,
    }


# -- the orchestrator ---------------------------------------------------------------------------


def run_impl(args: argparse.Namespace, impl: str, bootstrap: str, workdir: Path) -> dict[str, Any]:
    from tests.support.verify import create_topic, read_records

    topic = create_topic(bootstrap, f"web-{impl}-{uuid.uuid4().hex[:8]}", args.partitions)
    python = [sys.executable, "-m", "benchmarks.web_load"]
    server = subprocess.Popen(
        [
            *python,
            "--role",
            "serve",
            "--impl",
            impl,
            "--bootstrap",
            bootstrap,
            "--linger-ms",
            str(args.linger_ms),
            "--idempotence",
            args.idempotence,
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the {impl} service did not start (exit {server.poll()})")
        ids_file = workdir / f"{impl}.ids"
        proc = subprocess.run(
            [
                *python,
                "--role",
                "load",
                "--url",
                line.split()[1],
                "--topic",
                topic,
                "--clients",
                str(args.clients),
                "--requests",
                str(args.requests),
                "--size",
                str(args.size),
                "--run-id",
                impl,
                "--ids-file",
                str(ids_file),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the load generator failed: {proc.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    acked = [i for i in ids_file.read_text().split("\n") if i]
    records = read_records(bootstrap, topic, len(acked), timeout=120, grace=2.0)
    stored = collections.Counter(json.loads(r.value)["id"] for r in records)
    result["impl"] = impl
    result["missing"] = sum(1 for i in acked if stored[i] == 0)
    result["duplicated"] = sum(1 for n in stored.values() if n > 1)
    result["stored"] = len(records)
    return result


def print_table(results: list[dict[str, Any]]) -> None:
    base = next((r for r in results if r["impl"] == "aiokafka"), None)
    print(
        f"{'service on':<12} {'req/s':>9} {'vs aiokafka':>11} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'ok':>8} {'failed':>7} {'missing':>8} {'dup':>5}"
    )
    for r in results:
        ratio = r["requests_per_s"] / base["requests_per_s"] if base else math.nan
        print(
            f"{r['impl']:<12} {r['requests_per_s']:>9.0f} {ratio:>10.2f}x {r['p50_ms']:>8.1f} "
            f"{r['p99_ms']:>8.1f} {r['max_ms']:>8.1f} {r['ok']:>8} "
            f"{sum(r['failures'].values()):>7} {r['missing']:>8} {r['duplicated']:>5}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--role", choices=["run", "serve", "load"], default="run", help=argparse.SUPPRESS
    )
    parser.add_argument("--impls", default=",".join(IMPLS), help="comma list (default: both)")
    parser.add_argument("--clients", type=int, default=1000, help="concurrent clients (1000)")
    parser.add_argument("--requests", type=int, default=100_000, help="requests in all (100000)")
    parser.add_argument("--size", type=int, default=100, help="padding bytes per event (100)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument(
        "--idempotence",
        choices=["on", "off"],
        default="on",
        help="for aioproducer (aiokafka always runs without it)",
    )
    parser.add_argument("--bootstrap", help="an existing broker (default: start Tansu)")
    parser.add_argument("--timeout", type=float, default=1800, help="bound on one load run (s)")
    parser.add_argument("--json", metavar="PATH", help="write the raw results here")
    # Internal, for the child processes.
    parser.add_argument("--impl", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--ids-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.role == "serve":
        asyncio.run(serve(args))
        return 0
    if args.role == "load":
        print(json.dumps(asyncio.run(load(args))), flush=True)
        return 0

    from aioproducer.testing.local_broker import bootstrap_or_local

    impls = [i for i in args.impls.split(",") if i]
    unknown = set(impls) - set(IMPLS)
    if unknown:
        parser.error(f"unknown implementation(s) {sorted(unknown)}; choose from {IMPLS}")
    results: list[dict[str, Any]] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, bootstrap_or_local(args.bootstrap) as bootstrap:
        print(
            f"broker {bootstrap}; {args.clients} clients, {args.requests} requests per service",
            file=sys.stderr,
            flush=True,
        )
        for impl in impls:
            try:
                results.append(run_impl(args, impl, bootstrap, Path(tmp)))
            except Exception as exc:  # noqa: BLE001 - report it, run the others
                print(f"{impl}: FAILED: {exc}", file=sys.stderr, flush=True)
                failed.append(impl)
            else:
                print(f"{impl}: done", file=sys.stderr, flush=True)
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    bad = failed or any(r["missing"] or r["duplicated"] or r["ok"] == 0 for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
