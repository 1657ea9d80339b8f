"""Benchmark orchestrator: every client in its own process, one fresh topic per run.

Usage (from the repository root)::

    python -m benchmarks.run                      # all clients, 200k x 100 B records
    python -m benchmarks.run --records 20000 --clients aiokafka,confluent
    python -m benchmarks.run --bootstrap 127.0.0.1:9092 --idempotence on

Each client process reports wall time and CPU (user+sys of the whole process)
from its first send until every record is acknowledged; this script prints a
table with throughput and CPU per record relative to aiokafka, and checks that
the broker holds exactly the expected number of records for every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # allow ``python benchmarks/run.py`` too
    sys.path.insert(0, str(REPO_ROOT))

from aioproducer.testing.local_broker import LocalBroker
from tests.support.verify import count_records, create_topic

ALL_CLIENTS = ("aiokafka", "confluent", "kafka_python", "aioproducer_enqueue", "aioproducer_send")
# Clients whose idempotence setting is swept by --idempotence; the others run with it off.
AIOPRODUCER_CLIENTS = {"aioproducer_enqueue", "aioproducer_send"}
BASELINE = "aiokafka"


@dataclass
class Run:
    client: str
    idempotence: bool
    status: str = "failed"
    error: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    count_notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.client in AIOPRODUCER_CLIENTS:
            return f"{self.client} (idem {'on' if self.idempotence else 'off'})"
        return self.client

    def median(self, key: str) -> float | None:
        values = [r[key] for r in self.results if r.get("status") == "ok"]
        return statistics.median(values) if values else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--records", type=int, default=200_000, help="records per run (default 200000)")
    p.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    p.add_argument("--clients", default=",".join(ALL_CLIENTS),
                   help=f"comma-separated subset of: {','.join(ALL_CLIENTS)}")
    p.add_argument("--idempotence", choices=("on", "off", "both"), default="both",
                   help="for the aioproducer clients (default both); other clients run with it off")
    p.add_argument("--bootstrap", help="use this broker instead of spawning a local Tansu")
    p.add_argument("--partitions", type=int, default=4,
                   help="partitions per fresh topic (default 4)")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16384,
                   help="producer batch size in bytes for every client (default 16384)")
    p.add_argument("--concurrency", type=int, default=1000, help="tasks for aioproducer_send")
    p.add_argument("--repeat", type=int, default=1, help="runs per client; the table shows medians")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per client process")
    p.add_argument("--no-verify", action="store_true", help="skip the broker record count check")
    p.add_argument("--json", metavar="PATH", help="also write all raw results to PATH")
    args = p.parse_args(argv)
    args.client_list = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in args.client_list if c not in ALL_CLIENTS]
    if unknown:
        p.error(f"unknown clients: {', '.join(unknown)}")
    return args


def plan(args: argparse.Namespace) -> list[Run]:
    idem = {"on": [True], "off": [False], "both": [False, True]}[args.idempotence]
    runs: list[Run] = []
    # Baseline first so its numbers exist even if a later client hangs.
    for client in sorted(args.client_list, key=lambda c: c != BASELINE):
        for flag in idem if client in AIOPRODUCER_CLIENTS else [False]:
            runs.append(Run(client, flag))
    return runs


def run_client(args: argparse.Namespace, bootstrap: str, run: Run, topic: str) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", f"benchmarks.clients.{run.client}",
        "--bootstrap", bootstrap,
        "--topic", topic,
        "--records", str(args.records),
        "--size", str(args.size),
        "--linger-ms", str(args.linger_ms),
        "--batch-size", str(args.batch_size),
        "--idempotence", "on" if run.idempotence else "off",
        "--concurrency", str(args.concurrency),
    ]
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "error": f"timed out after {args.timeout:.0f}s"}
    for line in reversed(proc.stdout.splitlines()):
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "status" in result:
            if result["status"] == "failed" and proc.stderr.strip():
                result["stderr_tail"] = proc.stderr.strip()[-2000:]
            return result
    tail = (proc.stderr or proc.stdout).strip()[-2000:]
    return {"status": "failed", "error": f"exit code {proc.returncode}, no result line",
            "stderr_tail": tail}


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(runs: list[Run], args: argparse.Namespace) -> None:
    base = next((r for r in runs if r.client == BASELINE and r.results), None)
    base_rps = base.median("records_per_s") if base else None
    base_cpu = base.median("cpu_us_per_record") if base else None
    headers = ["client", "records/s", "CPU µs/rec", "rate vs aiokafka", "CPU vs aiokafka",
               "wall s", "broker count"]
    rows: list[list[str]] = []
    for r in runs:
        rps = r.median("records_per_s")
        cpu = r.median("cpu_us_per_record")
        if r.status != "ok":
            rows.append([r.label, r.status.upper(), "", "", "", "", (r.error or "")[:70]])
            continue
        rows.append([
            r.label,
            fmt(rps, ",.0f"),
            fmt(cpu, ".2f"),
            fmt(rps / base_rps, ".2f") + "x" if rps and base_rps else "n/a",
            fmt(cpu / base_cpu, ".2f") + "x" if cpu and base_cpu else "n/a",
            fmt(r.median("wall_s"), ".2f"),
            "; ".join(r.count_notes) or "-",
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()
    print()
    print(f"{args.records:,} records x {args.size} B, linger {args.linger_ms} ms, acks=all, "
          f"{args.partitions} partitions, median of {args.repeat} run(s)")
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print("CPU = user+sys of the whole client process (all threads) over the measured span.")
    print("Ratios: rate >1x is faster than aiokafka; CPU <1x is cheaper than aiokafka.")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    broker: LocalBroker | None = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = LocalBroker().start()
        bootstrap = broker.bootstrap_servers
        print(f"started Tansu at {bootstrap} (pid {broker.pid}, log {broker.log_path})")
    runs = plan(args)
    all_results: list[dict[str, Any]] = []
    try:
        for run in runs:
            for i in range(args.repeat):
                mode = "idem" if run.idempotence else "plain"
                topic = f"bench-{run.client}-{mode}-{uuid.uuid4().hex[:8]}"
                try:
                    create_topic(bootstrap, topic, args.partitions)
                except Exception as exc:  # noqa: BLE001 - report, go on with the next client
                    run.status, run.error = "failed", f"topic creation: {type(exc).__name__}: {exc}"
                    break
                print(f"[{time.strftime('%H:%M:%S')}] {run.label} run {i + 1}/{args.repeat} "
                      f"-> {topic}", flush=True)
                result = run_client(args, bootstrap, run, topic)
                result.setdefault("client", run.client)
                all_results.append(result)
                if result["status"] != "ok":
                    run.status, run.error = result["status"], result.get("error", "")
                    print(f"    {result['status']}: {run.error}", flush=True)
                    if result.get("stderr_tail"):
                        tail = result["stderr_tail"].splitlines()[-12:]
                        print("\n".join("    | " + ln for ln in tail), flush=True)
                    break
                run.status = "ok"
                run.results.append(result)
                msg = (f"    {result['records_per_s']:,.0f} rec/s, "
                       f"{result['cpu_us_per_record']:.2f} µs CPU/rec")
                if not args.no_verify:
                    expected = args.records + int(result.get("warmup_records", 0))
                    try:
                        got = count_records(bootstrap, topic, expected,
                                            timeout=max(30.0, args.records / 5000))
                    except Exception as exc:  # noqa: BLE001 - a failed check is reported
                        note = f"count failed ({type(exc).__name__}: {exc}) MISMATCH"
                    else:
                        result["broker_count"] = got
                        note = (f"{got:,} ok" if got == expected
                                else f"{got:,} != {expected:,} MISMATCH")
                    if note not in run.count_notes:
                        run.count_notes.append(note)
                    msg += f", broker holds {note}"
                print(msg, flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print_table(runs, args)
    if args.json:
        Path(args.json).write_text(json.dumps(all_results, indent=2) + "\n")
    mismatch = any("MISMATCH" in n for r in runs for n in r.count_notes)
    failed = any(r.status == "failed" for r in runs)
    return 1 if (mismatch or failed) else 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
