"""The documentation site builds without a warning, and its generated pages miss nothing.

``mkdocs build --strict`` turns every warning into a failure: a broken link,
a page left out of the navigation, a docstring mkdocstrings cannot render, or
a client error class without its section on the troubleshooting page (the
hook in ``docs/hooks/error_reference.py`` warns about it). Without MkDocs the
build is skipped, except in CI (``CI=true``), where the ``docs`` extra must be
installed.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from types import MappingProxyType, ModuleType

import pytest

from aioproducer import errors
from aioproducer.config import ProducerConfig

ROOT = Path(__file__).resolve().parents[2]


def _load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _require_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") is not None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("MkDocs is not installed: CI must install the 'docs' extra")
    pytest.skip("MkDocs is not installed (pip install 'aioproducer[docs]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site, built once for this module with ``mkdocs build --strict``."""
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr[-6000:]}"
    yield out


def _text(page: Path) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def _all_error_classes() -> list[type]:
    hook = _load_hook("error_reference")
    return [*hook.client_error_classes(), *errors.ERROR_CODES.values()]


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "reference" / "api" / "index.html").is_file()
    # The benchmark pages written by benchmarks/ are part of the site.
    assert (site / "benchmarks" / "index.html").is_file()
    assert (site / "latency" / "index.html").is_file()


def test_the_api_page_shows_no_sphinx_role_and_parses_args_blocks(site: Path) -> None:
    html = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert not re.findall(r":(?:py:)?[a-z]+:(?:<code>|`)", html)
    assert "Args:" not in html  # Google-style sections become parameter tables
    # SchemaRegistryClient's Args: block became its parameter table.
    assert re.search(r"<code>bearer_identity_pool</code>", html)


def test_the_roles_hook_keeps_the_target_and_sphinx_tilde_form() -> None:
    hook = _load_hook("sphinx_roles")
    html = ":func:<code>time_to_switch</code> and :class:<code>~aioproducer.engine.admission.Admission</code>"
    assert hook.strip_roles(html) == "<code>time_to_switch</code> and <code>Admission</code>"


def test_every_error_class_is_on_the_troubleshooting_page(site: Path) -> None:
    page = _text(site / "troubleshooting" / "index.html")
    missing = [
        c.__name__ for c in _all_error_classes() if not re.search(rf"\b{c.__name__}\b", page)
    ]
    assert not missing, f"not on the troubleshooting page: {missing}"


def test_every_setting_is_in_the_configuration_reference(site: Path) -> None:
    html = (site / "reference" / "configuration" / "index.html").read_text(encoding="utf-8")
    fields = [f.name for f in dataclasses.fields(ProducerConfig) if f.init]
    missing = [name for name in fields if f'id="{name}"' not in html]
    assert not missing, f"not in the configuration reference: {missing}"
    for prop in ("linger.ms", "delivery.timeout.ms", "sasl.mechanism"):
        assert f"<code>{prop}</code>" in html


# The generators themselves, without MkDocs: these run everywhere.


def test_the_config_table_has_a_row_per_setting_with_its_java_name_and_default() -> None:
    hook = _load_hook("config_reference")
    table = hook.config_table()
    rows = {
        m.group(1): line
        for line in table.splitlines()
        if (m := re.search(r'<span id="(\w+)"></span>', line))
    }
    assert list(rows) == [f.name for f in dataclasses.fields(ProducerConfig) if f.init]
    assert "<code>linger.ms</code>" in rows["linger_ms"] and "<code>5</code>" in rows["linger_ms"]
    assert "<code>33554432</code> (32 MiB)" in rows["buffer_memory"]
    # A type with '|' must not split the table's cells.
    assert rows["client_id"].count(" | ") == 4
    assert "<code>ssl.truststore.location</code>" in rows["ssl_cafile"]


def test_a_field_doc_and_java_name_from_metadata_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _load_hook("config_reference")
    documented = []
    for field in hook.settings():
        if field.name == "linger_ms":
            field = copy.copy(field)
            field.metadata = MappingProxyType({"doc": "How long a batch | waits.", "java": "l.ms"})
        documented.append(field)
    monkeypatch.setattr(hook, "settings", lambda: documented)
    [row] = [line for line in hook.config_table().splitlines() if 'id="linger_ms"' in line]
    assert row.endswith("| <code>l.ms</code> | How long a batch &#124; waits. |")


def test_a_client_error_class_without_a_section_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = _load_hook("error_reference")
    page = type("Page", (), {"file": type("File", (), {"src_uri": "troubleshooting.md"})()})()
    markdown = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    assert hook.on_page_markdown(markdown, page, None, None) != markdown
    assert not caplog.records  # every client error class has its section
    stripped = markdown.replace("### SslError\n", "")
    hook.on_page_markdown(stripped, page, None, None)
    assert any("SslError" in r.getMessage() for r in caplog.records)


def test_the_layout_table_lists_every_module_with_its_docstring() -> None:
    hook = _load_hook("module_reference")
    table = hook.module_table()
    package = Path(__file__).resolve().parents[2] / "aioproducer"
    for path in package.rglob("*.py"):
        assert f"`{path.relative_to(package.parent).as_posix()}`" in table
    assert not [p for p, first in hook.modules() if not first], "modules without a docstring"
