"""The web examples' documented install commands bring what their run commands need.

Each example's docstring shows ``pip install 'aioproducer[EXTRAS]'`` and the
command that runs it. Every module the example imports and every program the
run command starts must come from those extras (or the core dependencies),
read from pyproject.toml, so a reader who follows the docstring is not left
with a ``command not found`` or an ImportError.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["aiohttp_service.py", "fastapi_service.py", "avro_service.py"]
# Programs a reader already has: the interpreter, pip, and the HTTP client shown.
NOT_INSTALLED_BY_EXTRAS = {"python", "python3", "pip", "curl"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _normalize(match.group(1))


def _provided(extras: list[str]) -> set[str]:
    """Distribution names that ``pip install 'aioproducer[extras]'`` installs (one level of
    ``aioproducer[...]`` self-reference resolved, as pyproject uses)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    names = {_requirement_name(r) for r in project["dependencies"]}
    todo = list(extras)
    seen: set[str] = set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        assert extra in optional, f"pyproject.toml has no extra {extra!r}"
        for requirement in optional[extra]:
            inner = re.match(r"aioproducer\[(.*)\]", requirement)
            if inner:
                todo.extend(e.strip() for e in inner.group(1).split(","))
            else:
                names.add(_requirement_name(requirement))
    return names


def _distribution(module: str) -> str:
    """The distribution that provides top-level ``module`` (its own name when not installed)."""
    dists = metadata.packages_distributions().get(module)
    return _normalize(dists[0] if dists else module)


def _third_party_imports(source: str) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    local = {"aioproducer", "examples", "__future__"}
    return {m for m in modules if m not in sys.stdlib_module_names and m not in local}


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_documented_extras_install_what_the_example_runs_on(example: str) -> None:
    source = (ROOT / "examples" / example).read_text()
    docstring = ast.get_docstring(ast.parse(source)) or ""
    installs = re.findall(r"pip install 'aioproducer\[([^\]]+)\]'", docstring)
    assert installs, f"examples/{example} does not say which extras to install"
    provided = _provided([e.strip() for e in installs[0].split(",")])

    needed = {_distribution(m) for m in _third_party_imports(source)}
    commands = [line.strip() for line in docstring.splitlines() if "examples" in line]
    assert commands, f"examples/{example} shows no command that runs it"
    for command in commands:
        words = [w for w in command.split() if "=" not in w]  # skip VAR=value prefixes
        if words and words[0] not in NOT_INSTALLED_BY_EXTRAS:
            needed.add(_normalize(words[0]))

    missing = sorted(needed - provided)
    assert not missing, (
        f"examples/{example}: pip install 'aioproducer[{installs[0]}]' does not install {missing}"
    )
