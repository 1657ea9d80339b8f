"""Optional integrations with other libraries, each behind an extra.

Importing one whose library is missing raises ImportError naming the extra
to install (``pip install 'aioproducer[prometheus]'`` and so on).
"""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(module: str, package: str, extra: str) -> ImportError:
    """The error an integration raises when its optional dependency is absent."""
    return ImportError(
        f"{module} needs the {package!r} package: pip install 'aioproducer[{extra}]'"
    )
