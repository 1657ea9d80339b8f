"""Input checks that run before anything is buffered."""

from __future__ import annotations

import pytest

from aioproducer import errors
from aioproducer.validation import check_headers, check_topic, to_bytes


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
