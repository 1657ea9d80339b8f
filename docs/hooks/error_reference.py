"""MkDocs hook: the troubleshooting page's error lists, generated from aioproducer.errors.

* ``<!-- broker-errors -->`` becomes a table of every broker error code in
  :data:`aioproducer.errors.ERROR_TABLE`: class, constant, code, whether
  it is retriable (and whether metadata is refreshed first) and the
  description.
* Every client-side error class (the ones without a code, plus
  :class:`aioproducer.BulkSendError`) must have its own ``### ClassName``
  section, written by hand on the page; a missing one is a warning, which
  fails ``mkdocs build --strict``, so a new error class cannot go undocumented.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MARKER = "<!-- broker-errors -->"
log = logging.getLogger("mkdocs.plugins.error_reference")


def client_error_classes() -> list[type]:
    """Error classes raised by the client itself: aioproducer.errors' own and BulkSendError."""
    from aioproducer import BulkSendError, errors

    generated = set(errors.ERROR_CODES.values())
    found = [
        obj
        for name in errors.__all__
        if isinstance(obj := getattr(errors, name), type)
        and issubclass(obj, errors.KafkaError)
        and obj not in generated
    ]
    return [*found, BulkSendError]


def _retriable(spec: Any) -> str:
    if spec.invalid_metadata:
        return "yes, after a metadata refresh"
    return "yes" if spec.retriable else "no"


def broker_error_table() -> str:
    """The Markdown table of every broker error code."""
    from aioproducer import errors

    rows = [
        "| class | Kafka name | code | retriable | meaning |",
        "|---|---|---|---|---|",
    ]
    for spec in sorted(errors.ERROR_TABLE, key=lambda s: s.code):
        rows.append(
            f'| <span id="{spec.class_name.lower()}"></span>`{spec.class_name}` '
            f"| `{spec.name}` | {spec.code} | {_retriable(spec)} "
            f"| {spec.description} |"
        )
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Generate the broker table; warn about a client error class without a section."""
    if MARKER not in markdown:
        return markdown
    headings = set(re.findall(r"^###\s+`?(\w+)`?\s*$", markdown, flags=re.MULTILINE))
    for cls in client_error_classes():
        if cls.__name__ not in headings:
            log.warning(
                "%s: no '### %s' section for the error class %s.%s",
                page.file.src_uri,
                cls.__name__,
                cls.__module__,
                cls.__name__,
            )
    return markdown.replace(MARKER, broker_error_table())
