"""The package's outer rooms use only its public surface: a test over their imports.

``aioproducer/__init__``, ``spark``, ``cli``, ``integrations`` and ``schema_registry`` are
built the way a user's code is: from names in ``aioproducer.__all__``, ``aioproducer.errors``,
``aioproducer.types`` (the public value types), ``aioproducer.testing``, the public faces of
``aioproducer.schema_registry`` and ``aioproducer.embedded`` (names in their ``__all__``), and
their own subpackage. So what they need is public API, documented, and the engine's inside
can change without breaking them. The package face itself imports only names it hands on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aioproducer

# The package under test, installed or the checkout's (see test_layers.py).
PACKAGE = Path(aioproducer.__file__).resolve().parent
OUTER = ("spark", "cli", "integrations", "schema_registry")
# Modules whose every name is public.
PUBLIC_MODULES = ("aioproducer.errors", "aioproducer.types", "aioproducer.testing")
# Public subpackages: the names in their face's ``__all__``.
PUBLIC_FACES = ("aioproducer", "aioproducer.schema_registry", "aioproducer.embedded")


def _module(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _face_names(package: Path, face: str) -> frozenset[str]:
    """The ``__all__`` of ``face`` (a package of ``package``'s tree), read without importing it."""
    init = package.parent.joinpath(*face.split("."), "__init__.py")
    if not init.exists():
        return frozenset()
    for node in ast.parse(init.read_text(), str(init)).body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else (node.target if isinstance(node, ast.AnnAssign) else None)
        )
        if isinstance(target, ast.Name) and target.id == "__all__" and node.value is not None:
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _imported(path: Path, package: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each aioproducer import of ``path``; name None for ``import x``."""
    module = _module(path, package)
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.extend((source, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
    root = package.name
    return [(m, n) for m, n in found if m == root or m.startswith(root + ".")]


def _public(source: str, name: str | None, own: str, package: Path) -> bool:
    faces = {face: _face_names(package, face) for face in PUBLIC_FACES}
    if source == own or source.startswith(own + "."):
        return True
    if any(source == m or source.startswith(m + ".") for m in PUBLIC_MODULES):
        return True
    if name is None:  # ``import aioproducer``: the package, every use through its face
        return source == "aioproducer"
    return source in faces and (name in faces[source] or f"{source}.{name}" in PUBLIC_MODULES)


def _violations(package: Path = PACKAGE) -> list[str]:
    out = []
    face = package / "__init__.py"
    exported = _face_names(package, "aioproducer")
    for source, name in _imported(face, package):
        # The face hands on what it imports: a name it imports and does not
        # export would be an internal reached for, not a public one handed on.
        if name is None or name not in exported:
            out.append(f"aioproducer imports {source}.{name} (not in aioproducer.__all__)")
    for outer in OUTER:
        own = f"aioproducer.{outer}"
        for path in sorted((package / outer).rglob("*.py")):
            module = _module(path, package)
            for source, name in _imported(path, package):
                if not _public(source, name, own, package):
                    what = source if name is None else f"{source}.{name}"
                    out.append(f"{module} imports {what} (internal)")
    return sorted(set(out))


def test_outer_rooms_import_only_public_names() -> None:
    assert _violations() == []


def test_the_rule_sees_an_internal_import(tmp_path: Path) -> None:
    # Not vacuous: in a package shaped like ours, reaching into the engine or a
    # schema_registry module, or importing a name the face does not export, is caught;
    # the public routes are not.
    package = tmp_path / "aioproducer"
    for sub in ("spark", "cli", "engine", "schema_registry", "testing"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "schema_registry" / "__init__.py").write_text('__all__ = ["AvroSerializer"]\n')
    (package / "__init__.py").write_text(
        "from . import errors\nfrom .engine.batch import Batch\nfrom .producer import Producer\n"
        '__all__ = ["Producer", "errors"]\n'
    )
    (package / "spark" / "writer.py").write_text(
        "from .. import Producer, errors\n"
        "from ..engine.transactions import PreparedTransaction\n"
        "from ..schema_registry import AvroSerializer\n"
        "from ..schema_registry.config import PREFIX\n"
        "from ..types import BulkResult\n"
        "from .options import SinkOptions\n"
    )
    (package / "cli" / "perf.py").write_text(
        "def run():\n"
        "    from .. import Sender\n"
        "    import aioproducer.engine.sender\n"
        "    from ..testing import MockCluster\n"
    )
    assert _violations(package) == [
        "aioproducer imports aioproducer.engine.batch.Batch (not in aioproducer.__all__)",
        "aioproducer.cli.perf imports aioproducer.Sender (internal)",
        "aioproducer.cli.perf imports aioproducer.engine.sender (internal)",
        (
            "aioproducer.spark.writer imports "
            "aioproducer.engine.transactions.PreparedTransaction (internal)"
        ),
        "aioproducer.spark.writer imports aioproducer.schema_registry.config.PREFIX (internal)",
    ]
