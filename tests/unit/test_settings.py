"""Every setting is a typed keyword of Producer, described once, in ProducerConfig.

``ProducerConfig``'s fields are the source: each carries its one-line doc and
Java property name in ``field.metadata`` (what the configuration reference is
generated from). ``Producer.__init__``'s signature and docstring copy them;
these tests make a copy that drifts fail.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import textwrap
import typing
from pathlib import Path

import pytest

import aioproducer
from aioproducer import Producer, ProducerConfig
from aioproducer.config import JAVA_PROPERTY_NAMES
from aioproducer.errors import ConfigurationError
from aioproducer.net.security_properties import translate_security_property
from tests.support.extras import require

FIELDS = dataclasses.fields(ProducerConfig)


def _parameters() -> list[inspect.Parameter]:
    """``Producer.__init__``'s parameters after ``self`` (what help(Producer.__init__) shows)."""
    return list(inspect.signature(Producer.__init__).parameters.values())[1:]


def test_the_producer_signature_is_the_config_fields() -> None:
    params = _parameters()
    assert [p.name for p in params] == [f.name for f in FIELDS]
    assert [p.default for p in params] == [f.default for f in FIELDS]
    # The same annotations, as written and as types.
    assert [p.annotation for p in params] == [f.type for f in FIELDS]
    hints = typing.get_type_hints(Producer.__init__)
    field_types = typing.get_type_hints(ProducerConfig)
    assert [hints[p.name] for p in params] == [field_types[f.name] for f in FIELDS]
    # bootstrap_servers may be given by position; every other setting by name only.
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])


@pytest.mark.xfail(
    sys.version_info < (3, 11),
    strict=True,
    reason="Python 3.10's inspect.signature(cls) takes the settings guard's __new__(*args, **kwargs) "
    "over __init__ (3.11 takes the one nearer the class)",
)
def test_the_class_signature_is_the_constructors() -> None:
    assert list(inspect.signature(Producer).parameters.values()) == _parameters()


def test_every_setting_is_a_field_with_a_default_and_nothing_else_is() -> None:
    for f in FIELDS:
        assert f.init, f.name
        # A plain default (the signature repeats it), never a default_factory.
        assert f.default is not dataclasses.MISSING, f.name
        assert f.default_factory is dataclasses.MISSING, f.name
    # What validate() derives is not a setting (nor a field the reference would list).
    names = {f.name for f in FIELDS}
    assert names.isdisjoint({"acks_value", "codec", "idempotent", "security"})
    cfg = ProducerConfig(acks=1).validate()
    assert (cfg.acks_value, cfg.idempotent) == (1, False)


def test_every_setting_has_a_one_line_doc_and_its_java_property() -> None:
    for f in FIELDS:
        doc = f.metadata["doc"]
        assert isinstance(doc, str) and doc.endswith(".") and "\n" not in doc, f.name
        assert 10 < len(doc) < 200, f.name
        java = f.metadata["java"]
        assert java is None or isinstance(java, str), f.name
        if java is None:
            continue
        # The Java name is one from_config takes for this very setting.
        translated = translate_security_property(java, "https" if "identification" in java else "x")
        mapped = set(translated) if translated is not None else {JAVA_PROPERTY_NAMES.get(java)}
        assert f.name in mapped, (f.name, java)
    assert {f.name: f.metadata["java"] for f in FIELDS}["linger_ms"] == "linger.ms"


def _documented_settings(doc: str) -> dict[str, str]:
    """The ``Args:`` entries of a Google-style docstring, continuation lines joined."""
    args = inspect.cleandoc(doc).split("\nArgs:\n", 1)[1]
    entries: dict[str, str] = {}
    name = ""
    for line in textwrap.dedent(args).splitlines():
        match = re.match(r"(\w+): (.*)", line)
        if match:
            name = match.group(1)
            entries[name] = match.group(2)
        elif line.strip():
            entries[name] += " " + line.strip()
    return entries


def test_the_docstring_lists_every_setting_with_its_doc() -> None:
    doc = Producer.__init__.__doc__
    assert doc is not None and "Args:" in doc, "Producer.__init__ has no settings list"
    expected = {f.name: f.metadata["doc"] for f in FIELDS}
    documented = _documented_settings(doc)
    if documented != expected:
        wrapped = "\n".join(
            textwrap.fill(
                f"{n}: {d}",
                100,
                initial_indent=" " * 12,
                subsequent_indent=" " * 16,
                break_on_hyphens=False,
                break_long_words=False,
            )
            for n, d in expected.items()
        )
        pytest.fail(
            "the Args of Producer.__init__ differ from ProducerConfig; they should be:\n" + wrapped
        )


def test_a_misspelt_setting_names_the_closest_one() -> None:
    with pytest.raises(
        ConfigurationError, match=r"unknown producer setting 'lingr_ms'; did you mean 'linger_ms'\?"
    ):
        Producer("a:1", lingr_ms=5)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match=r"'lingr_ms'; did you mean 'linger_ms'\?"):
        Producer.from_config({"bootstrap.servers": "a:1"}, lingr_ms=5)
    with pytest.raises(ConfigurationError, match="one positional argument"):
        Producer("a:1", 5)  # type: ignore[misc]


def test_a_java_property_name_as_keyword_points_to_from_config() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"'linger\.ms' is a Java property name: pass linger_ms=.*Producer\.from_config",
    ):
        Producer("a:1", **{"linger.ms": 5})
    with pytest.raises(
        ConfigurationError, match=r"'linger\.msec'.*did you mean 'linger\.ms'.*from_config"
    ):
        Producer("a:1", **{"linger.msec": 5})
    # The values are never quoted: a mistyped name may carry a secret.
    with pytest.raises(ConfigurationError) as caught:
        Producer("a:1", **{"sasl.jaas.config": "password=hunter2"})
    assert "hunter2" not in str(caught.value) and "from_config" in str(caught.value)
    assert Producer.from_config({"linger.ms": "7"}).config.linger_ms == 7


def test_a_subclass_may_take_keywords_of_its_own() -> None:
    class Named(Producer):
        def __init__(self, name: str, **settings: typing.Any) -> None:
            super().__init__(**settings)
            self.name = name

    assert Named("x", linger_ms=3).config.linger_ms == 3
    with pytest.raises(ConfigurationError, match="did you mean 'linger_ms'"):
        Named("x", lingr_ms=3)


@pytest.mark.slow
def test_mypy_checks_the_settings(tmp_path: Path) -> None:
    api = require("mypy.api", extra="test")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from aioproducer import Producer\n"
        "Producer(lingr_ms=5)\n"
        'Producer(linger_ms="x")\n'
        'Producer("a:1", linger_ms=5, acks="all", compression="lz4", client_id=None)\n'
    )
    root = Path(aioproducer.__file__).resolve().parents[1]
    config = tmp_path / "mypy.ini"
    config.write_text(f"[mypy]\nmypy_path = {root}\n")
    out, err, _status = api.run(
        [
            str(probe),
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            "--show-error-codes",
        ]
    )
    lines = {int(m.group(1)): m.group(0) for m in re.finditer(r"probe\.py:(\d+): error: .*", out)}
    assert set(lines) == {2, 3}, out + err
    assert '"lingr_ms"' in lines[2] and "call-arg" in lines[2]
    assert '"linger_ms"' in lines[3] and "arg-type" in lines[3]
