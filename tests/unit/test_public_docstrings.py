"""Every public name a user reaches has a docstring (help(), IDEs and the API reference show it).

The walk covers ``aioproducer.__all__`` (the ``errors`` module's ``__all__``
included), ``aioproducer.testing.__all__``, the integrations' ``__all__`` and
the Spark data source's, and each public class's own public methods and
properties. Members inherited from outside aioproducer (``Exception``'s,
``dict``'s) are the standard library's to document.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

MODULES = [
    "aioproducer",
    "aioproducer.errors",
    "aioproducer.testing",
    "aioproducer.testing.pytest_plugin",
    "aioproducer.integrations.aiohttp",
    "aioproducer.integrations.fastapi",
    "aioproducer.telemetry.prometheus",
    "aioproducer.telemetry.opentelemetry",
    "aioproducer.spark",
]
# Types the public API hands out or takes, defined in modules without a public __all__ of their own.
TYPES = [
    "aioproducer.types.FailedRecords",
    "aioproducer.types.ProducerInterceptor",
    "aioproducer.types.ProducerRecord",
    "aioproducer.types.MetricName",
    "aioproducer.testing.mock.MockRecord",
]
# Importing these needs an optional extra; without it their names cannot be reached.
OPTIONAL = {
    "aioproducer.integrations.aiohttp": "aiohttp",
    "aioproducer.telemetry.prometheus": "prometheus_client",
    "aioproducer.telemetry.opentelemetry": "opentelemetry",
    "aioproducer.spark": "pyspark",
}


def _module(name: str) -> ModuleType | None:
    needs = OPTIONAL.get(name)
    if needs is not None:
        try:
            importlib.import_module(needs)
        except ImportError:
            return None
    return importlib.import_module(name)


def _own_members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties that ``cls`` or an aioproducer base defines."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith("aioproducer"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                yield f"{klass.__qualname__}.{name}", value


def _exported() -> Iterator[tuple[str, str, Any]]:
    for module_name in MODULES:
        module = _module(module_name)
        if module is not None:
            for name in getattr(module, "__all__", []):
                yield module_name, name, getattr(module, name)
    for dotted in TYPES:
        module_name, name = dotted.rsplit(".", 1)
        yield module_name, name, getattr(importlib.import_module(module_name), name)


def _documented(obj: Any) -> bool:
    doc = (obj.__doc__ or "").strip()  # not inspect.getdoc: it borrows a base class's
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return False  # the signature that @dataclass or NamedTuple writes in its place
    return bool(doc)


def public_objects() -> Iterator[tuple[str, Any]]:
    seen: set[int] = set()
    for module_name, name, obj in _exported():
        if id(obj) in seen or not (
            inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)
        ):
            continue  # constants (ERROR_TABLE, PRODUCER...) are documented where defined
        seen.add(id(obj))
        yield f"{module_name}.{name}", obj
        if inspect.isclass(obj):
            for member_name, member in _own_members(obj):
                if id(member) not in seen:
                    seen.add(id(member))
                    yield f"{module_name}.{member_name}", member


def test_the_walk_reaches_the_main_entry_points() -> None:
    names = {name for name, _ in public_objects()}
    assert "aioproducer.Producer.send" in names
    assert "aioproducer.BulkResult.describe_errors" in names
    assert "aioproducer.testing.MockCluster.resume_broker" in names


def test_every_public_name_has_a_docstring() -> None:
    missing = [name for name, obj in public_objects() if not _documented(obj)]
    if missing:
        pytest.fail(f"{len(missing)} public names have no docstring:\n  " + "\n  ".join(missing))
