"""MkDocs hook: the configuration reference, generated from ProducerConfig itself.

A page that holds the line ``<!-- config-reference -->`` gets, in its place,
one table row per setting: the argument name, its type, its default, the Java
producer property (``field.metadata["java"]``, else every name that
:data:`aioproducer.config.JAVA_PROPERTY_NAMES` maps onto the field) and its
meaning (``field.metadata["doc"]``; empty until a field has one). Nothing is
written by hand, so the page cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import html
from collections import defaultdict
from typing import Any

MARKER = "<!-- config-reference -->"


def _code(text: str) -> str:
    # HTML, not backticks: a type such as ``str | None`` would split a table cell.
    return f"<code>{html.escape(text).replace('|', '&#124;')}</code>"


def _size_hint(value: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size and value % size == 0:
            return f" ({value // size} {unit})"
    return ""


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if value is None:
        return _code("None")
    if isinstance(value, bool):
        return _code(repr(value))
    if isinstance(value, int):
        hint = _size_hint(value) if field.name.endswith(("memory", "size")) else ""
        return _code(str(value)) + hint
    return _code(repr(value))


def java_names() -> dict[str, list[str]]:
    """Field name -> the Java (and librdkafka) property names that set it, sorted."""
    from aioproducer.config import JAVA_PROPERTY_NAMES

    names: dict[str, list[str]] = defaultdict(list)
    for prop, field_name in JAVA_PROPERTY_NAMES.items():
        names[field_name].append(prop)
    return {k: sorted(v) for k, v in names.items()}


def settings() -> list[dataclasses.Field[Any]]:
    """The settings a user passes: every init field of ProducerConfig, in definition order."""
    from aioproducer.config import ProducerConfig

    return [f for f in dataclasses.fields(ProducerConfig) if f.init]


def config_table() -> str:
    """The Markdown table of every setting."""
    by_field = java_names()
    rows = [
        "| setting | type | default | Java property | meaning |",
        "|---|---|---|---|---|",
    ]
    for field in settings():
        java = field.metadata.get("java")
        props = [java] if java else by_field.get(field.name, [])
        java_cell = "<br>".join(_code(p) for p in props) if props else "—"
        doc = " ".join(str(field.metadata.get("doc") or "").split())
        type_name = (
            field.type
            if isinstance(field.type, str)
            else getattr(field.type, "__name__", str(field.type))
        )
        rows.append(
            f'| <span id="{field.name}"></span>{_code(field.name)} | {_code(str(type_name))} '
            f"| {_default(field)} | {java_cell} | {doc.replace('|', '&#124;')} |"
        )
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Put the generated table where the page asks for it."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, config_table())
    return markdown
