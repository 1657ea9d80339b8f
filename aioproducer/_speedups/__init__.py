"""The compiled kernels, or None: the single switch between compiled and pure Python.

``aioproducer._speedups._kernels`` (C, built by ``pip install`` where a compiler
is present) holds compiled twins of a few per-record functions (record
encoding, murmur2, completing a batch's futures, the unkeyed shortcut's
append); the pure-Python
versions stay where they are as the readable reference, and are what runs when
the extension is missing or ``AIOPRODUCER_NO_EXTENSIONS`` is set to a non-empty
value (as aiohttp's ``AIOHTTP_NO_EXTENSIONS``). ``COMPILED`` tells which is active
(re-exported as ``aioproducer.protocol.records.COMPILED``).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["COMPILED", "NO_EXTENSIONS", "kernels"]

NO_EXTENSIONS = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))


def _load() -> ModuleType | None:
    if NO_EXTENSIONS:
        return None
    try:
        return importlib.import_module("aioproducer._speedups._kernels")
    except ImportError:  # not built (no compiler at install time): pure Python
        return None


# The C module (signatures in _kernels.pyi), or None for the pure-Python path.
kernels: ModuleType | None = _load()

COMPILED = kernels is not None
