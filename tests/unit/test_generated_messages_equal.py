"""The generated message classes speak exactly the hand-written schemas' wire form.

For every API and version the hand schemas (``protocol/messages.py``,
``txn_messages.py``, ``sasl_messages.py``) implement, random field values
encoded by the schema interpreter and by the generated class give the same
bytes, and each side decodes the other's bytes to the same values; any cut
of the bytes fails to decode with the generated classes' typed error. Values
cross between the two as dicts (the schema's form) and dataclasses.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.protocol import generated as gen
from aioproducer.protocol import schema
from aioproducer.protocol.apis import APIS_BY_KEY
from aioproducer.protocol.generated._wire import ZERO_UUID, MessageError
from aioproducer.protocol.messages import Api
from aioproducer.protocol.schema import Array, Field, Struct

_CLASSES: dict[int, tuple[type[Any], type[Any]]] = {
    cls.API_KEY: (cls, getattr(gen, cls.__name__.replace("Request", "Response")))
    for cls in (getattr(gen, name) for name in gen.__all__ if name.endswith("Request"))
}

# Where the hand schema names a field differently: (generated class, schema name) -> attribute.
_ALIASES = {
    ("AddPartitionsToTxnRequest", "transactional_id"): "v3_and_below_transactional_id",
    ("AddPartitionsToTxnRequest", "producer_id"): "v3_and_below_producer_id",
    ("AddPartitionsToTxnRequest", "producer_epoch"): "v3_and_below_producer_epoch",
    ("AddPartitionsToTxnRequest", "topics"): "v3_and_below_topics",
    ("AddPartitionsToTxnResponse", "results_by_topic"): "results_by_topic_v3_and_below",
    ("TxnOffsetCommitRequest", "generation_id"): "generation_id_or_member_epoch",
}

_INTS = {
    id(schema.INT8): st.integers(-(2**7), 2**7 - 1),
    id(schema.INT16): st.integers(-(2**15), 2**15 - 1),
    id(schema.INT32): st.integers(-(2**31), 2**31 - 1),
    id(schema.INT64): st.integers(-(2**63), 2**63 - 1),
}


def _cases() -> list[tuple[Api, int, str]]:
    return [
        (api, version, side)
        for api in sorted(APIS_BY_KEY.values(), key=lambda a: a.key)
        for version in range(api.min_version, api.max_version + 1)
        for side in ("request", "response")
    ]


def _value(type_: Any, version: int, nullable: bool) -> st.SearchStrategy[Any]:
    if isinstance(type_, Struct):
        return _struct(type_, version)
    if isinstance(type_, Array):
        items = st.lists(_value(type_.item, version, False), max_size=3)
        return st.one_of(st.none(), items) if nullable else items
    if id(type_) in _INTS:
        return _INTS[id(type_)]
    if type_ is schema.BOOL:
        return st.booleans()
    if type_ is schema.UUID:
        return st.one_of(st.none(), st.uuids())
    if type_ is schema.STRING:
        text = st.text(max_size=8)
        return st.one_of(st.none(), text) if nullable else text
    if type_ in (schema.BYTES, schema.RECORDS):
        data = st.binary(max_size=16)
        return st.one_of(st.none(), data) if nullable else data
    raise AssertionError(f"no strategy for {type_!r}")


def _struct(struct: Struct, version: int) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in struct.fields:
        if not f.present(version):
            continue
        value = _value(f.type, version, f.nullable(version))
        if f.tag is not None:
            if isinstance(f.type, Array) and f.default is None:
                # The schema writes an empty tagged array whose default is None;
                # Kafka (and the generated code) omit an empty one, its default.
                value = st.lists(_value(f.type.item, version, False), min_size=1, max_size=3)
            # A tagged field is absent (its default) or set.
            value = st.one_of(st.just(f.default), value)
        fields[f.name] = value
    return st.fixed_dictionaries(fields)


def _hints(cls: type[Any]) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(__import__(cls.__module__, fromlist=["_"])))


def _element_class(hint: Any) -> type[Any] | None:
    """The dataclass inside ``X``, ``X | None``, ``list[X]`` or ``list[X] | None``."""
    for arg in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(arg):
            return typing.cast("type[Any]", arg)
        for inner in typing.get_args(arg):
            if dataclasses.is_dataclass(inner):
                return typing.cast("type[Any]", inner)
    return None


def _attr(cls: type[Any], name: str) -> str:
    attr = _ALIASES.get((cls.__name__, name), name)
    assert attr in {f.name for f in dataclasses.fields(cls)}, f"{cls.__name__} has no {attr}"
    return attr


def _to_object(struct: Struct, value: dict[str, Any], cls: type[Any], version: int) -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in struct.fields:
        if not f.present(version) or f.name not in value:
            continue
        if f.tag is not None and value[f.name] is None and f.default is None:
            continue  # the schema's "absent": the generated default
        attr = _attr(cls, f.name)
        kwargs[attr] = _convert_in(f, value[f.name], _element_class(hints[attr]), version)
    return cls(**kwargs)


def _convert_in(f: Field, item: Any, inner: type[Any] | None, version: int) -> Any:
    type_ = f.type
    if item is None:
        if type_ is schema.UUID:
            return ZERO_UUID
        return None
    if isinstance(type_, Struct):
        assert inner is not None
        return _to_object(type_, item, inner, version)
    if isinstance(type_, Array) and isinstance(type_.item, Struct):
        assert inner is not None
        return [_to_object(type_.item, element, inner, version) for element in item]
    return item


def _to_dict(struct: Struct, obj: Any, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    defaults = type(obj)()
    for f in struct.fields:
        if not f.present(version):
            continue
        attr = _attr(type(obj), f.name)
        item = getattr(obj, attr)
        if f.tag is not None and f.default is None and item == getattr(defaults, attr):
            out[f.name] = None  # absent: the schema's default is None
            continue
        type_ = f.type
        if isinstance(type_, Struct):
            item = None if item is None else _to_dict(type_, item, version)
        elif isinstance(type_, Array) and isinstance(type_.item, Struct) and item is not None:
            item = [_to_dict(type_.item, element, version) for element in item]
        elif type_ is schema.UUID and item == ZERO_UUID:
            item = None
        out[f.name] = item
    return out


def _plain(value: Any) -> Any:
    """A Message tree as plain dicts and lists, to compare with ``==``."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("api", "version", "side"),
    _cases(),
    ids=[f"{a.name}-v{v}-{s}" for a, v, s in _cases()],
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_equals_hand_schema(api: Api, version: int, side: str, data: st.DataObject) -> None:
    struct = api.request if side == "request" else api.response
    cls = _CLASSES[api.key][0 if side == "request" else 1]
    flexible = api.is_flexible(version)
    value = data.draw(_struct(struct, version))

    hand = bytearray()
    struct.encode_version(value, hand, version, flexible)
    generated = _to_object(struct, value, cls, version).encode(version)
    assert generated == bytes(hand)

    # Each decodes the other's bytes to the same values.
    by_hand, end = struct.decode_version(generated, 0, version, flexible)
    assert end == len(generated)
    by_generated = cls.decode(bytes(hand), version)
    assert _to_dict(struct, by_generated, version) == _plain(by_hand)

    # A cut frame is a typed error, never an IndexError or a short message.
    if generated:
        cut = data.draw(st.integers(0, len(generated) - 1), label="cut")
        with pytest.raises(MessageError):
            cls.decode(generated[:cut], version)
