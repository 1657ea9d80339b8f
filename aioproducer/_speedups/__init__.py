"""The compiled kernels, or None: the single switch between compiled and pure Python.

``aioproducer._speedups._kernels`` (C, built by ``pip install`` where a compiler
is present) holds compiled twins of a few per-record functions; the pure-Python
versions stay where they are as the readable reference, and are what runs when
the extension is missing or ``AIOPRODUCER_NO_EXTENSIONS`` is set to a non-empty
value (as aiohttp's ``AIOHTTP_NO_EXTENSIONS``). ``COMPILED`` tells which is active
(re-exported as ``aioproducer.protocol.records.COMPILED``).
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["COMPILED", "NO_EXTENSIONS", "kernels"]

NO_EXTENSIONS = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))

kernels: ModuleType | None = None
if not NO_EXTENSIONS:
    try:
        from . import _kernels as kernels
    except ImportError:  # not built (no compiler at install time): pure Python
        kernels = None

COMPILED = kernels is not None
