"""The contributing page's table of compiled kernels and pure twins is generated, and true.

``docs/hooks/twin_reference.py`` finds every ``kernels.X`` choice point of the package with
``ast``; these tests check it on the real package (every choice point has its reference, its C
source and a test) and on small synthetic packages (a choice point without a reference, or a
kernel no C file defines, is a warning, which fails ``mkdocs build --strict``).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "hooks" / "twin_reference.py"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    if not HOOK.is_file():
        pytest.fail(f"{HOOK} is missing")
    spec = importlib.util.spec_from_file_location("twin_reference", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, modules: dict[str, str], c_names: list[str]) -> Path:
    pkg = tmp_path / "aioproducer"
    (pkg / "_speedups").mkdir(parents=True)
    for name, text in modules.items():
        (pkg / name).write_text(text)
    methods = "\n".join(f'    {{"{n}", f_{n}, METH_O, NULL}},' for n in c_names)
    (pkg / "_speedups" / "_k.c").write_text(f"static PyMethodDef m[] = {{\n{methods}\n}};\n")
    return pkg


def test_every_choice_point_of_the_package_has_its_twin_and_a_test(hook: ModuleType) -> None:
    found = hook.twins()
    kernels = {t.kernel for t in found}
    # The ones every release has had; a rename must keep the table's reach.
    assert {"murmur2", "RecordBatchBuilder", "RecordHandle", "BatchOutcome"} <= kernels
    for twin in found:
        assert twin.pure is not None, twin
        assert hook.c_source(twin.kernel) is not None, twin
    table = hook.twin_table()
    assert "| `-` |" not in table and "`None`" not in table
    assert "`aioproducer/engine/partitioner.py` | `murmur2` |" in table
    assert "`_murmur2_pure`" in table


def test_the_conventions_find_each_kind_of_reference(hook: ModuleType, tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "a.py": "def f_pure(x):\n    return x\n\nf = f_pure if kernels is None else kernels.f\n",
            "b.py": (
                "def g(x):\n    return x\n\n_g_pure = g\nif kernels is not None:\n"
                "    g = kernels.g\n"
            ),
            "c.py": (
                "class C:\n    def _m_pure(self):\n        pass\n    m = _m_pure\n\n"
                "if kernels is not None:\n    C.m = kernels.bind_m(C)\n"
            ),
            "d.py": (
                "def _n(col):\n    return col\n\ndef _plain_n(col):\n"
                "    if kernels is None:\n        return None\n    return kernels.n(col)\n"
            ),
        },
        ["f", "g", "bind_m", "n"],
    )
    found = {(t.chooses, t.kernel): t.pure for t in hook.twins(pkg)}
    assert found == {
        ("f", "f"): "f_pure",
        ("g", "g"): "_g_pure",
        ("C.m", "bind_m"): "C._m_pure",
        ("_plain_n()", "n"): "_n",
    }


def test_a_choice_without_reference_or_c_source_warns(
    hook: ModuleType,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pkg = _package(
        tmp_path,
        {
            "a.py": "if kernels is not None:\n    h = kernels.h\n",
            "b.py": "def k_pure(x):\n    return x\n\nk = k_pure if kernels is None else kernels.k\n",
        },
        ["h"],
    )
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.twin_reference"):
        hook.twin_table(pkg)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("no pure-Python reference found for kernels.h" in w for w in warnings), warnings
    assert any("kernels.k, which no C source" in w for w in warnings), warnings
    assert len(warnings) == 2, warnings
