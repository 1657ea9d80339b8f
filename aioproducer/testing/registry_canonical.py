"""When the Schema Registry takes two schema texts for the same schema.

Registering a schema the subject already has returns its id, and a lookup
(``POST /subjects/{subject}``) finds it, when the texts are the same schema,
not the same characters. Confluent's registry parses the schema and compares
(``AbstractSchemaRegistry.lookUpSchemaUnderSubject``, ``ParsedSchema.equivalent``):

- **Avro** (``AvroSchema.equivalent``): Avro's ``Schema.equals`` on the parsed
  schemas plus their docs, aliases and enum defaults. So whitespace, key order,
  ``"string"`` against ``{"type": "string"}`` and a name given by namespace
  against its full name do not matter; field defaults, ``order``, docs, aliases
  (as a set), logical types and other attributes do. This is stricter than the
  specification's Parsing Canonical Form, which drops defaults and docs: a new
  version that only adds a default is a new schema to the registry.
- **JSON Schema** (``JsonSchema.canonicalString``): the document re-written by
  Jackson, so whitespace does not matter and key order does; with
  ``normalize=true`` keys are sorted (``JsonSchema.normalize``).
- **Protobuf** (``ProtobufSchema.canonicalString``): the parsed file printed
  again. A base64 ``FileDescriptorProto`` (what confluent-kafka and this
  project's serializer register) is compared as the descriptor without its
  source locations; ``.proto`` text by its tokens, comments included, so layout
  does not matter. (Text and the descriptor of the same file are not matched
  here: that would need a ``.proto`` parser.)
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

__all__ = ["canonical"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# Attributes Avro's parser gives a meaning to; every other one is a property
# (``logicalType``, ``precision``, custom ones), which ``Schema.equals`` compares.
_SCHEMA_RESERVED = frozenset(
    {
        "doc",
        "fields",
        "items",
        "name",
        "namespace",
        "size",
        "symbols",
        "values",
        "type",
        "aliases",
        "default",
    }
)
_FIELD_RESERVED = frozenset({"name", "type", "doc", "default", "aliases", "order"})
_PROTO_TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z0-9_.+-]+|\S',
    re.DOTALL,
)


def canonical(kind: str, text: str, *, normalize: bool = False) -> str:
    """A key equal for two texts exactly when the registry takes them as one schema.

    Raises ValueError (a json error too) or TypeError for a text the registry could not parse.
    """
    if kind == "AVRO":
        return json.dumps(_avro(json.loads(text), ""), sort_keys=True, separators=(",", ":"))
    if kind == "JSON":
        return json.dumps(
            json.loads(text), sort_keys=normalize, separators=(",", ":"), ensure_ascii=False
        )
    if kind == "PROTOBUF":
        return _protobuf(text)
    raise ValueError(f"unknown schema type {kind}")


# -- Avro ------------------------------------------------------------------------------


def _full(name: Any, namespace: str) -> str:
    text = str(name)
    if "." in text or not namespace:
        return text
    return f"{namespace}.{text}"


def _space(full: str) -> str:
    return full.rsplit(".", 1)[0] if "." in full else ""


def _props(schema: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in reserved}


def _named(schema: dict[str, Any], namespace: str) -> tuple[dict[str, Any], str]:
    """The name, doc and aliases of a record, enum or fixed; and the namespace inside it."""
    own = schema.get("namespace")
    full = _full(schema.get("name", ""), namespace if own is None else str(own))
    inner = _space(full)
    out: dict[str, Any] = {"type": schema["type"], "name": full}
    if schema.get("doc") is not None:
        out["doc"] = schema["doc"]
    if schema.get("aliases"):
        out["aliases"] = sorted({_full(a, inner) for a in schema["aliases"]})
    return out, inner


def _avro(schema: Any, namespace: str) -> Any:
    """The parsed schema in one spelling: full names, primitives by name, no formatting.

    A named type is written where it is first defined (its definition always
    comes before any use, in the same traversal order for any key order) and
    by full name after, as Avro itself writes a schema.
    """
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else _full(schema, namespace)
    if isinstance(schema, list):
        return [_avro(branch, namespace) for branch in schema]
    if not isinstance(schema, dict):
        raise TypeError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _avro(kind, namespace)
    props = _props(schema, _SCHEMA_RESERVED)
    if kind in PRIMITIVES:
        return {"type": kind, **props} if props else kind
    if kind in ("record", "error"):
        out, inner = _named(schema, namespace)
        out["fields"] = [_field(f, inner) for f in schema.get("fields", ())]
    elif kind == "enum":
        out, _ = _named(schema, namespace)
        out["symbols"] = list(schema.get("symbols", ()))
        if "default" in schema:
            out["default"] = schema["default"]
    elif kind == "fixed":
        out, _ = _named(schema, namespace)
        out["size"] = schema.get("size")
    elif kind == "array":
        out = {"type": "array", "items": _avro(schema.get("items"), namespace)}
    elif kind == "map":
        out = {"type": "map", "values": _avro(schema.get("values"), namespace)}
    else:  # {"type": "SomeName"}: a reference to a named type
        return _full(kind, namespace)
    out.update(props)
    return out


def _field(field: dict[str, Any], namespace: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.get("name"), "type": _avro(field.get("type"), namespace)}
    if "default" in field:
        out["default"] = field["default"]
    if field.get("order", "ascending") != "ascending":
        out["order"] = field["order"]
    if field.get("doc") is not None:
        out["doc"] = field["doc"]
    if field.get("aliases"):
        out["aliases"] = sorted(set(field["aliases"]))
    out.update(_props(field, _FIELD_RESERVED))
    return out


# -- Protobuf --------------------------------------------------------------------------


def _protobuf(text: str) -> str:
    descriptor = _descriptor(text)
    if descriptor is not None:
        return "descriptor:" + descriptor
    tokens = [
        " ".join(t.split()) if t.startswith(("//", "/*")) else t for t in _PROTO_TOKEN.findall(text)
    ]
    return "text:" + "\x00".join(tokens)


def _descriptor(text: str) -> str | None:
    """The FileDescriptorProto in ``text`` (base64), re-serialized without source info."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        from google.protobuf import descriptor_pb2
    except (binascii.Error, ValueError, ImportError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - not a descriptor: compare the text
        return None
    proto.ClearField("source_code_info")
    return base64.b64encode(proto.SerializeToString(deterministic=True)).decode("ascii")
