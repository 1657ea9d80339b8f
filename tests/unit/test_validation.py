"""Input checks that run before anything is buffered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aioproducer
from aioproducer import errors
from aioproducer.engine.validation import check_headers, check_topic, to_bytes
from tests.support.extras import require


@pytest.mark.parametrize("name", ["orders", "a.b-c_D9", "x" * 249])
def test_legal_topics(name: str) -> None:
    check_topic(name)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("", "empty"),
        (".", "cannot be"),
        ("..", "cannot be"),
        ("x" * 250, "249"),
        ("has space", "illegal characters"),
        ("ünïcode", "illegal characters"),
        (b"bytes", "must be a str"),
        (None, "must be a str"),
    ],
)
def test_illegal_topics(name: object, match: str) -> None:
    with pytest.raises(errors.InvalidTopicError, match=match):
        check_topic(name)


def test_to_bytes() -> None:
    assert to_bytes(b"a", "value", None, "t") == b"a"
    assert to_bytes(bytearray(b"a"), "value", None, "t") == b"a"
    assert to_bytes(memoryview(b"ab"), "key", None, "t") == b"ab"
    assert to_bytes(None, "value", None, "t") is None
    assert to_bytes("é", "value", lambda s: s.encode(), "t") == "é".encode()
    with pytest.raises(TypeError, match="value must be bytes-like"):
        to_bytes("text", "value", None, "t")
    with pytest.raises(TypeError, match="key must be bytes-like"):
        to_bytes(5, "key", None, "t")
    with pytest.raises(TypeError, match="serializer returned int"):
        to_bytes("x", "value", lambda s: 5, "t")
    with pytest.raises(errors.SerializationError, match="value serializer failed"):
        to_bytes("x", "value", lambda s: 1 / 0, "t")


def test_headers() -> None:
    assert check_headers([("a", b"1"), ("b", None), ("c", bytearray(b"3"))]) == [
        ("a", b"1"),
        ("b", None),
        ("c", b"3"),
    ]
    for bad, match in [
        ({"a": b"1"}, "sequence"),
        ([("a",)], r"headers\[0\]"),
        ([(1, b"x")], "name must be str"),
        ([("a", "text")], "value must be bytes"),
    ]:
        with pytest.raises(TypeError, match=match):
            check_headers(bad)


@pytest.mark.slow  # one mypy run over the package
def test_type_hints_accept_a_null_header_value(tmp_path: Path) -> None:
    # Kafka headers may have a null value (KIP-82; Java's Header.value() may be
    # null) and check_headers accepts None: the public type hints must say so.
    api = require("mypy.api", extra="test")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from aioproducer import Producer\n"
        "from aioproducer.types import ProducerRecord\n"
        "async def main(p: Producer) -> None:\n"
        '    await p.send("t", b"v", headers=[("trace", b"1"), ("none", None)])\n'
        '    await p.enqueue("t", b"v", headers=[("none", None)])\n'
        'ProducerRecord("t", b"v", headers=[("none", None)])\n'
        'ProducerRecord("t", b"v", headers=[("bad", 1)])\n'
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
    lines = sorted(int(m.group(1)) for m in re.finditer(r"probe\.py:(\d+): error: ", out))
    assert lines == [7], out + err  # only the int header value is refused
