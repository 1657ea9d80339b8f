"""Whether an Avro reader schema can read data written with a writer schema.

The rules of the Avro specification's "Schema Resolution" section, which the
Schema Registry applies for BACKWARD (the new schema reads old data) and
FORWARD (old schemas read new data): matching primitives or a promotion
(int -> long/float/double, long -> float/double, float -> double,
string <-> bytes); records by name, each reader field present in the writer
(readable) or with a default; enum symbols of the writer known to the reader
(or a reader default); arrays and maps by their items/values; fixed by name
and size; unions branch by branch. Logical types follow their underlying type.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["avro_compatible"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def avro_compatible(*, reader: str | Any, writer: str | Any) -> bool:
    """True when data written with ``writer`` resolves against ``reader`` (JSON text or parsed)."""
    r = json.loads(reader) if isinstance(reader, str) else reader
    w = json.loads(writer) if isinstance(writer, str) else writer
    return _Checker(_names(r), _names(w)).can_read(r, w)


def _names(schema: Any, namespace: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Named types (record, enum, fixed) by full and short name."""
    out = {} if out is None else out
    if isinstance(schema, list):
        for branch in schema:
            _names(branch, namespace, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name = str(schema.get("name", ""))
            ns = schema.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
            short = name.rsplit(".", 1)[-1]
            out[short] = schema
            out[f"{ns}.{short}" if ns else short] = schema
            namespace = ns or ""
            for f in schema.get("fields", ()):
                _names(f.get("type"), namespace, out)
        elif kind == "array":
            _names(schema.get("items"), namespace, out)
        elif kind == "map":
            _names(schema.get("values"), namespace, out)
        elif isinstance(kind, (dict, list)):
            _names(kind, namespace, out)
    return out


def _short(name: Any) -> str:
    return str(name).rsplit(".", 1)[-1]


class _Checker:
    def __init__(self, rnames: dict[str, Any], wnames: dict[str, Any]) -> None:
        self.rnames, self.wnames = rnames, wnames
        self.assumed: set[tuple[str, str]] = set()  # recursive records: assume, then verify

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        while True:
            if isinstance(schema, str) and schema not in PRIMITIVES and schema in names:
                schema = names[schema]
            elif isinstance(schema, dict) and not isinstance(schema.get("type"), str):
                schema = schema.get("type")
            elif isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
                schema = schema["type"]  # {"type": "long", "logicalType": ...}
            elif (
                isinstance(schema, dict)
                and schema.get("type") in names
                and schema.get("type") not in ("record", "enum", "fixed", "array", "map", "error")
            ):
                schema = names[schema["type"]]
            else:
                return schema

    def can_read(self, reader: Any, writer: Any) -> bool:
        r = self._resolve(reader, self.rnames)
        w = self._resolve(writer, self.wnames)
        if isinstance(w, list):  # every branch the writer may have used must resolve
            return all(self.can_read(r, branch) for branch in w)
        if isinstance(r, list):
            return any(self.can_read(branch, w) for branch in r)
        if isinstance(r, str) or isinstance(w, str):
            if not (isinstance(r, str) and isinstance(w, str)):
                return False
            return r == w or r in PROMOTIONS.get(w, ())
        rk, wk = r.get("type"), w.get("type")
        if rk == "error":
            rk = "record"
        if wk == "error":
            wk = "record"
        if rk != wk:
            return False
        if rk == "array":
            return self.can_read(r.get("items"), w.get("items"))
        if rk == "map":
            return self.can_read(r.get("values"), w.get("values"))
        if _short(r.get("name")) != _short(w.get("name")) and _short(w.get("name")) not in {
            _short(a) for a in r.get("aliases", ())
        }:
            return False
        if rk == "fixed":
            return bool(r.get("size") == w.get("size"))
        if rk == "enum":
            return "default" in r or set(w.get("symbols", ())) <= set(r.get("symbols", ()))
        return self._record(r, w)

    def _record(self, r: dict[str, Any], w: dict[str, Any]) -> bool:
        key = (str(r.get("name")), str(w.get("name")))
        if key in self.assumed:
            return True
        self.assumed.add(key)
        written = {f["name"]: f for f in w.get("fields", ())}
        for field in r.get("fields", ()):
            source = written.get(field["name"])
            if source is None:
                for alias in field.get("aliases", ()):
                    source = written.get(alias)
                    if source is not None:
                        break
            if source is None:
                if "default" not in field:
                    return False
            elif not self.can_read(field["type"], source["type"]):
                return False
        return True
