"""One version: pyproject.toml's, read back from the installed distribution's metadata.

``aioproducer.__version__`` and ``aioproducer --version`` both come from
``importlib.metadata``; a source tree that was never installed says ``0+unknown``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import aioproducer
from tests.support.repo import repo_root


def _run(code_or_module: list[str], *, cwd: Path, pythonpath_first: Path | None = None) -> str:
    env = dict(os.environ)
    if pythonpath_first is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(pythonpath_first), env.get("PYTHONPATH", "")) if p
        )
    done = subprocess.run(
        [sys.executable, *code_or_module],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip()


def test_the_package_version_is_the_distributions() -> None:
    assert aioproducer.__version__ == metadata.version("aioproducer")


def test_the_installed_metadata_is_pyprojects_version() -> None:
    root = repo_root()
    if root is None:
        return  # an installed wheel without its checkout: nothing else to compare with
    # tomllib is 3.11+; the [project] table's version is the file's only top-level `version =`.
    text = (root / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    assert found, "pyproject.toml declares no version"
    declared = found.group(1)
    assert metadata.version("aioproducer") == declared, (
        "the installed metadata is stale: pip install -e . again"
    )


def test_the_command_line_prints_the_distributions_version(tmp_path: Path) -> None:
    out = _run(["-m", "aioproducer.cli", "--version"], cwd=tmp_path)
    assert out == f"aioproducer {metadata.version('aioproducer')}"


def test_the_version_is_read_from_metadata_not_written_in_the_code(tmp_path: Path) -> None:
    # A distribution found first on sys.path with another version: the code must report it.
    dist_info = tmp_path / "aioproducer-9.8.7.dist-info"
    dist_info.mkdir()
    metadata_text = "Metadata-Version: 2.1\nName: aioproducer\nVersion: 9.8.7\n"
    (dist_info / "METADATA").write_text(metadata_text)
    probe = "import aioproducer; print(aioproducer.__version__)"
    assert _run(["-c", probe], cwd=tmp_path, pythonpath_first=tmp_path) == "9.8.7"
    cli = _run(["-m", "aioproducer.cli", "--version"], cwd=tmp_path, pythonpath_first=tmp_path)
    assert cli == "aioproducer 9.8.7"


def test_a_source_tree_without_metadata_says_unknown(tmp_path: Path) -> None:
    probe = (
        "import importlib.metadata as m\n"
        "real = m.version\n"
        "def version(name):\n"
        "    if name == 'aioproducer':\n"
        "        raise m.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "m.version = version\n"
        "import aioproducer\n"
        "print(aioproducer.__version__)\n"
    )
    assert _run(["-c", probe], cwd=tmp_path) == "0+unknown"
