"""Registry errors name the subject as the user wrote it, not as its percent-encoded path."""

from __future__ import annotations

import json

import pytest

from aioproducer.schema_registry import (
    AvroSerializer,
    IncompatibleSchemaError,
    Schema,
    SchemaNotFoundError,
    SchemaRegistryClient,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    SubjectNotFoundError,
    VersionNotFoundError,
)

pytestmark = pytest.mark.asyncio

SUBJECT = "Shop Order Event v2"
ODD = "a/b 100%"  # a slash and a percent sign: encoded on the wire, shown as written
V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
V2_BAD = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "b", "type": "string"},
        ],
    }
)


def assert_names(exc: SchemaRegistryError, subject: str) -> None:
    text = str(exc)
    assert f"subject {subject!r}" in text, text
    assert "%2" not in text, text


@pytest.mark.parametrize("subject", [SUBJECT, ODD])
async def test_every_error_names_the_subject_as_written(schema_registry, subject: str) -> None:
    async with SchemaRegistryClient(schema_registry.url, max_retries=0) as client:
        with pytest.raises(SubjectNotFoundError) as missing:
            await client.get_latest_version(subject)
        assert_names(missing.value, subject)
        schema_id = await client.register_schema(subject, Schema(V1))
        assert schema_registry.subjects == {subject: [schema_id]}  # the registry got it whole
        with pytest.raises(SchemaNotFoundError) as unknown:  # 40403 does not say the subject
            await client.lookup_schema(subject, Schema('"string"'))
        assert_names(unknown.value, subject)
        with pytest.raises(VersionNotFoundError) as version:
            await client.get_version(subject, 9)
        assert_names(version.value, subject)
        with pytest.raises(IncompatibleSchemaError) as refused:
            await client.register_schema(subject, Schema(V2_BAD))
        assert_names(refused.value, subject)
        schema_registry.fail_next(1)
        with pytest.raises(SchemaRegistryUnavailableError) as down:
            await client.set_compatibility("NONE", subject)
        assert_names(down.value, subject)
        assert await client.set_compatibility("NONE", subject) == "NONE"
        assert await client.get_compatibility(subject) == "NONE"


async def test_the_serializer_error_names_the_subject(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        ser = AvroSerializer(
            client,
            V1,
            auto_register_schemas=False,
            subject_name_strategy=lambda topic, is_key, name: SUBJECT,
        )
        with pytest.raises(SubjectNotFoundError) as missing:
            await ser.prepare("orders")
    assert_names(missing.value, SUBJECT)
