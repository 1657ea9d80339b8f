"""The checked-in generated messages are what the generator writes from the jar."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.repo import repo_root_or_skip
from tools.kafka_messages.generate import OUT, REPO_ROOT, default_jar, generate


def test_checked_in_messages_match_a_fresh_generation(tmp_path: Path) -> None:
    # The checkout's files and jar (tests may run from a copy, against an installed wheel).
    root = repo_root_or_skip("compares the checkout's generated messages with the generator's")
    jar = root / default_jar().relative_to(REPO_ROOT)
    out = root / OUT.relative_to(REPO_ROOT)
    if not jar.is_file():
        reason = f"no {jar}: run tools/kafka/fetch.sh"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI must check the generated messages)")
        pytest.skip(reason)
    written = generate(jar, tmp_path)
    fresh = {p.name: p.read_text(encoding="utf-8") for p in written}
    checked_in = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.py")}
    assert sorted(checked_in) == sorted(fresh), (
        "files differ: run python -m tools.kafka_messages.generate"
    )
    stale = [name for name in fresh if fresh[name] != checked_in[name]]
    assert not stale, (
        f"{stale} differ from a fresh generation: run python -m tools.kafka_messages.generate"
    )
