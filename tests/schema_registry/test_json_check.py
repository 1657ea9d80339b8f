"""The compiled JSON Schema check answers as jsonschema does, on generated values, per draft."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.schema_registry.json_check import compile_check

jsonschema = pytest.importorskip("jsonschema")

NAMES = ["id", "name", "tags", "kind", "n", "extra"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 300),
    st.floats(-5, 300, allow_nan=False),
    st.sampled_from([1.0, 2.5, 0.0, True, False, 0, 1]),
    st.text(alphabet="ab-1_x", max_size=6),
    st.sampled_from(["a", "b", "order", "A1", ""]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(NAMES), inner, max_size=5),
    ),
    max_leaves=12,
)

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 0, "exclusiveMaximum": 100},
            "name": {"type": "string", "minLength": 1, "maxLength": 4, "pattern": "^[ab]"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "kind": {"enum": ["a", "b", None]},
            "n": {"type": ["number", "null"], "maximum": 10.5},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "minProperties": 1,
        "maxProperties": 3,
        "properties": {"name": {"const": "order"}},
    },
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]},
    {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    {"allOf": [{"type": "array", "minItems": 1}, {"items": {"not": {"type": "null"}}}]},
    {
        "type": "array",
        "items": {"type": "object", "required": ["n"], "properties": {"n": {"type": "boolean"}}},
    },
    {
        "properties": {"id": False, "name": True},
        "title": "t",
        "format": "email",
        "x-vendor": {"type": "string"},
    },
]
DRAFTS = [
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft202012Validator,
]


@pytest.mark.parametrize("draft", DRAFTS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@settings(max_examples=300, deadline=None)
@given(value=values)
def test_the_check_agrees_with_jsonschema(draft: Any, schema: dict[str, Any], value: Any) -> None:
    check = compile_check(schema, draft)
    if check is None:  # draft 4's exclusiveMaximum modifies maximum: left to jsonschema
        assert draft is jsonschema.Draft4Validator and "exclusiveMaximum" in str(schema)
        return
    assert check(value) == draft(schema).is_valid(value)


def test_float_integers_follow_the_draft() -> None:
    schema = {"type": "integer"}
    assert compile_check(schema, jsonschema.Draft7Validator)(1.0) is True  # type: ignore[misc]
    assert compile_check(schema, jsonschema.Draft4Validator)(1.0) is False  # type: ignore[misc]


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}},
        {"type": "array", "uniqueItems": True},
        {"type": "array", "items": [{"type": "string"}]},
        {"if": {"type": "string"}, "then": {"minLength": 2}},
        {"properties": {"a": {"dependencies": {"b": ["c"]}}}},
        {"enum": [1, "a"]},
        {"maximum": 5, "exclusiveMaximum": True},
        {"patternProperties": {"^a": {"type": "string"}}},
    ],
)
def test_keywords_it_does_not_check_leave_every_value_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema, jsonschema.Draft7Validator) is None


class _Client:
    """Enough of a registry client for a serializer that is never prepared."""


def _encode(schema: dict[str, Any], value: Any) -> bytes:
    from aioproducer.schema_registry import JsonSchemaSerializer

    serializer = JsonSchemaSerializer(_Client(), json.dumps(schema))  # type: ignore[arg-type]
    return serializer._encoder(serializer._writer)(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}},  # compiled
        {
            "type": "object",
            "properties": {"n": {"$ref": "#/definitions/small"}},  # jsonschema
            "definitions": {"small": {"type": "integer", "maximum": 3}},
        },
    ],
)
def test_the_serializer_refuses_and_explains_either_way(schema: dict[str, Any]) -> None:
    from aioproducer.schema_registry import SchemaValidationError

    assert _encode(schema, {"n": 2}) == b'{"n":2}'
    with pytest.raises(SchemaValidationError, match=r"at 'n': 4 is greater than the maximum of 3"):
        _encode(schema, {"n": 4})
