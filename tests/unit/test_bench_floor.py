"""The asyncio floor in the throughput benchmark: measured in its own process, reported on the page."""

from __future__ import annotations

from typing import Any

from benchmarks import report, run


def _row(pattern: str, idempotence: bool, cpu: float) -> dict[str, Any]:
    return {
        "pattern": pattern,
        "client": "aioproducer",
        "size": 100,
        "idempotence": idempotence,
        "loop": "asyncio",
        "records": 1000,
        "status": "ok",
        "records_per_s": 1.0,
        "cpu_us_per_record": cpu,
    }


def test_the_floor_runs_in_its_own_process_and_reports_both_patterns() -> None:
    floor = run.measure_floor(2000)
    assert floor is not None and set(floor) == {"a", "b"}
    assert all(0 < v < 1000 for v in floor.values()), floor


def test_the_page_states_the_floor_and_the_distance_above_it() -> None:
    summaries = report.summarize(
        [_row("a", False, 2.5), _row("a", True, 2.9), _row("b", False, 5.0)]
    )
    meta = {"asyncio_floor": [{"a": 1.6, "b": 3.9}, {"a": 1.8, "b": 4.1}, {"a": 1.7, "b": 4.0}]}
    note = report.floor_note(summaries, meta)
    assert note is not None
    assert "pattern a 1.70 µs (1.60-1.80)" in note and "pattern b 4.00 µs (3.90-4.10)" in note
    assert (
        "idempotence off 2.50 µs, +0.80 µs" in note and "idempotence on 2.90 µs, +1.20 µs" in note
    )
    page = report.markdown(summaries, meta, None, [])
    assert note in page
    assert report.floor_note(summaries, {}) is None
    assert "asyncio floor" not in report.markdown(summaries, {}, None, [])
