"""MkDocs hook: Sphinx cross-reference roles in docstrings, shown as the code they name.

Docstrings cite other objects as Sphinx does (``:func:`time_to_switch```,
``:class:`~aioproducer.engine.admission.Admission```): readable in the source
and in ``help()``. mkdocstrings renders the backticks as code but leaves the
role, so the API page would show ``:func:`` before the name. This hook drops
the role and, for ``~``, keeps the last dotted part, as Sphinx displays it.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|ref|term|kbd):<code>(~?)([^<]*)</code>"
)


def strip_roles(html: str) -> str:
    """``html`` with every rendered Sphinx role replaced by its target as code."""

    def shown(match: re.Match[str]) -> str:
        tilde, target = match.groups()
        return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"

    return ROLE.sub(shown, html)


def on_page_content(html: str, **kwargs: Any) -> str:
    return strip_roles(html)
