"""Reliability suite: delivery guarantees under injected faults, against the mock cluster.

Each test may describe its scenario with the ``scenario`` fixture; the
descriptions and outcomes are printed in a summary section at the end of the
run. Any ERROR logged by the producer (an unexpected exception in the sender
loop, for instance) fails the test that caused it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

# nodeid -> scenario description; nodeid -> outcome.
_DESCRIPTIONS: dict[str, list[str]] = {}
_OUTCOMES: dict[str, str] = {}


@pytest.fixture
def scenario(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``scenario("what happened")``: a line for the end-of-run summary (also printed)."""

    def describe(text: str) -> None:
        print(text)
        _DESCRIPTIONS.setdefault(request.node.nodeid, []).append(text)

    return describe


@pytest.fixture(autouse=True)
def no_producer_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail a test whose producer logged an ERROR: faults must be handled, not crash loops."""
    caplog.set_level(logging.WARNING, logger="aioproducer")
    yield
    bad = [
        r
        for r in caplog.get_records("call")
        if r.levelno >= logging.ERROR
        and r.name.startswith("aioproducer")
        and not r.name.startswith("aioproducer.testing")
    ]
    assert not bad, "the producer logged errors:\n" + "\n".join(
        f"{r.name}: {r.getMessage()}" + (f"\n{r.exc_text}" if r.exc_text else "") for r in bad
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "reliability" not in report.nodeid:
        return
    if hasattr(report, "wasxfail"):
        _OUTCOMES[report.nodeid] = "XPASS (strict)" if report.failed else "xfail (known bug)"
    elif report.failed:
        _OUTCOMES[report.nodeid] = f"FAILED ({report.when})"
    elif report.skipped and report.nodeid not in _OUTCOMES:
        _OUTCOMES[report.nodeid] = "skipped"
    elif report.when == "call" and report.nodeid not in _OUTCOMES:
        _OUTCOMES[report.nodeid] = "passed"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _OUTCOMES:
        return
    tr = terminalreporter
    tr.section("reliability scenarios")
    for nodeid, outcome in _OUTCOMES.items():
        name = nodeid.split("tests/reliability/", 1)[-1]
        tr.write_line(f"{outcome:<16} {name}")
        for line in _DESCRIPTIONS.get(nodeid, []):
            tr.write_line(f"{'':<16}   {line}")
    seeds = [n for n in _OUTCOMES if "test_random_faults" in n]
    counts = Counter(o.split(" ")[0] for o in _OUTCOMES.values())
    tr.write_line(
        f"{len(_OUTCOMES)} scenarios ({len(seeds)} random-fault seeds): "
        + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    )
