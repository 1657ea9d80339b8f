"""The package passes ruff and mypy, as CI requires (the linters run as a test)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from tests.support.extras import require
from tests.support.repo import repo_root_or_skip

WHY = "lints the checkout's sources with its pyproject.toml"

# "type: ignore", then its codes in brackets (PGH003 and mypy's ignore-without-code
# insist on those), then the rest of the comment, where the reason goes.
_IGNORE = re.compile(r"type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)")
# Comments after an ignore that are directives to a tool, not a reason.
_DIRECTIVE = re.compile(r"(noqa|pragma|type:|pyright:)")


def _tool(module: str) -> list[str]:
    require(module, extra="test")
    return [sys.executable, "-m", module]


def _mypy(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # --python-executable: the packages of this interpreter, though the config
    # checks the code as the oldest supported Python (mypy would look for that one).
    return subprocess.run(
        [*_tool("mypy"), "--no-incremental", "--python-executable", sys.executable, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_finds_nothing_in_the_package() -> None:
    cmd = _tool("ruff")
    root = repo_root_or_skip(WHY)
    done = subprocess.run(
        [*cmd, "check", "--no-cache", "aioproducer"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


# Every Python source of the repository but the generated protocol messages (pyproject.toml).
FORMATTED = ("aioproducer", "tests", "tools", "benchmarks", "examples", "docs/hooks")


def test_the_sources_are_formatted_by_ruff() -> None:
    cmd = _tool("ruff")
    root = repo_root_or_skip(WHY)
    present = [path for path in FORMATTED if (root / path).is_dir()]
    done = subprocess.run(
        [*cmd, "format", "--check", "--no-cache", *present],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # The output names each file that `ruff format` would change.
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package() -> None:
    root = repo_root_or_skip(WHY)
    # aioproducer.spark and the Arrow bulk path import these (with their types) when present.
    for module in ("pyarrow", "numpy", "pyspark"):
        require(module, extra="spark")
    done = _mypy(root, "aioproducer")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_mypy_configuration_is_strict(tmp_path: Path) -> None:
    """Run as above (from the root: pyproject.toml), mypy refuses what only --strict does."""
    root = repo_root_or_skip(WHY)
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def untyped(x):\n"  # no-untyped-def: --strict only
        "    return x\n"
        "\n"
        "def any_back(x: object) -> int:\n"
        "    return untyped(x)\n"  # no-any-return: --strict only
        "\n"
        "n: int = 1  # type: ignore[assignment]  # needed by nothing\n"  # unused-ignore
        "m: int = ''  # type: ignore\n"  # ignore-without-code: enabled in the config
    )
    done = _mypy(root, str(sample))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    for code in ("no-untyped-def", "no-any-return", "unused-ignore", "ignore-without-code"):
        assert f"[{code}]" in done.stdout, (code, done.stdout[-3000:])


def _unexplained_ignores(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each "type: ignore" comment without codes or without a reason."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        match = _IGNORE.search(token.string)
        if match is None:
            continue
        reasons = [
            part.strip()
            for part in match["rest"].split("#")
            if part.strip() and not _DIRECTIVE.match(part.strip())
        ]
        if not match["codes"] or match["codes"] == "[]" or not reasons:
            found.append((token.start[0], token.string))
    return found


def test_the_ignore_check_tells_explained_from_unexplained() -> None:
    source = (
        "a = 1  # type: ignore\n"
        "b = 1  # type: ignore  # a reason, but no code\n"
        "c = 1  # type: ignore[misc]\n"
        "d = 1  # type: ignore[misc]  # noqa: F401\n"
        "e = 1  # type: ignore[misc]  # set by the caller\n"
        "f = 1  # noqa: F401  # type: ignore[import-untyped]  # untyped package\n"
        "g = '# type: ignore'\n"
    )
    assert [line for line, _ in _unexplained_ignores(source)] == [1, 2, 3, 4]


def test_every_type_ignore_in_the_package_names_its_code_and_why() -> None:
    root = repo_root_or_skip(WHY)
    bad = [
        f"{path.relative_to(root)}:{line}: {comment}"
        for path in sorted((root / "aioproducer").rglob("*.py*"))
        if path.suffix in (".py", ".pyi")
        for line, comment in _unexplained_ignores(path.read_text(encoding="utf-8"))
    ]
    assert not bad, "a type: ignore needs [codes] and a '# reason' after it:\n" + "\n".join(bad)
