"""A fast yes/no check of a JSON value against a JSON Schema, for the common keywords.

``jsonschema`` walks the schema anew for every value, through its generic
keyword dispatch: tens of microseconds for a ten-field object. Most schemas
registered for Kafka values use a handful of keywords (``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``,
bounds, ``pattern``, ``allOf``/``anyOf``/``oneOf``/``not``), which
:func:`compile_check` turns once into nested Python closures answering
"valid?" in a few microseconds.

The check never decides alone that a value is invalid: a False sends the value
to ``jsonschema`` itself, which finds the errors and explains them. So the
only promise it must keep is that it answers True only for values
``jsonschema`` accepts. Keywords the validator class knows but this module
does not (``$ref``, ``uniqueItems``, ``if``, ``dependencies``...) make
:func:`compile_check` return None, and every value goes to ``jsonschema``;
keywords the validator class does not know are ignored, as ``jsonschema``
ignores them. ``format`` asserts nothing: the serializer's validator has no
format checker, as Confluent's has none.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any

__all__ = ["compile_check"]

Check = Callable[[Any], bool]

# Keywords that assert nothing about a value (annotations, containers of subschemas).
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "readOnly",
        "writeOnly",
        "deprecated",
        "definitions",
        "$defs",
        "format",
    }
)
_SUPPORTED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
    }
)


class _Unsupported(Exception):
    """The schema uses something this module does not check."""


def _is_number(x: Any) -> bool:
    t = type(x)
    if t is int or t is float:
        return True
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


def _type_check(name: str, float_integers: bool) -> Check:
    if name == "string":
        return lambda x: isinstance(x, str)
    if name == "object":
        return lambda x: isinstance(x, dict)
    if name == "array":
        return lambda x: isinstance(x, list)
    if name == "boolean":
        return lambda x: isinstance(x, bool)
    if name == "null":
        return lambda x: x is None
    if name == "number":
        return _is_number
    if name == "integer":
        if float_integers:  # draft 6 and later: 1.0 is an integer
            return lambda x: (
                (isinstance(x, int) and not isinstance(x, bool))
                or (isinstance(x, float) and x.is_integer())
            )
        return lambda x: isinstance(x, int) and not isinstance(x, bool)
    raise _Unsupported(f"type {name!r}")


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda x: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda x: a(x) and b(x)
    return lambda x: all(c(x) for c in checks)


def _plain_values(values: list[Any]) -> frozenset[Any]:
    """Enum/const values compared by ``in``: strings and null only (no 1 == True puzzles)."""
    if not all(v is None or isinstance(v, str) for v in values):
        raise _Unsupported("enum/const with non-string values")
    return frozenset(values)


def _member(allowed: frozenset[Any]) -> Check:
    def check(x: Any) -> bool:
        try:
            return x in allowed
        except TypeError:  # unhashable: a dict or list is none of these strings
            return False

    return check


def _bounded(holds: Callable[[Any, Any], bool], bound: float) -> Check:
    return lambda x: not _is_number(x) or holds(x, bound)


def _all_of(subs: list[Check]) -> Check:
    return lambda x: all(s(x) for s in subs)


def _any_of(subs: list[Check]) -> Check:
    return lambda x: any(s(x) for s in subs)


def _one_of(subs: list[Check]) -> Check:
    return lambda x: sum(1 for s in subs if s(x)) == 1


_COMBINE = {"allOf": _all_of, "anyOf": _any_of, "oneOf": _one_of}


class _Compiler:
    def __init__(self, validator_cls: Any) -> None:
        self.known = frozenset(getattr(validator_cls, "VALIDATORS", {}))
        checker = validator_cls.TYPE_CHECKER
        self.float_integers = bool(checker.is_type(1.0, "integer"))

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return lambda x: True
        if schema is False:
            return lambda x: False
        if not isinstance(schema, dict):
            raise _Unsupported("schema is not an object")
        for keyword in schema:
            if keyword in self.known and keyword not in _SUPPORTED | _ANNOTATIONS:
                raise _Unsupported(keyword)
            if keyword.startswith("exclusiveM") and keyword not in self.known:
                raise _Unsupported(keyword)  # draft 4: a modifier of maximum / minimum
        # A keyword this draft's validator does not know (const in draft 4, an
        # extension) is ignored, as jsonschema ignores it.
        schema = {k: v for k, v in schema.items() if k in self.known}
        checks: list[Check] = []
        if "type" in schema:
            names = schema["type"]
            names = [names] if isinstance(names, str) else names
            if not isinstance(names, list) or not names:
                raise _Unsupported("type")
            types = [_type_check(n, self.float_integers) for n in names]
            checks.append(types[0] if len(types) == 1 else (lambda x: any(t(x) for t in types)))
        if "enum" in schema:
            checks.append(_member(_plain_values(list(schema["enum"]))))
        if "const" in schema:
            checks.append(_member(_plain_values([schema["const"]])))
        checks += self._numbers(schema)
        checks += self._strings(schema)
        checks += self._arrays(schema)
        checks += self._objects(schema)
        checks += self._combinators(schema)
        return _all(checks)

    def _numbers(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        for keyword, holds in (
            ("minimum", lambda v, b: v >= b),
            ("maximum", lambda v, b: v <= b),
            ("exclusiveMinimum", lambda v, b: v > b),
            ("exclusiveMaximum", lambda v, b: v < b),
        ):
            if keyword not in schema:
                continue
            bound = schema[keyword]
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise _Unsupported(keyword)  # draft 4's boolean exclusive* among them
            out.append(_bounded(holds, bound))
        return out

    def _strings(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low is not None or high is not None:
            lo = 0 if low is None else int(low)
            hi = None if high is None else int(high)
            out.append(
                lambda x: not isinstance(x, str) or (len(x) >= lo and (hi is None or len(x) <= hi))
            )
        if "pattern" in schema:
            search = re.compile(schema["pattern"]).search
            out.append(lambda x: not isinstance(x, str) or search(x) is not None)
        return out

    def _arrays(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        if "items" in schema:
            items = schema["items"]
            if isinstance(items, list):
                raise _Unsupported("items as a list (tuple validation)")
            item = self.compile(items)
            out.append(lambda x: not isinstance(x, list) or all(map(item, x)))
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None or high is not None:
            lo = 0 if low is None else int(low)
            hi = None if high is None else int(high)
            out.append(
                lambda x: not isinstance(x, list) or (len(x) >= lo and (hi is None or len(x) <= hi))
            )
        return out

    def _objects(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(props, dict) or not isinstance(required, list):
            raise _Unsupported("properties/required")
        fields = tuple((name, self.compile(sub)) for name, sub in props.items())
        required_names = tuple(required)
        known = frozenset(props)
        extra_check = None if extra is True else self.compile(extra)
        if fields or required_names or extra_check is not None:

            def check_object(x: Any) -> bool:
                if not isinstance(x, dict):
                    return True
                for name in required_names:
                    if name not in x:
                        return False
                for name, check in fields:
                    if name in x and not check(x[name]):
                        return False
                if extra_check is not None:
                    for name, value in x.items():
                        if name not in known and not extra_check(value):
                            return False
                return True

            out.append(check_object)
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if low is not None or high is not None:
            lo = 0 if low is None else int(low)
            hi = None if high is None else int(high)
            out.append(
                lambda x: not isinstance(x, dict) or (len(x) >= lo and (hi is None or len(x) <= hi))
            )
        return out

    def _combinators(self, schema: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        for keyword in ("allOf", "anyOf", "oneOf"):
            if keyword not in schema:
                continue
            subs = [self.compile(s) for s in schema[keyword]]
            if not subs:
                raise _Unsupported(f"empty {keyword}")
            out.append(_COMBINE[keyword](subs))
        if "not" in schema:
            negated = self.compile(schema["not"])
            out.append(lambda x: not negated(x))
        return out


def compile_check(schema: Any, validator_cls: Any) -> Check | None:
    """A check answering True only for values ``validator_cls(schema)`` accepts; None if the
    schema uses a keyword this module does not check (then validate every value with it)."""
    try:
        return _Compiler(validator_cls).compile(schema)
    except (_Unsupported, TypeError, ValueError, re.error):
        return None
