"""The summaries :mod:`benchmarks.web_load` prints: per implementation and concurrency,
the median requests/s with its spread, latency medians and the ratio between the two."""

from __future__ import annotations

import collections
import math
import statistics
from typing import Any

from benchmarks.web_service import IMPLS

__all__ = ["print_profile_summary", "print_summary", "run_is_bad", "run_line", "summarize"]


def run_is_bad(run: dict[str, Any]) -> bool:
    return run["status"] != "ok" or bool(run["missing"] or run["duplicated"] or run["ok"] == 0)


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (clients, impl): medians over the completed runs, and aioproducer / aiokafka."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for r in runs:
        groups[(r["clients"], r["impl"])].append(r)
    rows: list[dict[str, Any]] = []
    for (clients, impl), group in groups.items():
        done = [r for r in group if r["status"] == "ok"]
        rps = [r["requests_per_s"] for r in done]
        rows.append(
            {
                "clients": clients,
                "impl": impl,
                "runs": len(done),
                "failed_runs": len(group) - len(done),
                "requests_per_s": statistics.median(rps) if rps else math.nan,
                "requests_per_s_min": min(rps, default=math.nan),
                "requests_per_s_max": max(rps, default=math.nan),
                "p50_ms": statistics.median(r["p50_ms"] for r in done) if done else math.nan,
                "p99_ms": statistics.median(r["p99_ms"] for r in done) if done else math.nan,
                "bad_runs": sum(1 for r in group if run_is_bad(r)),
            }
        )
    for row in rows:
        base = next(
            (b for b in rows if b["clients"] == row["clients"] and b["impl"] == "aiokafka"), None
        )
        ratio = math.nan
        if row["impl"] == "aioproducer" and base and base["requests_per_s"] > 0:
            ratio = row["requests_per_s"] / base["requests_per_s"]
        row["ratio_vs_aiokafka"] = ratio
    rows.sort(key=lambda r: (r["clients"], IMPLS.index(r["impl"])))
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'clients':>7} {'service on':<12} {'runs':>4} {'req/s':>8} {'min-max':>13} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'ratio':>7} {'bad runs':>8}"
    )
    for r in rows:
        spread = f"{r['requests_per_s_min']:.0f}-{r['requests_per_s_max']:.0f}"
        ratio = "" if math.isnan(r["ratio_vs_aiokafka"]) else f"{r['ratio_vs_aiokafka']:.2f}x"
        print(
            f"{r['clients']:>7} {r['impl']:<12} {r['runs']:>4} {r['requests_per_s']:>8.0f} "
            f"{spread:>13} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} {ratio:>7} "
            f"{r['bad_runs']:>8}"
        )
    print(
        "req/s: median of the completed runs (min-max); p50/p99: medians of the runs' "
        "percentiles;\nratio: aioproducer / aiokafka of the median req/s; bad runs: failed, "
        "or an acknowledged event missing or stored twice"
    )


def print_profile_summary(runs: list[dict[str, Any]]) -> None:
    """Per (clients, impl): the producer's share of the service's samples, and CPU per request."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for r in runs:
        if r.get("profile", {}).get("samples"):
            groups[(r["clients"], r["impl"])].append(r)
    print(
        "\nproducer share of the service's samples (inclusive: a sample whose stack has any "
        "frame in the producer's package),\nmedian (min-max) of the runs; py-spy: not "
        "sleeping (running or waiting for a core); on CPU: sampled on CPU time; perf: sampled\non "
        "CPU time by Linux perf, C and Python frames together"
    )

    def span(vals: list[float]) -> str:
        if not vals:
            return "-"
        return f"{statistics.median(vals):.1%} ({min(vals):.1%}-{max(vals):.1%})"

    for (clients, impl), group in sorted(groups.items()):
        spy = [r["profile"]["shares"]["producer"] for r in group]
        oncpu = [
            r["profile"]["cpu_shares"]["producer"] for r in group if r["profile"].get("cpu_shares")
        ]
        perf = [
            r["profile"]["perf_shares"]["producer"]
            for r in group
            if r["profile"].get("perf_shares")
        ]
        cpu = {
            k: statistics.median(r["profile"]["cpu_s"][k] / max(r["ok"], 1) * 1e6 for r in group)
            for k in ("service", "broker", "load")
            if group[0]["profile"]["cpu_s"][k] is not None
        }
        print(
            f"{clients:>7} {impl:<12} py-spy {span(spy)}, on CPU {span(oncpu)}"
            + (f", perf {span(perf)}" if perf else "")
            + "; CPU us/request "
            + " ".join(f"{k} {v:.0f}" for k, v in cpu.items())
            + f"; {len(group)} run(s)"
        )


def run_line(r: dict[str, Any]) -> str:
    return (
        f"round {r['round']} clients {r['clients']} {r['impl']}: "
        f"{r['requests_per_s']:.0f} req/s, p50 {r['p50_ms']:.1f} ms, "
        f"p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms; ok {r['ok']}, "
        f"failed {sum(r['failures'].values())}, missing {r['missing']}, "
        f"duplicated {r['duplicated']}"
    )
