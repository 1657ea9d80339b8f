"""CHANGELOG.md is towncrier's: a start marker, a section per release, fragments that build.

The next release's notes are fragments in ``changes/`` (docs/contributing.md); ``towncrier
build --version X`` writes them into CHANGELOG.md below the start marker. Here the draft of
such a build must run cleanly (a misnamed fragment fails it), and the released section of the
installed version must be there.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.extras import require
from tests.support.repo import repo_root_or_skip

START_MARKER = "<!-- towncrier release notes start -->"


@pytest.fixture(scope="module")
def root() -> Path:
    return repo_root_or_skip("reads CHANGELOG.md, changes/ and pyproject.toml")


@pytest.fixture(scope="module")
def changelog(root: Path) -> str:
    return (root / "CHANGELOG.md").read_text(encoding="utf-8")


def test_pyproject_configures_towncrier_with_the_changelogs_marker(root: Path) -> None:
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert "[tool.towncrier]" in text
    assert f'start_string = "{START_MARKER}\\n"' in text
    assert 'filename = "CHANGELOG.md"' in text and 'directory = "changes"' in text


def test_the_changelog_has_the_start_marker_once(changelog: str) -> None:
    assert changelog.count(START_MARKER) == 1


def test_the_released_section_of_this_version_is_below_the_marker(changelog: str) -> None:
    version = metadata.version("aioproducer")
    heading = re.compile(rf"^## {re.escape(version)} \(\d{{4}}-\d{{2}}-\d{{2}}\)$", re.MULTILINE)
    found = heading.search(changelog)
    assert found, f"CHANGELOG.md has no '## {version} (YYYY-MM-DD)' section"
    assert found.start() > changelog.index(START_MARKER)
    # A released section groups its bullets under Keep a Changelog's headings, nothing else.
    released = changelog[found.end() :]
    following = re.search(r"^## ", released, re.MULTILINE)
    section = released[: following.start()] if following else released
    kinds = re.findall(r"^### (.+)$", section, re.MULTILINE)
    allowed = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    assert kinds and set(kinds) <= allowed
    assert "Unreleased" not in changelog


def test_a_towncrier_draft_builds_cleanly(root: Path, changelog: str) -> None:
    require("towncrier", extra="test")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "towncrier",
            "build",
            "--draft",
            "--version",
            "99.0.0",
            "--date",
            "2099-01-01",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "## 99.0.0 (2099-01-01)" in done.stdout
    # A draft writes nothing.
    assert (root / "CHANGELOG.md").read_text(encoding="utf-8") == changelog


def test_changes_holds_only_fragments_and_its_readme(root: Path) -> None:
    names = {p.name for p in (root / "changes").iterdir()}
    assert "README.md" in names
    kinds = "added|changed|deprecated|removed|fixed|security"
    fragment = re.compile(rf"^(\+[\w.-]+|\d+)\.({kinds})(\.\d+)?\.md$")
    assert sorted(n for n in names - {"README.md", ".gitkeep"} if not fragment.match(n)) == []
