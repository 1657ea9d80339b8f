"""MkDocs hook: the table of the compiled kernels and their pure-Python twins, from the code.

A page that holds the line ``<!-- compiled-twins -->`` gets, in its place, one row per choice
point: a place in ``aioproducer`` that uses ``kernels.X`` (``aioproducer._speedups``'s switch),
with the C source defining ``X``, the pure-Python reference it replaces and the tests that name
that reference. Everything is read with ``ast`` and text search (nothing is imported).

The reference is found by the project's conventions: the other arm of ``A if kernels is None
else kernels.X``; the pure assignment of the same name on the other branch; a class attribute
``m = _m_pure`` for a method rebound below its class; ``_name_pure``; inside a function, the
``*_pure`` function it calls otherwise, or for a compiled-only step ``_<what>_<name>`` (None
without the kernels) the general ``_<name>`` its callers fall back to.
A choice point whose reference cannot be found, or whose kernel no C source defines, is a build
warning, so ``mkdocs build --strict`` keeps the table (and the contributing page that shows it)
true.
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "<!-- compiled-twins -->"
PACKAGE = Path(__file__).resolve().parents[2] / "aioproducer"
log = logging.getLogger("mkdocs.plugins.twin_reference")


@dataclass(frozen=True)
class Twin:
    """One choice point between a compiled kernel and its pure-Python reference."""

    module: str  # path relative to the repository
    chooses: str  # what the choice sets: a name, a method, or the function that branches
    kernel: str  # the attribute of aioproducer._speedups._kernels
    pure: str | None  # the pure-Python reference, None when not found


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _kernel_attrs(node: ast.AST) -> list[str]:
    return [
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == "kernels"
    ]


def _module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, those under ``if``/``else`` included (not functions')."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out.extend(_module_statements(stmt.body + stmt.orelse))
    return out


def _targets(stmt: ast.Assign) -> list[str]:
    names: list[str] = []
    for target in stmt.targets:
        parts = target.elts if isinstance(target, ast.Tuple) else [target]
        names.extend(d for d in (_dotted(p) for p in parts) if d)
    return names


def _pure_for_name(name: str, tree: ast.Module, statements: list[ast.stmt]) -> str | None:
    """The pure reference bound to ``name`` (a module name or ``Class.method``)."""
    if "." in name:
        cls_name, _, attr = name.rpartition(".")
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name):
            for stmt in cls.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and _targets(stmt) == [attr]
                    and isinstance(stmt.value, ast.Name)
                ):
                    return f"{cls_name}.{stmt.value.id}"
            if any(isinstance(s, ast.FunctionDef) and s.name == f"_{attr}_pure" for s in cls.body):
                return f"{cls_name}._{attr}_pure"
        return None
    for stmt in statements:
        if not isinstance(stmt, ast.Assign) or _kernel_attrs(stmt.value):
            continue
        targets = _targets(stmt)
        if targets == [name] and isinstance(stmt.value, ast.Name):
            return stmt.value.id  # the other branch: name = NamePy
        if (
            isinstance(stmt.value, ast.Name)
            and stmt.value.id == name
            and len(targets) == 1
            and targets[0].endswith(("_pure", "Py", "_py"))
        ):
            return targets[0]  # _name_pure = name, before the kernel replaces it
    defined = {s.name for s in statements if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
    for candidate in (f"_{name}_pure", f"{name}_pure", f"{name}Py"):
        if candidate in defined:
            return candidate
    return None


def _pure_for_function(func: ast.FunctionDef, tree: ast.Module) -> str | None:
    calls = [_dotted(n.func) for n in ast.walk(func) if isinstance(n, ast.Call)]
    pure = [c for c in calls if c and c.rsplit(".", 1)[-1].endswith("_pure")]
    if pure:
        return pure[0]
    # A compiled-only step (`_plain_lengths`, None without the kernels) whose callers fall
    # back to the general function it narrows (`_lengths`).
    general = [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and n.name != func.name
        and func.name.endswith("_" + n.name.lstrip("_"))
    ]
    return general[0] if general else None


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out.extend(
                (f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)
            )
    return out


def twins(package: Path = PACKAGE) -> list[Twin]:
    """Every choice point of the package, in path order."""
    found: list[Twin] = []
    for path in sorted(package.rglob("*.py")):
        if package / "_speedups" in path.parents:
            continue
        tree = ast.parse(path.read_text(), str(path))
        module = path.relative_to(package.parent).as_posix()
        statements = _module_statements(tree.body)
        for stmt in statements:
            if isinstance(stmt, ast.Assign) and (kernels := _kernel_attrs(stmt.value)):
                value = stmt.value
                for name in _targets(stmt):
                    pure = None
                    if isinstance(value, ast.IfExp):
                        arms = [a for a in (value.body, value.orelse) if not _kernel_attrs(a)]
                        pure = _dotted(arms[0]) if arms else None
                    found.append(
                        Twin(
                            module, name, kernels[0], pure or _pure_for_name(name, tree, statements)
                        )
                    )
        for qualname, func in _functions(tree):
            for kernel in dict.fromkeys(_kernel_attrs(func)):
                found.append(Twin(module, f"{qualname}()", kernel, _pure_for_function(func, tree)))
    return found


def c_source(kernel: str, package: Path = PACKAGE) -> str | None:
    """The C file that defines ``kernel`` (a method table entry or a type's name)."""
    pattern = re.compile(rf'"(?:aioproducer\._speedups\._kernels\.)?{re.escape(kernel)}"')
    for path in sorted((package / "_speedups").glob("*.c")):
        if pattern.search(path.read_text()):
            return path.relative_to(package.parent).as_posix()
    return None


def tests_naming(pure: str, package: Path = PACKAGE) -> list[str]:
    """The test files under tests/unit that name the reference (they compare the twins)."""
    bare = pure.rsplit(".", 1)[-1]
    word = re.compile(rf"\b{re.escape(bare)}\b")
    unit = package.parent / "tests" / "unit"
    return [
        p.relative_to(package.parent).as_posix()
        for p in sorted(unit.glob("test_*.py"))
        if word.search(p.read_text())
    ]


def twin_table(package: Path = PACKAGE) -> str:
    rows = [
        (
            "| where the choice is made | what it sets | compiled (C) | pure-Python reference "
            "| compared in |"
        ),
        "|---|---|---|---|---|",
    ]
    found = twins(package)
    for twin in found:
        source = c_source(twin.kernel, package)
        if source is None:
            log.warning(
                "%s uses kernels.%s, which no C source of aioproducer/_speedups defines",
                twin.module,
                twin.kernel,
            )
        if twin.pure is None:
            log.warning(
                "%s: no pure-Python reference found for kernels.%s (%s); name it as "
                "docs/hooks/twin_reference.py describes",
                twin.module,
                twin.kernel,
                twin.chooses,
            )
        compared = tests_naming(twin.pure, package) if twin.pure else []
        if not compared:  # e.g. RecordHandlePy: made and tested through BatchOutcomePy
            compared = sorted(
                {
                    t
                    for other in found
                    if other.module == twin.module and other.pure
                    for t in tests_naming(other.pure, package)
                }
            )
        rows.append(
            f"| `{twin.module}` | `{twin.chooses}` | `{twin.kernel}` in `{source}` "
            f"| `{twin.pure}` | {', '.join(f'`{t}`' for t in compared) or '-'} |"
        )
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Put the generated table where the page asks for it."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, twin_table())
    return markdown
