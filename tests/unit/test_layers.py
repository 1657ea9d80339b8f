"""The package's layers import one way: a test, as the sans-I/O rule for ``protocol/`` is.

Bottom up: ``protocol`` (sans-I/O) <- ``net`` and ``sasl`` (connections, metadata, security)
<- ``engine`` (batches, accumulator, sender) <- ``bulk`` <- the facade (the ``producer``
package) <- ``testing``, ``embedded``, ``spark``, ``integrations``, ``cli``. ``config``,
``errors`` and ``telemetry`` (its ``logs`` too) are shared by all; ``types`` (the public value types) is a
leaf beside ``errors``. A lower layer never imports a higher one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aioproducer

# The package under test, installed or the checkout's (never a path beside tests/: the tests
# may run from a copy, against an installed wheel).
PACKAGE = Path(aioproducer.__file__).resolve().parent
FACADE = ("producer",)
TOP = ("testing", "embedded", "spark", "integrations", "cli")
SHARED = ("config", "errors", "telemetry")

# What each layer must not import (first component under aioproducer); "*" is
# everything but the layers ALLOWED names.
ALLOWED: dict[str, tuple[str, ...]] = {
    "protocol": ("_speedups",),  # its compiled twins
    "types": ("errors",),  # BulkSendError is a KafkaError
}
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "protocol": ("*",),
    "types": ("*",),
    "net": ("engine", "bulk", *FACADE, *TOP),
    "sasl": ("engine", "bulk", *FACADE, *TOP),
    "engine": ("bulk", *FACADE, *TOP),
    "bulk": (*FACADE, *TOP),
    # Shared by every layer, so below the engine: ``config`` may read ``net``'s
    # and ``sasl``'s settings types, never the engine's.
    **{shared: ("engine", "bulk", *FACADE, *TOP) for shared in SHARED},
    "_core": TOP,  # every module outside TOP
}


def _module(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package_dir: Path) -> set[str]:
    """Absolute names of the aioproducer modules ``path`` imports."""
    module = _module(path, package_dir)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)  # from pkg import module
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("aioproducer.")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _violations(package: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        module = _module(path, package)
        layer = _layer(module)
        rules = list(FORBIDDEN.get(layer, ()))
        if layer not in TOP:
            rules += FORBIDDEN["_core"]
        for name in sorted(_imports(path, package)):
            target = _layer(name)
            if target == layer:
                continue
            if target in ALLOWED.get(layer, ()):
                continue
            if "*" in rules or target in rules:
                out.append(f"{module} imports {name} ({layer or 'aioproducer'} -> {target})")
    return out


def test_layers_import_one_way() -> None:
    assert _violations() == []


def test_the_rule_sees_a_violation(tmp_path: Path) -> None:
    # The check is not vacuous: in a package shaped like ours, a net module
    # importing the engine and a protocol module importing errors are caught.
    package = tmp_path / "aioproducer"
    for sub in ("net", "engine", "protocol"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "net" / "conn.py").write_text("from ..engine import sender\n")
    (package / "protocol" / "codec.py").write_text("from .. import errors\n")
    (package / "engine" / "sender.py").write_text("from ..net import conn\n")
    assert _violations(package) == [
        "aioproducer.net.conn imports aioproducer.engine (net -> engine)",
        "aioproducer.net.conn imports aioproducer.engine.sender (net -> engine)",
        "aioproducer.protocol.codec imports aioproducer.errors (protocol -> errors)",
    ]
