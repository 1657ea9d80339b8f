"""OAUTHBEARER with the built-in OIDC client-credentials provider (KIP-768).

A small OAuth 2 token endpoint served by aiohttp.web on loopback hands out
unsecured JWTs (which the mock's default validator accepts) to client
``orders-service`` authenticating with HTTP Basic (RFC 6749 section 2.3.1).
The provider fetches, caches and refreshes tokens; producers use it against the
mock cluster and through the TLS/SASL front to Tansu (read back with
confluent-kafka).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.sasl import ClientCredentialsTokenProvider
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.sasl import validate_unsecured_jwt
from tests.security.client_matrix import produce_and_check, unsecured_jwt, upstream
from tests.support.aio import gather_within, read_back, until, within
from tests.support.certs import Pki
from tests.support.secure_front import SecureFront

pytestmark = pytest.mark.asyncio

CLIENT_ID = "orders-service"
CLIENT_SECRET = "client-Secret-9"


@pytest_asyncio.fixture
async def token_endpoint() -> AsyncIterator[dict]:
    """A small OAuth 2 token endpoint (client credentials) on loopback."""
    state: dict = {"requests": [], "lifetime": 3600}

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        state["requests"].append((request.headers.get("Authorization"), dict(form)))
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        login = base64.b64decode(encoded).decode() if scheme == "Basic" else ""
        if login != f"{CLIENT_ID}:{CLIENT_SECRET}":
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        return web.json_response(
            {
                "access_token": unsecured_jwt(sub=CLIENT_ID),
                "token_type": "Bearer",
                "expires_in": state["lifetime"],
            }
        )

    app = web.Application()
    app.router.add_post("/oauth2/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state["url"] = f"http://127.0.0.1:{port}/oauth2/token"
    try:
        yield state
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
async def test_oidc_client_credentials_provider(tls: bool, pki: Pki, token_endpoint: dict) -> None:
    seen_subjects: list[str] = []

    def validator(token: str) -> dict:
        claims = validate_unsecured_jwt(token)
        seen_subjects.append(claims["sub"])
        return claims

    server = {"sasl_mechanisms": ["OAUTHBEARER"], "oauth_validator": validator}
    client = {
        "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauthbearer_token_endpoint_url": token_endpoint["url"],
        "sasl_oauthbearer_client_id": "orders-service",
        "sasl_oauthbearer_client_secret": "client-Secret-9",
        "sasl_oauthbearer_scope": "kafka",
    }
    if tls:
        server["ssl_context"] = pki.server_context()
        client["ssl_cafile"] = pki.ca_file
    async with MockCluster(brokers=3, **server) as cluster:
        producer = Producer(cluster.bootstrap_servers, linger_ms=2, **client)
        await within(producer.start(), 10, "start")
        try:
            await produce_and_check(cluster, producer, "oidc-topic")
        finally:
            await within(producer.close(), 10, "close")
    assert seen_subjects and set(seen_subjects) == {"orders-service"}
    # One token, cached and reused for every connection.
    assert len(token_endpoint["requests"]) == 1
    _auth, form = token_endpoint["requests"][0]
    assert form == {"grant_type": "client_credentials", "scope": "kafka"}


async def test_oidc_provider_refreshes_before_expiry(token_endpoint: dict) -> None:
    # Refreshed in the background at 80-85% of 2 s, before the token expires.
    token_endpoint["lifetime"] = 2
    provider = ClientCredentialsTokenProvider(
        token_endpoint["url"], "orders-service", "client-Secret-9"
    )
    try:
        first = await provider.token()
        assert await provider.token() == first and provider.fetches == 1
        await until(lambda: provider.fetches == 2, 10, "the background refresh")
        assert len(token_endpoint["requests"]) == 2
    finally:
        provider.close()
    assert "client-Secret-9" not in repr(provider)


async def test_oidc_provider_reports_a_refusal(token_endpoint: dict) -> None:
    provider = ClientCredentialsTokenProvider(
        token_endpoint["url"], "orders-service", "Wrong-Secret"
    )
    with pytest.raises(errors.SaslAuthenticationError, match="HTTP 401") as info:
        await provider.token()
    assert "Wrong-Secret" not in str(info.value)


@pytest.mark.integration
async def test_oidc_provider_through_the_front(
    pki: Pki, kafka_bootstrap: str, topic_factory, token_endpoint: dict
) -> None:
    topic = topic_factory(2)
    front = SecureFront(
        upstream(kafka_bootstrap), ssl_context=pki.server_context(), sasl_mechanisms=["OAUTHBEARER"]
    )
    async with front:
        producer = Producer.from_config(
            {
                "bootstrap.servers": front.bootstrap_servers,
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": pki.ca_file,
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.token.endpoint.url": token_endpoint["url"],
                "sasl.oauthbearer.client.id": CLIENT_ID,
                "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            }
        )
        async with producer:
            futures = [await producer.enqueue(topic, f"oidc-{i}".encode()) for i in range(40)]
            results = await gather_within(futures, 30, "delivery")
        assert front.sasl_authentications >= 2
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    records = await read_back(kafka_bootstrap, topic, 40)
    assert sorted(r.value for r in records) == sorted(f"oidc-{i}".encode() for i in range(40))
    assert len(token_endpoint["requests"]) == 1  # one token, cached for every connection


async def test_an_unreachable_endpoint_or_failing_provider_is_retried() -> None:
    from tests.support.aio import closed_port

    provider = ClientCredentialsTokenProvider(
        f"http://127.0.0.1:{closed_port()}/token", CLIENT_ID, CLIENT_SECRET, timeout_ms=2000
    )
    with pytest.raises(errors.ConnectionFailedError) as info:
        await provider.token()
    assert info.value.retriable and not errors.is_authentication_failure(info.value)

    class Broken:
        async def token(self) -> str:
            raise RuntimeError("no credentials in the environment")

    async with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"]) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Broken(),
            max_block_ms=1500,
        )
        # Retried until max_block_ms, then reported with the provider's reason.
        with pytest.raises(
            errors.NoBrokersAvailableError, match="no credentials in the environment"
        ):
            await within(producer.start(), 5, "start")
        await producer.close()
