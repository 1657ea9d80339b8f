"""Load on the aiohttp ingest service: aioproducer against the same service on aiokafka.

    python -m benchmarks.web_load                        # 1,000 clients, 100,000 requests, 3 rounds
    python -m benchmarks.web_load --clients 200,1000         # both concurrencies in one invocation
    python -m benchmarks.web_load --clients 20 --requests 500 --rounds 1    # a smoke run
    python -m benchmarks.web_load --broker tansu             # the embedded Tansu broker instead
    python -m benchmarks.web_load --impls aioproducer --bootstrap 127.0.0.1:9092
    python -m benchmarks.web_load --clients 200 --profile /tmp/prof   # py-spy, CPU, requests

Each run has three processes: the broker (shared by all runs: Apache Kafka
unless ``--broker tansu`` or ``--bootstrap``, see :mod:`benchmarks.brokers`),
the service (``examples/aiohttp_service.py``'s handler in acknowledged mode; on
aiokafka the same handler behind a thin adapter) and a load generator (aiohttp
client, ``--clients`` concurrent connections, each posting one JSON event per
request and waiting for the answer). The generator reports requests/s and
p50/p99/max latency; every event the service acknowledged (200) is then read
back with librdkafka and must be there exactly once.

Both producers get the same acks, linger, batch size, compression and
idempotence (off by default for both), printed in the header. Every round runs
each implementation once on a fresh topic, the order alternating between rounds
(A,B then B,A), so that drift on a shared machine does not favour the one that
runs first; the summary gives per implementation the median requests/s with its
min-max, the medians of p50 and p99 latency, and aioproducer / aiokafka of the
medians.

``--profile DIR --perf`` (Linux perf, CPython 3.13+) samples it with perf as
well, on CPU time with C and Python frames together: the most exact of the
three shares (see :mod:`benchmarks.web_profile`).

``--profile DIR`` samples the service with py-spy during each load run (the
raw stacks are kept in DIR) and prints per run the producer's share of the
service's samples (inclusive: a sample is the producer's when any frame of
its stack is in the producer's package), the CPU per request of the service,
the broker and the load generator, and the Produce requests the service sent
(see :mod:`benchmarks.web_profile`). Profiled runs are slower: compare the
requests/s of unprofiled runs.

Service and load generator run with glibc's mmap and trim thresholds fixed (1 and
2 MiB; ``--malloc-as-is``: not): an asyncio socket read's 256 KiB buffer otherwise
costs ``mmap``, ``mremap`` and ``munmap`` until the process happens to free a large
block, which depends on its history, not its producer (docs/performance.md).

Numbers are for this machine only: compare the two implementations of one
invocation, not runs on different machines. With few cores, the load generator
and the broker compete with the service for CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # allow ``python benchmarks/web_load.py`` too
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import web_profile
from benchmarks.brokers import add_broker_arguments, broker_for
from benchmarks.web_service import IMPLS, ProducerSettings, serve
from benchmarks.web_summary import (
    print_profile_summary,
    print_summary,
    run_is_bad,
    run_line,
    summarize,
)

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


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


def schedule(impls: list[str], rounds: int) -> list[tuple[int, str]]:
    """``(round, impl)`` in run order: every round runs each once, the order alternating."""
    return [(r, impl) for r in range(1, rounds + 1) for impl in (impls if r % 2 else impls[::-1])]


def _wait_ready(server: subprocess.Popen[str], impl: str, timeout: float) -> str:
    """The service's URL from its READY line, or RuntimeError after ``timeout`` seconds."""
    import selectors

    assert server.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(server.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"the {impl} service was not ready within {timeout:.0f} s")
    line = server.stdout.readline().strip()
    if not line.startswith("READY "):
        raise RuntimeError(f"the {impl} service did not start (exit {server.poll()})")
    return line.split()[1]


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 20), "MALLOC_TRIM_THRESHOLD_": str(2 << 20)}


def malloc_settings(args: argparse.Namespace) -> dict[str, str]:
    """glibc's thresholds for the service and the load (module docstring); the environment wins."""
    return {} if args.malloc_as_is else {k: os.environ.get(k, v) for k, v in MALLOC_ENV.items()}


def run_once(
    args: argparse.Namespace,
    settings: ProducerSettings,
    impl: str,
    clients: int,
    round_no: int,
    bootstrap: str,
    workdir: Path,
) -> dict[str, Any]:
    """One run of ``impl`` under ``clients`` connections on a fresh topic, read back after."""
    from tests.support.verify import create_topic, delete_topic, read_records

    run_id = f"{impl}-c{clients}-r{round_no}"
    topic = create_topic(bootstrap, f"web-{run_id}-{uuid.uuid4().hex[:8]}", args.partitions)
    python = [sys.executable, "-m", "benchmarks.web_load"]
    env = {**os.environ, **malloc_settings(args)}  # the service's and the load generator's
    server_env = {**env, **(web_profile.perf_env() if args.perf else {})}
    profiling = args.profile is not None
    if profiling:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    cpu_raw = Path(args.profile or ".") / f"{run_id}-{uuid.uuid4().hex[:6]}.cpu.raw"
    server = subprocess.Popen(
        [
            *python,
            "--role",
            "serve",
            "--impl",
            impl,
            "--bootstrap",
            bootstrap,
            *settings.cli(),
            *(["--count", "--cpu-profile", str(cpu_raw)] if profiling else []),
        ],
        cwd=REPO_ROOT,
        env=server_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    ids_file = workdir / f"{run_id}.ids"
    profile: dict[str, Any] = {}
    try:
        url = _wait_ready(server, impl, 120)
        sampled = profiling_context(args, server.pid, run_id, profile)
        with sampled:
            proc = subprocess.run(
                [
                    *python,
                    "--role",
                    "load",
                    "--url",
                    url,
                    "--topic",
                    topic,
                    "--clients",
                    str(clients),
                    "--requests",
                    str(args.requests),
                    "--size",
                    str(args.size),
                    "--run-id",
                    run_id,
                    "--ids-file",
                    str(ids_file),
                ],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=args.timeout,
                check=False,
            )
        if proc.returncode != 0:
            raise RuntimeError(f"the load generator failed: {proc.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        rest, _ = web_profile.stop(server, signal.SIGTERM, 60)
        if args.perf:
            web_profile.remove_jit_dump(server.pid)
    if profiling:
        profile["stats"] = web_profile.read_stats(rest or "")
        if cpu_raw.exists():
            cpu = web_profile.attribute(cpu_raw.read_text(), web_profile.package_dir(impl))
            profile.update(
                cpu_samples=sum(cpu.values()),
                cpu_counts=dict(cpu),
                cpu_shares=web_profile.shares(cpu),
            )
        result["profile"] = profile

    acked = [i for i in ids_file.read_text().split("\n") if i]
    records = read_records(bootstrap, topic, len(acked), timeout=120, grace=2.0)
    stored = collections.Counter(json.loads(r.value or b"{}").get("id") for r in records)
    delete_topic(bootstrap, topic)
    result.update(
        impl=impl,
        clients=clients,
        round=round_no,
        status="ok",
        topic=topic,
        missing=sum(1 for i in acked if stored[i] == 0),
        duplicated=sum(1 for n in stored.values() if n > 1),
        stored=len(records),
    )
    return result


@contextmanager
def profiling_context(
    args: argparse.Namespace, pid: int, run_id: str, profile: dict[str, Any]
) -> Iterator[None]:
    """With ``--profile``: py-spy on the service and CPU of the three processes, into ``profile``."""
    if args.profile is None:
        yield
        return
    raw = Path(args.profile) / f"{run_id}-{uuid.uuid4().hex[:6]}.raw"
    broker = args.broker_pid
    before = (
        web_profile.cpu_seconds(pid),
        broker and web_profile.cpu_seconds(broker),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    producer_dir = web_profile.package_dir(run_id.split("-", 1)[0])
    folded = raw.with_suffix(".perf.raw")
    perf = (
        web_profile.perf_record(pid, folded, producer_dir)
        if args.perf
        else contextlib.nullcontext()
    )
    with web_profile.py_spy(pid, raw), perf:
        yield
        after = (
            web_profile.cpu_seconds(pid),
            broker and web_profile.cpu_seconds(broker),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    counts = web_profile.attribute(raw.read_text(), producer_dir)
    if args.perf:
        on_cpu = web_profile.attribute(folded.read_text(), producer_dir)
        profile.update(perf_samples=sum(on_cpu.values()), perf_shares=web_profile.shares(on_cpu))
    children = (after[2].ru_utime + after[2].ru_stime) - (before[2].ru_utime + before[2].ru_stime)
    profile.update(
        samples=sum(counts.values()),
        counts=dict(counts),
        shares=web_profile.shares(counts),
        cpu_s={
            "service": after[0] - before[0],
            "broker": None if broker is None else after[1] - before[1],
            "load": children,
        },
    )


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--role", choices=["run", "serve", "load"], default="run", help=argparse.SUPPRESS
    )
    parser.add_argument("--impls", default=",".join(IMPLS), help="comma list (default: both)")
    parser.add_argument(
        "--clients",
        type=_positive_ints,
        default=[1000],
        help="concurrent clients, a comma list runs each (1000)",
    )
    parser.add_argument("--requests", type=int, default=100_000, help="requests per run (100000)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds; each runs every implementation once, order alternating (3)",
    )
    parser.add_argument("--size", type=int, default=100, help="padding bytes per event (100)")
    parser.add_argument("--partitions", type=int, default=4)
    # The producer settings, the same for both implementations.
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none")
    parser.add_argument(
        "--idempotence",
        choices=["on", "off"],
        default="off",
        help="for both producers (off); aiokafka's InitProducerId fails on Tansu",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=5,
        help="aioproducer's Produce requests in flight per broker (5, Java's default); "
        "aiokafka sends one at a time",
    )
    add_broker_arguments(parser)
    parser.add_argument("--timeout", type=float, default=1800, help="bound on one load run (s)")
    parser.add_argument("--json", metavar="PATH", help="write every run and the summary here")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="py-spy the service, CPU and Produce requests per run (raw stacks in DIR)",
    )
    parser.add_argument(
        "--perf",
        action="store_true",
        help="with --profile: also sample the service with Linux perf, C and Python frames "
        "together (CPython 3.13+)",
    )
    parser.add_argument(
        "--malloc-as-is", action="store_true", help="leave glibc's malloc thresholds alone"
    )
    parser.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpu-profile", help=argparse.SUPPRESS)
    # Internal, for the child processes.
    parser.add_argument("--impl", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--ids-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.impl_list = [i for i in args.impls.split(",") if i]
    unknown = set(args.impl_list) - set(IMPLS)
    if unknown:
        parser.error(f"unknown implementation(s) {sorted(unknown)}; choose from {IMPLS}")
    if args.rounds < 1 or args.requests < 1:
        parser.error("--rounds and --requests must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role == "serve":
        asyncio.run(serve(args))
        return 0
    if args.role == "load":
        args.clients = args.clients[0]
        print(json.dumps(asyncio.run(load(args))), flush=True)
        return 0

    from tests.support.kafka_broker import KafkaJarsUnavailable

    if args.perf:
        if args.profile is None:
            print("--perf goes with --profile DIR", file=sys.stderr)
            return 2
        why = web_profile.perf_unavailable()
        if why:
            print(why, file=sys.stderr)
            return 2
    settings = ProducerSettings.from_args(args)
    order = schedule(args.impl_list, args.rounds)
    runs: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "producer": asdict(settings),
        "clients": args.clients,
        "requests": args.requests,
        "size": args.size,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "impls": args.impl_list,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "malloc": malloc_settings(args),
    }
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            broker_for(
                args.broker,
                args.bootstrap,
                announce=lambda m: print(m, file=sys.stderr, flush=True),
            ) as (bootstrap, broker),
        ):
            meta["broker"] = broker
            args.broker_pid = (
                web_profile.listener_pid(int(bootstrap.split(",")[0].rsplit(":", 1)[1]))
                if args.profile is not None
                else None
            )
            print(
                f"broker: {broker}\nproducers (both): {settings.describe()}\n"
                f"load: clients {','.join(map(str, args.clients))}, {args.requests} requests "
                f"per run, {args.size}-byte padding, {args.partitions} partitions, "
                f"{args.rounds} round(s), order alternating\n"
                f"malloc: {malloc_settings(args) or 'as is'} "
                f"for the service and the load generator",
                flush=True,
            )
            for clients in args.clients:
                for round_no, impl in order:
                    try:
                        run = run_once(
                            args, settings, impl, clients, round_no, bootstrap, Path(tmp)
                        )
                    except Exception as exc:  # noqa: BLE001 - report it, run the others
                        run = {
                            "impl": impl,
                            "clients": clients,
                            "round": round_no,
                            "status": "failed",
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                        print(
                            f"round {round_no} clients {clients} {impl}: FAILED: {exc}", flush=True
                        )
                    else:
                        print(run_line(run), flush=True)
                        if "profile" in run:
                            print("    " + web_profile.describe(run), flush=True)
                    runs.append(run)
    except KafkaJarsUnavailable as exc:
        print(
            f"cannot start Apache Kafka: {exc} (or pass --broker tansu / --bootstrap)",
            file=sys.stderr,
        )
        return 2
    summary = summarize(runs)
    print()
    print_summary(summary)
    if args.profile is not None:
        print_profile_summary(runs)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"meta": meta, "runs": runs, "summary": summary}, indent=2) + "\n"
        )
    return 1 if any(run_is_bad(r) for r in runs) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
