"""Tables and a chart from the throughput benchmark's raw runs.

``python -m benchmarks.report [docs/benchmarks.json]`` redraws
``docs/benchmarks.md`` and ``docs/benchmarks.png`` from the raw results that
``benchmarks.run`` saved, without running anything.

Every figure is the median over the repeats with the spread (min-max) beside
it; ratios compare medians of the same pattern and setting, measured in the
same run, against aiokafka and against librdkafka (confluent-kafka).
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.matrix import (
    BASELINE_AIOKAFKA,
    BASELINE_LIBRDKAFKA,
    CLIENT_APIS,
    CLIENTS,
    PATTERNS,
    Variant,
)

NAMES = {
    "aioproducer": "aioproducer",
    "aiokafka": "aiokafka",
    "confluent": "confluent-kafka",
    "confluent_bridge": "confluent-kafka, callback bridge",
    "kafka_python": "kafka-python",
    "java": "Java KafkaProducer",
}


# Short tick labels for the chart: (client, pattern), "" for any pattern.
CHART_NAMES = {
    ("confluent", ""): "confluent-kafka",
    ("confluent", "c"): "AIOProducer",
    ("confluent_bridge", ""): "librdkafka\nbridge",
    ("kafka_python", ""): "kafka-python",
    ("java", ""): "Java",
}


def display_name(client: str, pattern: str) -> str:
    if client == "confluent" and pattern in ("c", "latency"):
        return "confluent-kafka AIOProducer"
    return NAMES.get(client, client)


@dataclass
class Summary:
    """All runs of one client in one pattern and setting."""

    pattern: str
    client: str
    variant: Variant
    records: int
    status: str = "ok"
    error: str = ""
    rates: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    counted: int = 0

    @property
    def rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    @property
    def cpu(self) -> float | None:
        return statistics.median(self.cpus) if self.cpus else None


def summarize(rows: list[dict[str, Any]]) -> list[Summary]:
    """Group raw runs by (pattern, client, setting), in first-seen order."""
    out: dict[tuple[Any, ...], Summary] = {}
    for r in rows:
        v = Variant(r["size"], r["idempotence"], r["loop"])
        s = out.setdefault(
            (r["pattern"], r["client"], v), Summary(r["pattern"], r["client"], v, r["records"])
        )
        if r["status"] != "ok":
            s.status, s.error = r["status"], r.get("error", "")
            continue
        s.rates.append(r["records_per_s"])
        s.cpus.append(r["cpu_us_per_record"])
        if "broker_count" in r:
            s.counted += 1
            if r["broker_count"] != r["expected_count"]:
                s.mismatches.append(
                    f"{r['broker_count']:,} != {r['expected_count']:,}"
                    + (f" ({r['count_error']})" if r.get("count_error") else "")
                )
    return list(out.values())


def floor_note(summaries: list[Summary], meta: dict[str, Any]) -> str | None:
    """The asyncio floor measured in this run and aioproducer's distance above it
    in pattern a (100 B, asyncio loop), as a line for the page; None without a floor."""
    floors = meta.get("asyncio_floor") or []
    if not floors:
        return None

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} µs ({min(values):.2f}-{max(values):.2f})"

    parts = [
        f"pattern {p} {spread([f[p] for f in floors])}"
        for p in ("a", "b")
        if all(p in f for f in floors)
    ]
    if not parts:
        return None
    a_runs = [f["a"] for f in floors if "a" in f]
    floor_a = statistics.median(a_runs) if a_runs else None
    above = [
        f"idempotence {'on' if s.variant.idempotence else 'off'} "
        f"{statistics.median(s.cpus):.2f} µs, {statistics.median(s.cpus) - floor_a:+.2f} µs"
        for s in summaries
        if floor_a is not None
        and s.pattern == "a"
        and s.client == "aioproducer"
        and s.cpus
        and s.variant.size == 100
        and s.variant.loop == "asyncio"
    ]
    note = (
        f"asyncio floor (`benchmarks.asyncio_floor`, one run at the start of each repeat, "
        f"CPU per record, median and min-max of {len(floors)}): " + "; ".join(parts) + "."
    )
    if above:
        note += (
            " aioproducer in pattern a (100 B): " + "; ".join(above) + " from the floor's median."
        )
    return note


def baseline(summaries: list[Summary], s: Summary, client: str) -> tuple[Summary | None, bool]:
    """The ``client`` row to compare ``s`` with, and whether its setting matches exactly.

    Falls back to idempotence off (aiokafka's idempotent producer may not start
    against a given broker) and to the asyncio loop (or no loop, for a client
    that runs without one).
    """
    v = s.variant
    loops = [v.loop, "-", "asyncio"]
    candidates = [Variant(v.size, v.idempotence, lp) for lp in loops]
    candidates += [Variant(v.size, False, lp) for lp in loops]
    for i, want in enumerate(candidates):
        for other in summaries:
            if (
                other.pattern == s.pattern
                and other.client == client
                and other.variant == want
                and other.rate is not None
            ):
                exact = want.idempotence == v.idempotence and (
                    want.loop == v.loop or "-" in (want.loop, v.loop) or i == 0
                )
                return other, exact
    return None, False


def failure_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Explanations for failures whose cause is known (not guessed from the message alone)."""
    notes = []
    if any(
        r["client"] == "aiokafka"
        and r["status"] == "failed"
        and r["idempotence"]
        and "UnknownError" in r.get("error", "")
        for r in rows
    ):
        notes.append(
            "aiokafka's idempotent producer starts with InitProducerId v0, the only version it "
            "sends; this broker answers it with UNKNOWN_SERVER_ERROR (-1), so aiokafka's "
            "idempotence-on rows fail and only its idempotence-off rows are measured."
        )
    return notes


def _spread(values: list[float], spec: str) -> str:
    med = format(statistics.median(values), spec)
    if len(values) < 2:
        return med
    return f"{med} ({format(min(values), spec)}–{format(max(values), spec)})"


def _ratio(num: float | None, base: Summary | None, exact: bool, attr: str) -> str:
    den = getattr(base, attr) if base is not None else None
    if num is None or not den:
        return "–"
    return f"{num / den:.2f}x" + ("" if exact else "*")


def _count_cell(s: Summary) -> str:
    if s.mismatches:
        return "MISMATCH " + "; ".join(s.mismatches)
    return f"{s.counted}/{len(s.rates)} ok" if s.counted else "not checked"


def _table_rows(summaries: list[Summary], pattern: str) -> list[list[str]]:
    order = {c: i for i, c in enumerate(CLIENTS)}
    # A client without an event loop ("-") shares the asyncio rows' heading.
    variants = sorted(
        {s.variant.label: s.variant for s in summaries if s.pattern == pattern}.values(),
        key=lambda v: (v.loop not in ("asyncio", "-"), v.size, not v.idempotence),
    )
    rows: list[list[str]] = []
    for v in variants:
        group = sorted(
            (s for s in summaries if s.pattern == pattern and s.variant.label == v.label),
            key=lambda s: order.get(s.client, 99),
        )
        for s in group:
            name = display_name(s.client, pattern)
            if s.records != max(x.records for x in summaries):
                name += f" ({s.records:,} records)"
            if s.status != "ok":
                rows.append(
                    [
                        v.label,
                        name,
                        s.status.upper(),
                        "",
                        "",
                        "",
                        "",
                        "",
                        s.error.replace("|", "/")[:120],
                    ]
                )
                continue
            ak, ak_exact = baseline(summaries, s, BASELINE_AIOKAFKA)
            rd, rd_exact = baseline(summaries, s, BASELINE_LIBRDKAFKA)
            rows.append(
                [
                    v.label,
                    name,
                    _spread(s.rates, ",.0f"),
                    _spread(s.cpus, ".2f"),
                    _ratio(s.rate, ak, ak_exact, "rate"),
                    _ratio(s.cpu, ak, ak_exact, "cpu"),
                    _ratio(s.rate, rd, rd_exact, "rate"),
                    _ratio(s.cpu, rd, rd_exact, "cpu"),
                    _count_cell(s),
                ]
            )
    return rows


HEADERS = [
    "setting",
    "client",
    "records/s",
    "CPU µs/record",
    "rate ÷ aiokafka",
    "CPU ÷ aiokafka",
    "rate ÷ librdkafka",
    "CPU ÷ librdkafka",
    "broker count",
]


def text_tables(summaries: list[Summary]) -> str:
    """Plain-text tables for the terminal."""
    out: list[str] = []
    for pattern, title in PATTERNS.items():
        rows = _table_rows(summaries, pattern)
        if not rows:
            continue
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]
        out.append(f"({pattern}) {title}")
        out.append("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths)).rstrip())
        out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
        out.append("")
    return "\n".join(out)


def markdown(
    summaries: list[Summary], meta: dict[str, Any], chart: str | None, notes: list[str]
) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    mode = meta.get("mode", "full")
    lines = [
        "# Benchmarks",
        "",
        (
            f"Generated by `python -m benchmarks.run{' --quick' if mode == 'quick' else ''}` on "
            f"{meta.get('date', '?')} ({mode} mode: {meta.get('records', 0):,} records per run, "
            f"median of {meta.get('repeat', 1)} run(s), spread min–max in brackets). "
            "Regenerate with `python -m benchmarks.run`; `python -m benchmarks.report` redraws this "
            "page and the chart from `docs/benchmarks.json`."
        ),
        "",
        (
            f"- Host: {meta.get('cpus', '?')} CPUs ({meta.get('cpu', '?')}), Python "
            f"{meta.get('python', '?')}; broker: {meta.get('broker', '?')} on the same host"
            f"{', warmed up by untimed runs first' if meta.get('warmed_up') else ''}. "
            f"Load average {meta.get('load_before', 0):.1f} before and "
            f"{meta.get('load_after', 0):.1f} after the run, which took "
            f"{meta.get('elapsed_s', 0) / 60:.1f} min."
        ),
        f"- aioproducer at commit {meta.get('aioproducer_commit', '?')}; {versions}.",
        (
            f"- Every client: `acks=all`, linger {meta.get('linger_ms', 5)} ms, batch size "
            f"{meta.get('batch_size', 16384):,} B, compression {meta.get('compression', 'none')}, "
            "no keys, random values, a fresh "
            f"topic of {meta.get('partitions', 4)} partitions per run; each run in its own process."
        ),
        (
            "- Measured span: from the first record to the last acknowledgement, after one warm-up "
            "record. CPU = user + system time of the whole client process (all threads, so "
            "librdkafka's and kafka-python's I/O threads count; for Java the whole JVM, garbage "
            "collector and JIT compiler included, read from /proc at the span's edges)."
        ),
        (
            "- After each run librdkafka reads the topic back from offset 0 and counts the records "
            "(`broker count`: runs whose count matched / runs)."
        ),
        (
            "- Ratios compare medians of the same pattern and setting: rate above 1x is faster, CPU "
            "below 1x is cheaper. `*`: the baseline row is the nearest one measured (idempotence off, "
            "or the asyncio loop), because the exact one is missing or failed."
        ),
        (
            "- The default matrix: 100 B values with idempotence on and off in every pattern; 1 KiB "
            "values only in patterns a and d (without kafka-python); uvloop only in patterns a, c "
            "and d (for the clients whose speed depends on the loop), to fit a full run in about 15 "
            "minutes on two cores."
        ),
        *(f"- {n}" for n in notes),
        *([f"- {n}"] if (n := floor_note(summaries, meta)) else []),
        (
            "- Send->ack latency at a fixed rate: [latency.md](latency.md) "
            "(`python -m benchmarks.latency`)."
        ),
        "",
        (
            "The broker shares the CPUs with the clients, so absolute numbers depend on the host; "
            "compare ratios within one run."
        ),
        "",
    ]
    if chart:
        lines += [f"![records/s and CPU per record, 100 B values]({chart})", ""]
    for pattern, title in PATTERNS.items():
        rows = _table_rows(summaries, pattern)
        if not rows:
            continue
        lines += [f"## ({pattern}) {title[0].upper()}{title[1:]}", ""]
        for client in CLIENTS:
            api = CLIENT_APIS[client].get(pattern)
            if api and any(s.client == client and s.pattern == pattern for s in summaries):
                lines.append(f"- {display_name(client, pattern)}: {api}")
        lines += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def write_chart(summaries: list[Summary], path: Path) -> str | None:
    """Bar chart of records/s and CPU per record, 100 B values; None, or why there is none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        return "matplotlib is not installed (the 'bench' extra)"
    shown = [s for s in summaries if s.variant.size == 100 and s.rate is not None]
    patterns = [p for p in PATTERNS if any(s.pattern == p for s in shown)]
    if not patterns:
        return "no successful 100 B runs"
    labels = list(dict.fromkeys(s.variant.label.replace("100 B, ", "") for s in shown))
    fig, axes = plt.subplots(2, len(patterns), figsize=(4.2 * len(patterns), 7.5), squeeze=False)
    width = 0.8 / max(1, len(labels))
    for col, pattern in enumerate(patterns):
        clients = [c for c in CLIENTS if any(s.client == c and s.pattern == pattern for s in shown)]
        for row, (attr, values, title) in enumerate(
            (("rate", "rates", "records/s"), ("cpu", "cpus", "CPU µs/record"))
        ):
            ax = axes[row][col]
            for k, label in enumerate(labels):
                xs, ys, lo, hi = [], [], [], []
                for i, c in enumerate(clients):
                    s = next(
                        (
                            s
                            for s in shown
                            if s.pattern == pattern
                            and s.client == c
                            and s.variant.label.replace("100 B, ", "") == label
                        ),
                        None,
                    )
                    if s is None:
                        continue
                    med = getattr(s, attr)
                    xs.append(i + (k - (len(labels) - 1) / 2) * width)
                    ys.append(med)
                    lo.append(med - min(getattr(s, values)))
                    hi.append(max(getattr(s, values)) - med)
                if xs:
                    ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=label)
            ax.set_xticks(range(len(clients)))
            ax.set_xticklabels(
                [CHART_NAMES.get((c, pattern), CHART_NAMES.get((c, ""), c)) for c in clients],
                fontsize=7,
            )
            ax.yaxis.set_major_formatter(
                FuncFormatter(lambda y, _pos: f"{y / 1000:,.0f}k" if y >= 1000 else f"{y:g}")
            )
            ax.set_title(f"({pattern}) {title}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("100 B values: median of the repeats, error bars min–max", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    source = Path((argv or sys.argv[1:] or ["docs/benchmarks.json"])[0])
    data = json.loads(source.read_text())
    summaries = summarize(data["runs"])
    chart = source.with_suffix(".png")
    note = write_chart(summaries, chart)
    source.with_suffix(".md").write_text(
        markdown(
            summaries,
            data["meta"],
            chart.name if note is None else None,
            failure_notes(data["runs"]),
        )
    )
    print(text_tables(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
