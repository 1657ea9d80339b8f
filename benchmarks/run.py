"""Throughput benchmark: every client in the same patterns, each in its own process.

Usage (from the repository root)::

    python -m benchmarks.run --quick              # 20k records, one run per case (~2-3 min)
    python -m benchmarks.run                      # the full matrix: 200k records, 3 repeats
    python -m benchmarks.run --patterns a,c --clients aioproducer,aiokafka --loop uvloop
    python -m benchmarks.run --broker tansu      # the embedded Tansu broker instead of Kafka
    python -m benchmarks.run --bootstrap 127.0.0.1:9092

Patterns and the default matrix are described in :mod:`benchmarks.matrix`.
The broker is a local Apache Kafka (one KRaft broker, see :mod:`benchmarks.brokers`)
unless ``--broker tansu`` or ``--bootstrap`` says otherwise. Every run gets a fresh topic; afterwards the broker's record count is checked
with librdkafka (an independent reader) and the topic is deleted. Repeats are
interleaved (every case once, then every case again) so that a burst of load
on a shared machine spreads over all clients instead of hitting one. The
results go to ``docs/benchmarks.md`` (tables), ``docs/benchmarks.png`` (chart)
and ``docs/benchmarks.json`` (raw runs; ``python -m benchmarks.report`` redraws
the first two from it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # allow ``python benchmarks/run.py`` too
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import matrix, report
from benchmarks.brokers import add_broker_arguments, broker_for
from benchmarks.clients._common import COMPRESSIONS, WARMUP_RECORDS
from tests.support.kafka_broker import KafkaJarsUnavailable
from tests.support.verify import count_records, create_topic, delete_topic

DOCS = REPO_ROOT / "docs"


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--quick", action="store_true", help="20,000 records and one run per case (a smoke run)"
    )
    p.add_argument("--records", type=int, help="records per run (default 200000, quick 20000)")
    p.add_argument("--repeat", type=int, help="runs per case (default 3, quick 1)")
    p.add_argument("--patterns", default="a,b,c,d", help="comma list of a,b,c,d")
    p.add_argument(
        "--clients",
        default=",".join(matrix.CLIENTS),
        help=f"comma list of {','.join(matrix.CLIENTS)}",
    )
    p.add_argument(
        "--sizes", help="comma list of value sizes in bytes (replaces the default matrix)"
    )
    p.add_argument(
        "--idempotence", choices=("on", "off", "both"), help="replaces the default matrix"
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop", "both"),
        help="event loop of the asyncio clients (replaces the default matrix)",
    )
    add_broker_arguments(p)
    p.add_argument("--partitions", type=int, default=4, help="partitions per fresh topic")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument(
        "--batch-size",
        type=int,
        default=16384,
        help="producer batch size in bytes for every client (default 16384)",
    )
    p.add_argument(
        "--compression",
        choices=COMPRESSIONS,
        default="none",
        help="compression codec of every client (default none)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds per client process (default 60 + 1 s per 2,000 records)",
    )
    p.add_argument("--no-verify", action="store_true", help="skip the broker record count check")
    p.add_argument(
        "--output",
        default=str(DOCS / "benchmarks.md"),
        help="Markdown report; the chart and raw JSON go beside it ('-': none)",
    )
    args = p.parse_args(argv)
    args.records = args.records or (20_000 if args.quick else 200_000)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.timeout = args.timeout or 60 + args.records / 2000
    args.client_list = tuple(_csv(args.clients))
    args.pattern_list = "".join(_csv(args.patterns))
    if unknown := [c for c in args.client_list if c not in matrix.CLIENTS]:
        p.error(f"unknown clients: {', '.join(unknown)}")
    if unknown := [x for x in args.pattern_list if x not in matrix.PATTERNS]:
        p.error(f"unknown patterns: {', '.join(unknown)}")
    return args


def plan(args: argparse.Namespace) -> list[matrix.Case]:
    if args.sizes is None and args.idempotence is None and args.loop is None:
        return matrix.default_matrix(args.records, args.client_list, args.pattern_list)
    idem = args.idempotence or "on"
    loop = args.loop or "asyncio"
    return matrix.custom_matrix(
        args.records,
        args.client_list,
        args.pattern_list,
        sizes=[int(s) for s in _csv(args.sizes or "100")],
        idems=[True, False] if idem == "both" else [idem == "on"],
        loops=["asyncio", "uvloop"] if loop == "both" else [loop],
    )


def run_client(
    args: argparse.Namespace, bootstrap: str, case: matrix.Case, topic: str, extra: list[str]
) -> dict[str, Any]:
    """Run one client process; its JSON result line, or a failure naming what went wrong."""
    v = case.variant
    cmd = [
        sys.executable,
        "-m",
        f"benchmarks.clients.{case.client}",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--pattern",
        case.pattern,
        "--records",
        str(case.records),
        "--size",
        str(v.size),
        "--linger-ms",
        str(args.linger_ms),
        "--batch-size",
        str(args.batch_size),
        "--idempotence",
        "on" if v.idempotence else "off",
        "--loop",
        "asyncio" if v.loop == "-" else v.loop,
        "--partitions",
        str(args.partitions),
        "--compression",
        getattr(args, "compression", "none"),
        *extra,
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=args.timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "error": f"timed out after {args.timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "status" in result:
            if result["status"] == "failed" and proc.stderr.strip():
                result["stderr_tail"] = proc.stderr.strip()[-2000:]
            return result
    return {
        "status": "failed",
        "error": f"exit code {proc.returncode}, no result line",
        "stderr_tail": (proc.stderr or proc.stdout).strip()[-2000:],
    }


def measure(
    args: argparse.Namespace, bootstrap: str, case: matrix.Case, extra: list[str] | None = None
) -> dict[str, Any]:
    """One run of ``case`` on a fresh topic, with the broker-side count check.

    ``args`` needs ``timeout``, ``linger_ms``, ``batch_size``, ``partitions`` and
    ``no_verify``; ``extra`` are more arguments for the client process.
    """
    v = case.variant
    topic = f"bench-{case.pattern}-{case.client}-{uuid.uuid4().hex[:8]}"
    row: dict[str, Any] = {**asdict(case), **asdict(v), "topic": topic}
    del row["variant"]
    try:
        create_topic(bootstrap, topic, args.partitions)
    except Exception as exc:  # noqa: BLE001 - report, go on with the next case
        return {**row, "status": "failed", "error": f"topic creation: {type(exc).__name__}: {exc}"}
    try:
        result = run_client(args, bootstrap, case, topic, extra or [])
        row.update({k: val for k, val in result.items() if k not in ("loop", "client", "pattern")})
        if row["status"] == "ok" and not args.no_verify:
            # A client may warm up with more records (the JVM's JIT needs thousands).
            expected = case.records + int(result.get("warmup_records", WARMUP_RECORDS))
            try:
                got = count_records(
                    bootstrap, topic, expected, timeout=max(30.0, case.records / 5000), grace=0.3
                )
            except Exception as exc:  # noqa: BLE001 - a failed check is reported
                row["count_error"] = f"{type(exc).__name__}: {exc}"
                got = -1
            row["broker_count"], row["expected_count"] = got, expected
    finally:
        delete_topic(bootstrap, topic)
    return row


def _progress(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status']}: {row.get('error', '')}"
    msg = f"{row['records_per_s']:,.0f} rec/s, {row['cpu_us_per_record']:.2f} µs CPU/rec"
    if "broker_count" in row:
        ok = row["broker_count"] == row["expected_count"]
        msg += f", broker holds {row['broker_count']:,}" + ("" if ok else " MISMATCH")
    return msg


def environment(args: argparse.Namespace) -> dict[str, Any]:
    """What a reader needs to judge the numbers: host, versions, settings."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for dist in ("aiokafka", "confluent-kafka", "kafka-python", "uvloop"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = "not installed"
    try:
        import confluent_kafka

        versions["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    if "java" in args.client_list:
        versions.update(_java_versions())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = [
            ln.split(":", 1)[1].strip()
            for ln in cpuinfo.read_text().splitlines()
            if ln.startswith("model name")
        ]
        cpu = models[0] if models else cpu
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "mode": "quick" if args.quick else "full",
        "records": args.records,
        "repeat": args.repeat,
        "linger_ms": args.linger_ms,
        "batch_size": args.batch_size,
        "partitions": args.partitions,
        "compression": getattr(args, "compression", "none"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "aioproducer_commit": commit or "unknown",
        "versions": versions,
        "load_before": os.getloadavg()[0],
    }


def _java_versions() -> dict[str, str]:
    """The JVM's version and the kafka-clients jar the Java peer runs with."""
    from tests.support.kafka_broker import KafkaJarsUnavailable, find_kafka_libs

    try:
        jars = sorted(find_kafka_libs().glob("kafka-clients-*.jar"))
    except KafkaJarsUnavailable:
        return {"kafka-clients (Java)": "not fetched"}
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    first = (out.stderr or out.stdout).strip().splitlines()
    return {
        "kafka-clients (Java)": jars[-1].stem.removeprefix("kafka-clients-") if jars else "?",
        "java": first[0] if first else "?",
    }


# Untimed runs before the first measured one: a broker fresh from start-up runs
# its produce path in the JVM's interpreter, and its first runs took up to twice
# the CPU per record of later ones, penalising whichever client came first.
WARM_UP = (
    matrix.Case("d", "confluent", matrix.Variant(1024, False, "-"), 300_000),
    matrix.Case("d", "confluent", matrix.Variant(100, False, "-"), 300_000),
)


def warm_up(args: argparse.Namespace, bootstrap: str) -> bool:
    """Run :data:`WARM_UP` (librdkafka, so no client under test warms itself); results dropped.

    True when every warm-up run went through.
    """
    ok = True
    for case in WARM_UP:
        row = measure(args, bootstrap, case)
        print(
            f"[{time.strftime('%H:%M:%S')}] broker warm-up ({case.variant.label}): "
            + _progress(row),
            flush=True,
        )
        ok = ok and row["status"] == "ok"
    return ok


def measure_floor(records: int) -> dict[str, float] | None:
    """One run of ``benchmarks.asyncio_floor`` (patterns a and b) in its own
    process: CPU µs per record by pattern, or None if it failed."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.asyncio_floor",
        "--records",
        str(records),
        "--runs",
        "1",
        "--json",
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        return {name: float(runs[0]) for name, runs in result.items()}
    except Exception:  # noqa: BLE001 - any failure of the floor leaves the clients' runs intact
        return None


def run_all(
    args: argparse.Namespace,
    bootstrap: str,
    cases: list[matrix.Case],
    rows: list[dict[str, Any]],
    floors: list[dict[str, float]] | None = None,
) -> None:
    """Every case ``args.repeat`` times, interleaved; appends each run's row to ``rows``.

    With ``floors``, when patterns a or b are planned, each repeat starts with
    a run of the asyncio floor, appended there: the floor is then measured
    under the same conditions as the clients it bounds.
    """
    settled: set[matrix.Case] = set()  # failed or skipped once: not repeated
    floor_records = max((c.records for c in cases if c.pattern in ("a", "b")), default=0)
    for rep in range(args.repeat):
        if floors is not None and floor_records:
            floor = measure_floor(floor_records)
            print(
                f"[{time.strftime('%H:%M:%S')}] {rep + 1}/{args.repeat} asyncio floor: "
                + (
                    ", ".join(f"{k} {v:.2f} us/rec" for k, v in floor.items())
                    if floor
                    else "failed"
                ),
                flush=True,
            )
            if floor:
                floors.append(floor)
        for case in cases:
            if case in settled:
                continue
            print(
                f"[{time.strftime('%H:%M:%S')}] {rep + 1}/{args.repeat} {case.pattern} "
                f"{case.client} ({case.variant.label})",
                flush=True,
            )
            row = measure(args, bootstrap, case)
            row["repeat"] = rep
            rows.append(row)
            print("    " + _progress(row), flush=True)
            if row["status"] != "ok":
                settled.add(case)
                for ln in (row.get("stderr_tail") or "").splitlines()[-6:]:
                    print("    | " + ln, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = plan(args)
    meta = environment(args)
    print(
        f"{len(cases)} cases x {args.repeat} repeat(s), {args.records:,} records each", flush=True
    )
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        with broker_for(
            args.broker, args.bootstrap, announce=lambda msg: print(msg, flush=True)
        ) as (bootstrap, broker):
            meta["broker"] = broker
            if not args.bootstrap and args.broker == "kafka":
                meta["warmed_up"] = warm_up(args, bootstrap)
            floors: list[dict[str, float]] = []
            meta["asyncio_floor"] = floors
            run_all(args, bootstrap, cases, rows, floors)
    except KeyboardInterrupt:
        print("interrupted: reporting the runs done so far", flush=True)
        meta["interrupted"] = True
    except KafkaJarsUnavailable as exc:
        print(
            f"cannot start Apache Kafka: {exc} (or pass --broker tansu / --bootstrap)",
            file=sys.stderr,
        )
        return 2
    meta["elapsed_s"] = time.monotonic() - started
    meta["load_after"] = os.getloadavg()[0]
    summary = report.summarize(rows)
    print()
    print(report.text_tables(summary))
    if args.output != "-":
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(
            json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n"
        )
        chart = out.with_suffix(".png")
        chart_note = report.write_chart(summary, chart)
        out.write_text(
            report.markdown(
                summary,
                meta,
                chart.name if chart_note is None else None,
                report.failure_notes(rows),
            )
        )
        print(
            f"wrote {out}, {out.with_suffix('.json')}"
            + (f", {chart}" if chart_note is None else f" (no chart: {chart_note})")
        )
    # Non-zero when aioproducer failed or any broker count disagreed; a peer's
    # failure is a row in the table, not a failed benchmark.
    bad = [
        r
        for r in rows
        if (r["status"] == "failed" and r["client"] == "aioproducer")
        or r.get("broker_count", r.get("expected_count")) != r.get("expected_count")
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
