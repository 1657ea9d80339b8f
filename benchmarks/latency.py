"""Send->ack latency at a fixed rate: aioproducer, aiokafka and confluent-kafka, same run.

Usage (from the repository root)::

    python -m benchmarks.latency                  # 10,000 records/s for 30 s per client
    python -m benchmarks.latency --duration 5     # shorter
    python -m benchmarks.latency --loop uvloop --idempotence off
    python -m benchmarks.latency --broker tansu   # the embedded Tansu broker, not Apache Kafka

Each client runs in its own process against the same broker and sends 100 B
records on a fixed schedule (``--rate`` per second). A record's latency runs
from the moment it was due to the moment its delivery future resolved on the
event loop, so a client that falls behind the schedule pays for it (no
coordinated omission). The table shows p50/p99/p99.9/max, the rate the client
actually kept up and its CPU per record; the broker's record count is checked
afterwards with librdkafka. confluent-kafka appears twice: its asyncio
``AIOProducer`` (futures resolve when its next internal batch is handed to
librdkafka or its 1 s buffer timer fires) and the classic ``Producer`` bridged
to asyncio futures by a ``poll()`` thread. The table is also written to
``docs/latency.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.brokers import add_broker_arguments, broker_for
from benchmarks.clients._common import merge_histograms, percentiles
from benchmarks.matrix import Case, Variant
from benchmarks.report import display_name, failure_notes
from benchmarks.run import environment, measure

CLIENTS = ("aioproducer", "aiokafka", "confluent", "confluent_bridge")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rate", type=int, default=10_000, help="records per second (default 10000)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds per client (default 30)")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="split each client's duration into this many runs, interleaved with the "
        "other clients' (default 3)",
    )
    p.add_argument("--size", type=int, default=100, help="value size in bytes")
    p.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma list of {','.join(CLIENTS)}"
    )
    p.add_argument("--idempotence", choices=("on", "off", "both"), default="both")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    add_broker_arguments(p)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--no-verify", action="store_true", help="skip the broker record count check")
    p.add_argument(
        "--output",
        default=str(REPO_ROOT / "docs" / "latency.md"),
        help="Markdown table ('-': none)",
    )
    args = p.parse_args(argv)
    args.client_list = [c.strip() for c in args.clients.split(",") if c.strip()]
    if unknown := [c for c in args.client_list if c not in CLIENTS]:
        p.error(f"unknown clients: {', '.join(unknown)}")
    args.rounds = max(1, args.rounds)
    args.round_s = args.duration / args.rounds
    args.timeout = args.round_s * 3 + 90
    args.quick = False
    args.records = int(args.rate * args.round_s)
    args.repeat = args.rounds
    return args


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One client's rounds as one result: histograms added, the slowest rate kept."""
    first = runs[0]
    failed = next((r for r in runs if r["status"] != "ok"), None)
    if failed is not None:
        return {**first, "status": failed["status"], "error": failed.get("error", "")}
    hist = merge_histograms(r["latency_hist"] for r in runs)
    records = sum(r["records"] for r in runs)
    counted = [r for r in runs if "broker_count" in r]
    return {
        **first,
        "latency_ms": percentiles(hist),
        "achieved_rate": min(r["achieved_rate"] for r in runs),
        "cpu_us_per_record": sum(r["cpu_s"] for r in runs) * 1e6 / records,
        "rounds": len(runs),
        "counts_ok": sum(r["broker_count"] == r["expected_count"] for r in counted),
        "counted": len(counted),
    }


def _row(r: dict[str, Any]) -> list[str]:
    name = display_name(r["client"], "latency")
    idem = "on" if r["idempotence"] else "off"
    if r["status"] != "ok":
        return [
            name,
            idem,
            r["status"].upper(),
            "",
            "",
            "",
            "",
            "",
            r.get("error", "").replace("|", "/")[:100],
        ]
    lat = r["latency_ms"]
    count = ""
    if r.get("counted"):
        count = f"{r['counts_ok']}/{r['counted']} ok" + (
            "" if r["counts_ok"] == r["counted"] else " MISMATCH"
        )
    return [
        name,
        idem,
        f"{lat['p50']:.1f}",
        f"{lat['p99']:.1f}",
        f"{lat['p99_9']:.1f}",
        f"{lat['max']:.1f}",
        f"{r['achieved_rate']:,.0f}",
        f"{r['cpu_us_per_record']:.1f}",
        count,
    ]


HEADERS = [
    "client",
    "idempotence",
    "p50 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "sent/s",
    "CPU µs/record",
    "broker count",
]


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any]) -> str:
    lines = [
        "# Send->ack latency at a fixed rate",
        "",
        (
            f"Generated by `python -m benchmarks.latency` on {meta['date']}: {args.rate:,} records/s "
            f"of {args.size} B for {args.duration:g} s per client in {args.rounds} runs of "
            f"{args.round_s:g} s interleaved with the other clients', each run in its own process, "
            f"{args.loop} loop, `acks=all`, linger {args.linger_ms} ms, {args.partitions} partitions, "
            f"{meta['broker']} on the same host ({meta['cpus']} CPUs, load average "
            f"{meta['load_before']:.1f} before, {meta['load_after']:.1f} after)."
        ),
        "",
        (
            "Latency runs from the moment a record was due on the schedule to the moment its future "
            "resolved on the event loop (no coordinated omission); percentiles are over all of a "
            "client's runs. `sent/s` is the lowest rate the client kept up in a run. confluent-kafka AIOProducer resolves futures when its next internal batch of "
            "1,000 records goes to librdkafka or its 1 s buffer timer fires; the callback bridge is "
            "the classic Producer with a `poll()` thread resolving asyncio futures."
        ),
        "",
        *(f"{n}\n" for n in failure_notes(rows)),
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
    ]
    lines += ["| " + " | ".join(_row(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    meta = environment(args)
    idems = {"on": [True], "off": [False], "both": [True, False]}[args.idempotence]
    extra = ["--rate", str(args.rate), "--duration", str(args.round_s)]
    runs: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    with broker_for(args.broker, args.bootstrap) as (bootstrap, broker):
        meta["broker"] = broker
        for idem in idems:
            for rnd in range(args.rounds):
                for client in args.client_list:
                    done = runs.setdefault((client, idem), [])
                    if done and done[-1]["status"] != "ok":
                        continue  # failed once: not repeated
                    case = Case(
                        "latency", client, Variant(args.size, idem, args.loop), args.records
                    )
                    print(
                        f"[{time.strftime('%H:%M:%S')}] {rnd + 1}/{args.rounds} "
                        f"{display_name(client, 'latency')}, idempotence "
                        f"{'on' if idem else 'off'}",
                        flush=True,
                    )
                    row = measure(args, bootstrap, case, extra)
                    done.append(row)
                    print("    " + " | ".join(_row(combine([row]))[2:]), flush=True)
    rows = [combine(r) for r in runs.values()]
    meta["load_after"] = os.getloadavg()[0]
    text = markdown(rows, args, meta)
    print()
    print(text)
    if args.output != "-":
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    failed = [r for r in rows if r["client"] == "aioproducer" and r["status"] != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
