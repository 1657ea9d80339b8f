"""Kafka's JSON message specs (``common/message/*.json``) read into plain objects.

The specs ship inside the ``kafka-clients`` jar; they are JSON with ``//``
comments. Field semantics follow Kafka's own generator
(``generator/src/main/java/org/apache/kafka/message``: ``FieldSpec``,
``MessageSpec``, ``Versions``).
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FieldSpec", "MessageSpec", "StructSpec", "Versions", "load_message", "read_spec"]

_NO_VERSION = 1 << 15


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; empty when ``low > high``."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None, default: Versions | None = None) -> Versions:
        if text is None:
            return default if default is not None else cls(1, 0)
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), _NO_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high


@dataclass
class FieldSpec:
    """One field: its wire type, where it exists, where it may be null or tagged."""

    name: str
    type: str  # "int32", "string", "[]int32", "[]Topic", "Topic", ...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    ignorable: bool
    default: object  # the raw "default" of the spec, or None when absent
    about: str
    flexible: Versions | None  # a field-level override (RequestHeader.ClientId)
    struct: StructSpec | None = None  # the element type of a struct or struct array

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)


@dataclass
class MessageSpec:
    """A request or response: its key, versions and top-level struct."""

    name: str
    kind: str  # "request" | "response" | "header" | "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: StructSpec
    structs: list[StructSpec]  # every struct, the root last, children before parents


PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)


def strip_comments(text: str) -> str:
    """Drop ``//`` comments outside JSON strings."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


Json = dict[str, Any]


def _opt(raw: Json, key: str) -> str | None:
    value = raw.get(key)
    return None if value is None else str(value)


def read_spec(jar: Path, name: str) -> Json:
    """The parsed JSON of ``common/message/<name>.json`` in ``jar``."""
    with zipfile.ZipFile(jar) as zf:
        text = zf.read(f"common/message/{name}.json").decode("utf-8")
    data: Json = json.loads(strip_comments(text))
    return data


def _field(raw: Json, common: dict[str, StructSpec]) -> FieldSpec:
    versions = Versions.parse(str(raw["versions"]))
    tag = raw.get("tag")
    spec = FieldSpec(
        name=str(raw["name"]),
        type=str(raw["type"]),
        versions=versions,
        nullable=Versions.parse(_opt(raw, "nullableVersions")),
        tagged=Versions.parse(_opt(raw, "taggedVersions")),
        tag=None if tag is None else int(tag),
        ignorable=bool(raw.get("ignorable", False)),
        default=raw.get("default"),
        about=re.sub(r"\s+", " ", str(raw.get("about", ""))).strip(),
        flexible=(
            Versions.parse(str(raw["flexibleVersions"])) if "flexibleVersions" in raw else None
        ),
    )
    element = spec.element
    if element not in PRIMITIVES:
        if "fields" in raw:
            struct = StructSpec(element)
            for child in raw["fields"]:
                struct.fields.append(_field(child, common))
            spec.struct = struct
        elif element in common:
            spec.struct = common[element]
        else:
            raise ValueError(f"field {spec.name}: unknown type {spec.type}")
    return spec


def _children_first(root: StructSpec) -> list[StructSpec]:
    """Every struct reachable from ``root``, each after the structs it holds."""
    order: list[StructSpec] = []
    seen: set[int] = set()

    def visit(struct: StructSpec) -> None:
        if id(struct) in seen:
            return
        seen.add(id(struct))
        for f in struct.fields:
            if f.struct is not None:
                visit(f.struct)
        order.append(struct)

    visit(root)
    return order


def load_message(jar: Path, name: str) -> MessageSpec:
    """Read one spec (e.g. ``ProduceRequest``) from the jar."""
    raw = read_spec(jar, name)
    common: dict[str, StructSpec] = {}
    for raw_common in raw.get("commonStructs", []):
        struct = StructSpec(str(raw_common["name"]))
        common[struct.name] = struct
    for raw_common in raw.get("commonStructs", []):
        struct = common[str(raw_common["name"])]
        for child in raw_common["fields"]:
            struct.fields.append(_field(child, common))
    root = StructSpec(str(raw["name"]))
    for child in raw["fields"]:
        root.fields.append(_field(child, common))
    api_key = raw.get("apiKey")
    return MessageSpec(
        name=str(raw["name"]),
        kind=str(raw["type"]),
        api_key=None if api_key is None else int(api_key),
        valid=Versions.parse(str(raw["validVersions"])),
        flexible=Versions.parse(str(raw["flexibleVersions"])),
        root=root,
        structs=_children_first(root),
    )
