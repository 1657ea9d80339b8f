"""The mock registry's compatibility rules and REST answers (status codes, error bodies)."""

from __future__ import annotations

import json

import aiohttp
import pytest

from aioproducer.testing.avro_compat import avro_compatible

pytestmark = pytest.mark.asyncio


def record(*fields: dict, name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


F_INT = {"name": "a", "type": "int"}
F_LONG = {"name": "a", "type": "long"}
F_B_DEFAULT = {"name": "b", "type": "string", "default": ""}
F_B = {"name": "b", "type": "string"}


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        (record(F_INT), record(F_INT), True),
        (record(F_LONG), record(F_INT), True),  # int promotes to long
        (record(F_INT), record(F_LONG), False),
        (record(F_INT, F_B_DEFAULT), record(F_INT), True),  # new field with a default
        (record(F_INT, F_B), record(F_INT), False),  # new field without default
        (record(F_INT), record(F_INT, F_B), True),  # a dropped field is skipped
        (record(F_INT, name="S"), record(F_INT), False),  # another record name
        (json.dumps(["null", "string"]), json.dumps("string"), True),
        (json.dumps("string"), json.dumps(["null", "string"]), False),
        (
            json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}),
            json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}),
            True,
        ),
        (
            json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}),
            json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}),
            False,
        ),
        (
            json.dumps({"type": "array", "items": "double"}),
            json.dumps({"type": "array", "items": "float"}),
            True,
        ),
        (
            json.dumps({"type": "map", "values": "int"}),
            json.dumps({"type": "map", "values": "string"}),
            False,
        ),
        (
            json.dumps({"type": "fixed", "name": "F", "size": 4}),
            json.dumps({"type": "fixed", "name": "F", "size": 8}),
            False,
        ),
        # Recursive: a linked list, named by reference.
        (
            record({"name": "next", "type": ["null", "R"], "default": None}, F_LONG),
            record({"name": "next", "type": ["null", "R"]}, F_INT),
            True,
        ),
    ],
)
async def test_avro_schema_resolution(reader: str, writer: str, ok: bool) -> None:
    assert avro_compatible(reader=reader, writer=writer) is ok


async def post(session, url, path, body):
    async with session.post(url + path, json=body) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_levels_and_error_bodies(schema_registry) -> None:
    url = schema_registry.url
    v1, v3 = record(F_INT), record(F_INT, F_B)
    async with aiohttp.ClientSession() as s:
        assert await post(s, url, "/subjects/s/versions", {"schema": v1}) == (200, {"id": 1})
        # v3 adds a field without a default: BACKWARD refuses it.
        status, body = await post(s, url, "/subjects/s/versions", {"schema": v3})
        assert status == 409 and body["error_code"] == 409 and "incompatible" in body["message"]
        async with s.put(url + "/config/s", json={"compatibility": "FORWARD"}) as resp:
            assert await resp.json(content_type=None) == {"compatibility": "FORWARD"}
        # FORWARD: the old schema reads new data, which v3 allows.
        assert await post(s, url, "/subjects/s/versions", {"schema": v3}) == (200, {"id": 2})
        async with s.put(url + "/config/s", json={"compatibility": "FULL_TRANSITIVE"}) as resp:
            assert resp.status == 200
        # v4 (b required, c with a default) is FULL against v3, but v4 cannot read
        # v1's data (no b): the TRANSITIVE level checks every version.
        v4 = record(F_INT, F_B, {"name": "c", "type": "int", "default": 0})
        status, _ = await post(s, url, "/subjects/s/versions", {"schema": v4})
        assert status == 409
        async with s.put(url + "/config/s", json={"compatibility": "FULL"}) as resp:
            assert resp.status == 200
        assert await post(s, url, "/subjects/s/versions", {"schema": v4}) == (200, {"id": 3})
        status, body = await post(s, url, "/subjects/s/versions", {"schema": "{not json"})
        assert (status, body["error_code"]) == (422, 42201)
        async with s.put(url + "/config/s", json={"compatibility": "SOMETIMES"}) as resp:
            assert (resp.status, (await resp.json(content_type=None))["error_code"]) == (422, 42203)
        for path, code in [
            ("/subjects/none/versions/latest", 40401),
            ("/subjects/s/versions/9", 40402),
            ("/schemas/ids/77", 40403),
            ("/config/other", 40408),
            ("/no/such/path", 404),
        ]:
            async with s.get(url + path) as resp:
                body = await resp.json(content_type=None)
                assert resp.status == 404 and body["error_code"] == code, path
        async with s.get(url + "/config/other", params={"defaultToGlobal": "true"}) as resp:
            assert await resp.json(content_type=None) == {"compatibilityLevel": "BACKWARD"}
        # Another schema type under an Avro subject is refused while a level is set.
        status, _ = await post(s, url, "/subjects/t/versions", {"schema": v1})
        status, _ = await post(
            s, url, "/subjects/t/versions", {"schema": '{"type": "object"}', "schemaType": "JSON"}
        )
        assert status == 409
