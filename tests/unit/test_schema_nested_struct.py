"""A struct field (not tagged, not in an array) encodes and decodes like any other field."""

from __future__ import annotations

import pytest

from aioproducer.protocol.schema import INT32, STRING, Field, Struct

# A struct directly inside a struct, as Kafka's message definitions allow
# (e.g. a "Leader" sub-struct outside the tagged-field section).
_SCHEMA = Struct(
    Field("name", STRING),
    Field("leader", Struct(Field("leader_id", INT32), Field("leader_epoch", INT32))),
    Field("count", INT32),
)


@pytest.mark.parametrize("flexible", [False, True], ids=["classic", "flexible"])
def test_a_nested_struct_field_round_trips(flexible: bool) -> None:
    value = {"name": "t", "leader": {"leader_id": 3, "leader_epoch": 7}, "count": 5}
    out = bytearray()
    _SCHEMA.encode_version(value, out, 0, flexible)
    decoded, end = _SCHEMA.decode_version(bytes(out), 0, 0, flexible)
    assert end == len(out)
    assert decoded == value
    assert decoded.leader.leader_epoch == 7
