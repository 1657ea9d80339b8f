"""SchemaRegistryClient against the mock registry, over real sockets."""

from __future__ import annotations

import base64
import json
import pickle
import socket

import pytest

from aioproducer.errors import ConfigurationError, SerializationError
from aioproducer.schema_registry import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    Schema,
    SchemaNotFoundError,
    SchemaRegistryAuthError,
    SchemaRegistryClient,
    SchemaRegistryUnavailableError,
    SubjectNotFoundError,
    VersionNotFoundError,
)

pytestmark = pytest.mark.asyncio

USER_V1 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [{"name": "name", "type": "string"}],
    }
)
# Adds a field with a default: BACKWARD compatible.
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int", "default": 0},
        ],
    }
)
# Adds a field without default: not BACKWARD compatible.
USER_BAD = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}],
    }
)


def gets(registry, path: str) -> int:
    return sum(1 for r in registry.requests if r.method == "GET" and r.path == path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_register_then_lookups_by_id_and_version(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        first = await client.register_schema("users-value", Schema(USER_V1))
        second = await client.register_schema("users-value", Schema(USER_V2))
        assert first != second
        # Registering the same schema again is the same id, and answered from the cache.
        posts = len(schema_registry.requests)
        assert await client.register_schema("users-value", Schema(USER_V1)) == first
        assert len(schema_registry.requests) == posts
        # The same schema under another subject keeps its global id.
        assert await client.register_schema("other-value", Schema(USER_V1)) == first

        fresh = SchemaRegistryClient(schema_registry.url)
        try:
            assert (await fresh.get_schema(first)).schema_str == USER_V1
            v1 = await fresh.get_version("users-value", 1)
            assert (v1.schema_id, v1.version, v1.subject) == (first, 1, "users-value")
            latest = await fresh.get_latest_version("users-value")
            assert (latest.schema_id, latest.version) == (second, 2)
            found = await fresh.lookup_schema("users-value", Schema(USER_V2))
            assert (found.schema_id, found.version) == (second, 2)
            # Schema by id is cached: a second call does not ask.
            await fresh.get_schema(first)
            assert gets(schema_registry, f"/schemas/ids/{first}") == 1
        finally:
            await fresh.close()


async def test_not_found_errors_are_typed(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        with pytest.raises(SchemaNotFoundError) as by_id:
            await client.get_schema(4242)
        assert by_id.value.error_code == 40403 and by_id.value.status == 404
        with pytest.raises(SubjectNotFoundError) as subject:
            await client.get_latest_version("nope-value")
        assert subject.value.error_code == 40401
        await client.register_schema("users-value", Schema(USER_V1))
        with pytest.raises(VersionNotFoundError):
            await client.get_version("users-value", 7)
        with pytest.raises(SchemaNotFoundError):
            await client.lookup_schema("users-value", Schema(USER_V2))
        with pytest.raises(InvalidSchemaError) as invalid:
            await client.register_schema("users-value", Schema('{"type": "recrd"}'))
        assert invalid.value.error_code == 42201
        # Every registry error is a SerializationError: send/enqueue callers catch one type.
        assert isinstance(invalid.value, SerializationError)


async def test_incompatible_schema_is_refused_with_409(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        await client.register_schema("users-value", Schema(USER_V1))
        assert await client.test_compatibility("users-value", Schema(USER_V2)) is True
        assert await client.test_compatibility("users-value", Schema(USER_BAD)) is False
        with pytest.raises(IncompatibleSchemaError) as refused:
            await client.register_schema("users-value", Schema(USER_BAD))
        assert refused.value.status == 409 and "incompatible" in str(refused.value)
        # NONE for this subject only: the same schema is now accepted there.
        assert await client.set_compatibility("none", "users-value") == "NONE"
        assert await client.get_compatibility("users-value") == "NONE"
        assert await client.get_compatibility() == "BACKWARD"
        assert await client.register_schema("users-value", Schema(USER_BAD)) > 0
        with pytest.raises(ConfigurationError):
            await client.set_compatibility("SOMETIMES", "users-value")


async def test_latest_version_is_cached_for_its_ttl(schema_registry) -> None:
    path = "/subjects/users-value/versions/latest"
    # confluent-kafka-python's property name for the TTL, in seconds.
    async with (
        SchemaRegistryClient.from_config(
            {"url": schema_registry.url, "cache.latest.ttl.sec": 3600}
        ) as cached,
        SchemaRegistryClient(schema_registry.url, latest_ttl_s=0) as expiring,
    ):
        await cached.register_schema("users-value", Schema(USER_V1))
        assert (await cached.get_latest_version("users-value")).version == 1
        await cached.register_schema("users-value", Schema(USER_V2))
        # Within the TTL: the cached answer, no request.
        assert (await cached.get_latest_version("users-value")).version == 1
        assert gets(schema_registry, path) == 1
        # A TTL of zero: every call asks, and sees version 2.
        assert (await expiring.get_latest_version("users-value")).version == 2
        assert (await expiring.get_latest_version("users-value")).version == 2
        assert gets(schema_registry, path) == 3


async def test_5xx_is_retried_a_bounded_number_of_times(schema_registry) -> None:
    async with SchemaRegistryClient(
        schema_registry.url, max_retries=2, retry_backoff_s=0.001
    ) as client:
        schema_registry.fail_next(2, status=503)
        assert await client.register_schema("users-value", Schema(USER_V1)) > 0
        attempts = [r for r in schema_registry.requests if r.method == "POST"]
        assert len(attempts) == 3

        schema_registry.fail_next(10, status=500)
        before = len(schema_registry.requests)
        with pytest.raises(SchemaRegistryUnavailableError) as failed:
            await client.get_schema(99)
        assert len(schema_registry.requests) - before == 3  # 1 + max_retries, then the error
        assert "3 attempt(s)" in str(failed.value) and "HTTP 500" in str(failed.value)


async def test_4xx_is_not_retried(schema_registry) -> None:
    async with SchemaRegistryClient(schema_registry.url, max_retries=5) as client:
        with pytest.raises(SchemaNotFoundError):
            await client.get_schema(5)
        assert len(schema_registry.requests) == 1


async def test_unreachable_registry_fails_after_bounded_retries() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    async with SchemaRegistryClient(
        url, max_retries=1, retry_backoff_s=0.001, timeout_s=5
    ) as client:
        with pytest.raises(SchemaRegistryUnavailableError) as failed:
            await client.get_schema(1)
    assert "2 attempt(s)" in str(failed.value) and url in str(failed.value)


async def test_basic_auth_header_is_sent_and_credentials_stay_out_of_errors(
    schema_registry,
) -> None:
    schema_registry.require_basic_auth("alice", "s3cret-pass")
    good = SchemaRegistryClient.from_config(
        {
            "schema.registry.url": schema_registry.url,
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "alice:s3cret-pass",
        }
    )
    async with good:
        assert await good.register_schema("users-value", Schema(USER_V1)) > 0
    sent = schema_registry.requests[-1].headers["Authorization"]
    assert sent == "Basic " + base64.b64encode(b"alice:s3cret-pass").decode()

    # Wrong password, given in the URL: 401 as a typed error naming neither secret.
    host = schema_registry.url.removeprefix("http://")
    async with SchemaRegistryClient(f"http://alice:wr0ng-pass@{host}") as bad:
        with pytest.raises(SchemaRegistryAuthError) as refused:
            await bad.get_schema(1)
    text = (
        str(refused.value) + repr(refused.value) + repr(pickle.loads(pickle.dumps(refused.value)))
    )
    assert refused.value.status == 401
    assert "wr0ng-pass" not in text and "alice" not in text
    assert bad.url == schema_registry.url


async def test_bearer_token_header_is_sent(schema_registry) -> None:
    schema_registry.require_bearer("tok-123")
    client = SchemaRegistryClient.from_config(
        {
            "url": schema_registry.url,
            "bearer.auth.token": "tok-123",
            "bearer.auth.logical.cluster": "lsrc-1",
            "bearer.auth.identity.pool.id": "pool-9",
        }
    )
    async with client:
        await client.register_schema("users-value", Schema(USER_V1))
    headers = schema_registry.requests[-1].headers
    assert headers["Authorization"] == "Bearer tok-123"
    assert (headers["target-sr-cluster"], headers["Confluent-Identity-Pool-Id"]) == (
        "lsrc-1",
        "pool-9",
    )


async def test_from_config_refuses_unknown_and_malformed_properties() -> None:
    with pytest.raises(ConfigurationError, match="basic.auth.user.inf'"):
        SchemaRegistryClient.from_config({"url": "http://h:1", "basic.auth.user.inf": "a:b"})
    with pytest.raises(ConfigurationError, match="user:password") as malformed:
        SchemaRegistryClient.from_config({"url": "http://h:1", "basic.auth.user.info": "secret"})
    assert "secret" not in str(malformed.value)
    with pytest.raises(ConfigurationError, match="schema.registry.url is required"):
        SchemaRegistryClient.from_config({})
    with pytest.raises(ConfigurationError, match="http"):
        SchemaRegistryClient("ftp://h:1")
    client = SchemaRegistryClient.from_config(
        {
            "schema.registry.url": "http://a:1, http://b:2",
            "max.retries": "1",
            "request.timeout.ms": 2500,
            "latest.cache.ttl.secs": 5,
        }
    )
    assert client.url == "http://a:1"
    with pytest.raises(ConfigurationError, match="timeout must be > 0 seconds"):
        SchemaRegistryClient.from_config({"url": "http://h:1", "timeout": 0})
    with pytest.raises(ConfigurationError, match="cache.latest.ttl.sec must be a number"):
        SchemaRegistryClient.from_config({"url": "http://h:1", "cache.latest.ttl.sec": "soon"})


async def test_retries_log_no_credentials(schema_registry, caplog) -> None:
    host = schema_registry.url.removeprefix("http://")
    caplog.set_level("DEBUG", logger="aioproducer.schema_registry")
    schema_registry.fail_next(2, status=502)
    async with SchemaRegistryClient(
        f"http://bob:hunter2-pw@{host}", max_retries=1, retry_backoff_s=0.001
    ) as client:
        with pytest.raises(SchemaRegistryUnavailableError) as failed:
            await client.get_schema(1)
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert retries, "the retry was not logged"
    logged = " ".join(r.getMessage() for r in caplog.records) + str(failed.value)
    assert "hunter2-pw" not in logged and "bob" not in logged
    # The password still went out, as basic auth.
    assert (
        schema_registry.requests[0].headers["Authorization"]
        == "Basic " + base64.b64encode(b"bob:hunter2-pw").decode()
    )


async def test_requests_in_flight_are_bounded(aiohttp_server) -> None:
    """Resolving many subjects at once sends ``max_in_flight`` requests at a time, no more."""
    import asyncio

    from aiohttp import web

    gate = asyncio.Event()
    in_flight = peak = 0

    async def register(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.wait_for(gate.wait(), 10)
        finally:
            in_flight -= 1
        return web.json_response({"id": 1})

    app = web.Application()
    app.router.add_post("/subjects/{subject}/versions", register)
    server = await aiohttp_server(app)
    async with SchemaRegistryClient(str(server.make_url("")), max_in_flight=3) as client:
        calls = asyncio.gather(
            *(client.register_schema(f"s{i}", Schema(USER_V1)) for i in range(12))
        )
        for _ in range(500):  # until three are held at the server (bounded: 5 s)
            if in_flight == 3:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # time for more to arrive, were they not held back
        assert (in_flight, peak) == (3, 3)
        gate.set()
        assert await asyncio.wait_for(calls, 10) == [1] * 12
    assert peak == 3
    with pytest.raises(ConfigurationError, match="max_in_flight"):
        SchemaRegistryClient("http://registry", max_in_flight=0)
