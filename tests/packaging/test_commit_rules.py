"""``.ci/commits`` passes good commit subjects and fails naming each bad one.

Each test builds a small git repository of its own and runs the script there, as CI runs it
in a fresh clone: with a range, with the baseline of ``.ci/commit-baseline``, and without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import repo_root_or_skip

GOOD = "Add a bounded wait to the metadata refresh"
TOO_LONG = "Add " + "x" * 69  # 73 characters
EXACTLY_72 = "Add " + "y" * 68
PERIOD = "Fix the retry backoff."


@pytest.fixture(scope="module")
def script() -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    path = repo_root_or_skip("runs .ci/commits") / ".ci" / "commits"
    assert path.is_file(), f"{path} is missing"
    assert os.access(path, os.X_OK), f"{path} is not executable"
    return path


class Repo:
    """A throwaway repository with commits made to order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "dev@example.com")
        self.git("config", "user.name", "Dev")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.path, capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout.strip()

    def commit(self, message: str) -> str:
        """A commit with ``message`` (subject and body); returns its short hash."""
        self.git("commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", message)
        return self.git("rev-parse", "--short", "HEAD")

    def set_baseline(self, sha: str) -> None:
        (self.path / ".ci").mkdir(exist_ok=True)
        (self.path / ".ci" / "commit-baseline").write_text(f"# grandfathered up to here\n{sha}\n")

    def run(self, script: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), *args],
            cwd=self.path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def test_a_range_of_good_commits_passes(script: Path, repo: Repo) -> None:
    first = repo.commit("Start the project")
    repo.commit(GOOD + "\n\nThe body may be as long as it needs to be, " + "z" * 200)
    repo.commit(EXACTLY_72)
    done = repo.run(script, f"{first}..HEAD")
    assert done.returncode == 0, done.stderr
    assert "2 checked" in done.stdout


def test_a_bad_commit_fails_and_is_named(script: Path, repo: Repo) -> None:
    first = repo.commit("Start the project")
    good = repo.commit(GOOD)
    long_one = repo.commit(TOO_LONG + "\n\nbody")
    period = repo.commit(PERIOD)
    done = repo.run(script, f"{first}..HEAD")
    assert done.returncode == 1
    assert f"commit {long_one}: 73 characters (at most 72)" in done.stderr
    assert f"commit {period}: ends with a period" in done.stderr
    assert good not in done.stderr


def test_a_subject_is_counted_in_characters_not_bytes(script: Path, repo: Repo) -> None:
    first = repo.commit("Start the project")
    repo.commit("Add " + "é" * 68)  # 72 characters, 140 bytes in UTF-8
    done = repo.run(script, f"{first}..HEAD")
    assert done.returncode == 0, done.stderr


def test_a_long_merge_subject_fails_too(script: Path, repo: Repo) -> None:
    base = repo.commit("Start the project")
    repo.git("checkout", "-q", "-b", "topic")
    repo.commit(GOOD)
    repo.git("checkout", "-q", "main")
    repo.commit("Add another thing on main")
    repo.git("merge", "-q", "--no-ff", "topic", "-m", "Merge branch 'topic': " + "w" * 60)
    merge = repo.git("rev-parse", "--short", "HEAD")
    done = repo.run(script, f"{base}..HEAD")
    assert done.returncode == 1
    assert f"commit {merge}: 82 characters" in done.stderr


def test_rebase_leftovers_fail(script: Path, repo: Repo) -> None:
    first = repo.commit("Start the project")
    fixup = repo.commit("fixup! Start the project")
    done = repo.run(script, f"{first}..HEAD")
    assert done.returncode == 1
    assert f"commit {fixup}: a rebase leftover" in done.stderr


def test_commits_up_to_the_baseline_are_grandfathered(script: Path, repo: Repo) -> None:
    repo.commit(TOO_LONG)
    baseline = repo.commit(PERIOD)
    repo.set_baseline(repo.git("rev-parse", baseline))
    repo.commit(GOOD)
    assert repo.run(script).returncode == 0
    bad = repo.commit(TOO_LONG)
    done = repo.run(script)
    assert done.returncode == 1
    assert f"commit {bad}:" in done.stderr
    assert f"commit {baseline}:" not in done.stderr


def test_an_unknown_baseline_checks_head_only(script: Path, repo: Repo) -> None:
    # A shallow clone lacks the baseline: the older commits cannot be checked, HEAD can.
    repo.set_baseline("0123456789abcdef0123456789abcdef01234567")
    repo.commit(TOO_LONG)
    repo.commit(GOOD)
    done = repo.run(script)
    assert done.returncode == 0, done.stderr
    assert "HEAD only" in done.stdout
    bad = repo.commit(PERIOD)
    done = repo.run(script)
    assert done.returncode == 1
    assert f"commit {bad}: ends with a period" in done.stderr


def test_a_shallow_clone_checks_head(
    script: Path,
    repo: Repo,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    first = repo.commit("Start the project")
    repo.set_baseline(repo.git("rev-parse", first))
    repo.git("add", ".ci/commit-baseline")
    repo.commit(GOOD)
    repo.commit(TOO_LONG)
    clone = tmp_path_factory.mktemp("clone") / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{repo.path}", str(clone)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "73 characters" in done.stderr


def test_the_rule_is_documented_where_the_script_says(script: Path) -> None:
    text = (script.parents[1] / "docs" / "contributing.md").read_text()
    assert ".ci/commits" in text and "72 characters" in text
