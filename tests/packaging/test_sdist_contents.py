"""The sdist holds exactly what an install from it needs, and nothing built or local.

Reads the sdist that ``.ci/wheels`` built when ``AIOPRODUCER_SDIST`` names it; otherwise builds
one with ``python -m build --sdist`` (skipped without ``build`` outside CI, a failure in CI).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

import pytest

from tests.support.repo import repo_root_or_skip

SPEEDUPS = "aioproducer/_speedups"
# Besides the package's modules and the C kernels' sources: what pip and a reader need.
REQUIRED = {
    "PKG-INFO",
    "pyproject.toml",
    "setup.py",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
    "aioproducer/__init__.py",
    "aioproducer/py.typed",
    f"{SPEEDUPS}/_kernels.pyi",
}
# Build products and local state: never in an sdist.
FORBIDDEN_PARTS = {
    "build",
    "dist",
    ".venv",
    ".cache",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".git",
}
FORBIDDEN_SUFFIXES = {".so", ".pyd", ".o", ".pyc", ".pyo"}
# The test suite's Apache Kafka harness: repository-only (tests/support), never installed.
HARNESS = {"kafka_broker.py", "kafka_cluster.py", "kafka_admin.py", "netns.py"}
# What aioproducer/testing ships: the user's kit (the mock cluster is its subpackage mock/).
TESTING_KIT = {
    "__init__.py",
    "avro_compat.py",
    "mock_schema_registry.py",
    "pytest_plugin.py",
    "registry_canonical.py",
}


@pytest.fixture(scope="module")
def root() -> Path:
    return repo_root_or_skip("reads setup.py and the package's sources")


@pytest.fixture(scope="module")
def sdist(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("AIOPRODUCER_SDIST", "").strip()
    if given:
        return Path(given)
    if importlib.util.find_spec("build") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("`build` is not installed, and AIOPRODUCER_SDIST names no sdist")
        pytest.skip("`build` is not installed (pip install build), and AIOPRODUCER_SDIST is unset")
    out = tmp_path_factory.mktemp("sdist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (built,) = out.glob("aioproducer-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def names(sdist: Path) -> set[str]:
    """The sdist's files, relative to its top directory (aioproducer-<version>/)."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if not m.isdir()]
    tops = {PurePosixPath(m.name).parts[0] for m in members}
    assert len(tops) == 1, f"more than one top directory: {sorted(tops)}"
    return {str(PurePosixPath(*PurePosixPath(m.name).parts[1:])) for m in members}


def _setup_py_c_files(root: Path) -> set[str]:
    """The sources and depends of every Extension(...) in setup.py, as written there."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((root / "setup.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension":
            for kw in node.keywords:
                if kw.arg in ("sources", "depends"):
                    found.update(ast.literal_eval(kw.value))
    return found


def test_every_c_source_and_header_is_in_the_sdist(root: Path, names: set[str]) -> None:
    listed = _setup_py_c_files(root)
    assert any(name.endswith(".c") for name in listed), "setup.py lists no C sources"
    on_disk = {
        f"{SPEEDUPS}/{p.name}" for p in (root / SPEEDUPS).iterdir() if p.suffix in (".c", ".h")
    }
    assert listed <= on_disk, f"setup.py lists files that do not exist: {sorted(listed - on_disk)}"
    assert sorted(on_disk - names) == []
    # And no C file the checkout does not have (a stale one from an old build).
    in_sdist = {n for n in names if n.startswith(SPEEDUPS) and n.endswith((".c", ".h"))}
    assert sorted(in_sdist - on_disk) == []


def test_the_package_modules_and_project_files_are_in_the_sdist(
    root: Path, names: set[str]
) -> None:
    assert sorted(REQUIRED - names) == []
    modules = {
        p.relative_to(root).as_posix()
        for p in (root / "aioproducer").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert sorted(modules - names) == []
    license_files = {p.name for p in root.glob("LICEN[CS]E*")}
    assert sorted(license_files - names) == []


def test_nothing_built_or_local_is_in_the_sdist(names: set[str]) -> None:
    bad = sorted(
        name
        for name in names
        if FORBIDDEN_PARTS & set(PurePosixPath(name).parts[:-1] + (PurePosixPath(name).name,))
        or PurePosixPath(name).suffix in FORBIDDEN_SUFFIXES
    )
    assert bad == []


def test_the_sdist_holds_the_package_and_its_project_files_only(names: set[str]) -> None:
    # Tests, docs, benchmarks and tools stay in the repository: the sdist builds the package.
    allowed_dirs = ("aioproducer/", "aioproducer.egg-info/")
    top_files = {"PKG-INFO", "setup.cfg", "MANIFEST.in", *REQUIRED}
    stray = sorted(
        n
        for n in names
        if not n.startswith(allowed_dirs) and n not in top_files and not n.startswith("LICEN")
    )
    assert stray == []


def test_the_testing_package_is_the_users_kit(names: set[str]) -> None:
    # The Kafka harness (KafkaBroker, KafkaCluster, network namespaces) is the project's own:
    # no file of it ships; the embedded broker the CLI starts is product code (embedded/).
    assert sorted(n for n in names if PurePosixPath(n).name in HARNESS) == []
    testing = {
        PurePosixPath(n).name
        for n in names
        if PurePosixPath(n).parent == PurePosixPath("aioproducer/testing")
    }
    assert sorted(testing) == sorted(TESTING_KIT)
    embedded = {"aioproducer/embedded/local_broker.py", "aioproducer/embedded/broker_process.py"}
    assert sorted(embedded - names) == []
