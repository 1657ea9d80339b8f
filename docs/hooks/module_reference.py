"""MkDocs hook: the table of every module of the package, from the modules themselves.

A page that holds the line ``<!-- module-reference -->`` gets, in its place, one
row per module of ``aioproducer`` (packages and their modules, in path order)
with the first line of the module's docstring, read with ``ast`` (nothing is
imported). A module without a docstring is a build warning, so with
``mkdocs build --strict`` the table cannot leave a module out or drift.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

MARKER = "<!-- module-reference -->"
PACKAGE = Path(__file__).resolve().parents[2] / "aioproducer"
log = logging.getLogger("mkdocs.plugins.module_reference")


def modules(package: Path = PACKAGE) -> list[tuple[str, str]]:
    """(path relative to the repository, first docstring line or '') for every module."""
    out = []
    for path in sorted(package.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        out.append((path.relative_to(package.parent).as_posix(), first))
    return out


def module_table(package: Path = PACKAGE) -> str:
    rows = ["| module | what it holds |", "|---|---|"]
    for path, first in modules(package):
        if not first:
            log.warning("%s has no module docstring: the layout table needs its first line", path)
        rows.append(f"| `{path}` | {first.replace('|', '&#124;')} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Put the generated table where the page asks for it."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, module_table())
    return markdown
