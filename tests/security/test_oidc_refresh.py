"""The OIDC token is refreshed ahead of time, so re-authentication never waits for it.

A token endpoint (aiohttp.web on loopback) hands out one token at once and
then, for the refresh, either blocks until the test releases it or answers
HTTP 503. Brokers have a short session lifetime (KIP-368), so connections
re-authenticate every few hundred milliseconds with the cached token while
the endpoint is blocked or failing: sends complete, connections stay, and a
failed refresh is a WARNING, not an abort. Event based: the test waits for
the endpoint to hold the refresh, then for re-authentications to happen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from aioproducer import Producer, RecordMetadata
from aioproducer.sasl import ClientCredentialsTokenProvider
from aioproducer.sasl.token_refresh import refresh_delay
from aioproducer.testing import MockCluster
from tests.security.client_matrix import unsecured_jwt
from tests.support.aio import until, within

CLIENT_ID = "orders-service"
CLIENT_SECRET = "client-Secret-9"
TOKEN_LIFETIME_S = 12
SESSION_MS = 400


@pytest_asyncio.fixture
async def endpoint() -> AsyncIterator[dict[str, Any]]:
    """First request: a token at once. Later ones: per state["mode"], "block" or "503"."""
    state: dict[str, Any] = {
        "mode": "block",
        "requests": 0,
        "held": 0,
        "answered": 0,
        "release": asyncio.Event(),
    }

    async def token(request: web.Request) -> web.Response:
        await request.post()
        state["requests"] += 1
        if state["requests"] > 1 and state["mode"] == "503":
            return web.json_response({"error": "temporarily_unavailable"}, status=503)
        if state["requests"] > 1 and state["mode"] == "block":
            state["held"] += 1
            await asyncio.wait_for(state["release"].wait(), 60)
        state["answered"] += 1
        return web.json_response(
            {
                "access_token": unsecured_jwt(sub=CLIENT_ID, lifetime_s=TOKEN_LIFETIME_S),
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME_S,
            }
        )

    app = web.Application()
    app.router.add_post("/token", token)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}/token"
    try:
        yield state
    finally:
        state["release"].set()
        await runner.cleanup()


def _provider(url: str) -> ClientCredentialsTokenProvider:
    # Refreshed at 25-30% of the 12 s lifetime (3-3.6 s): long before it expires.
    return ClientCredentialsTokenProvider(url, CLIENT_ID, CLIENT_SECRET, refresh_window=0.25)


async def _send_until(
    producer: Producer, done: Any, what: str, during: Any = lambda: True
) -> list[Any]:
    """Send records one at a time until ``done()``; ``during()`` must hold after each send.

    Each send must complete within 3 s: one that waited for the token
    endpoint would not. Bounded by 8 s in all, while the first token is valid.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 8
    results = []
    while not done():
        assert loop.time() < deadline, f"{what} did not happen within 8 s"
        results.append(await within(producer.send("refresh", b"v"), 3, f"a send (before {what})"))
        assert during()
        await asyncio.sleep(0.02)
    return results


def _reauthentications(cluster: MockCluster, more: int) -> Any:
    target = cluster.sasl_reauthentications + more
    return lambda: cluster.sasl_reauthentications >= target


@pytest.mark.asyncio
async def test_reauthentication_does_not_wait_for_a_slow_token_endpoint(
    endpoint: dict[str, Any],
) -> None:
    provider = _provider(endpoint["url"])
    async with MockCluster(
        brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_session_lifetime_ms=SESSION_MS
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
            linger_ms=0,
        )
        try:
            await within(producer.start(), 10, "start")
            await within(producer.send("refresh", b"first"), 10, "first send")
            opened = cluster.request_count(18)
            # Sends (and the re-authentications they start) go on until the
            # refresh reaches the endpoint, which holds it: it was fetched
            # ahead of time, not by a re-authentication waiting for it.
            results = await _send_until(producer, lambda: endpoint["held"] == 1, "the refresh")
            # Re-authentications use the token already fetched: every send
            # completes while the endpoint still holds the refresh.
            results += await _send_until(
                producer,
                _reauthentications(cluster, 3),
                "three re-authentications",
                during=lambda: endpoint["answered"] == 1,
            )
            assert all(isinstance(r, RecordMetadata) for r in results)
            assert cluster.request_count(18) == opened  # the same connection all along
            endpoint["release"].set()
            await until(lambda: provider.fetches == 2, 10, "the refreshed token")
        finally:
            await within(producer.close(), 10, "close")
            provider.close()
    assert cluster.sasl_failures == 0


@pytest.mark.asyncio
async def test_a_failed_refresh_keeps_the_valid_token(
    endpoint: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    endpoint["mode"] = "503"
    caplog.set_level(logging.WARNING, logger="aioproducer")
    provider = _provider(endpoint["url"])
    async with MockCluster(
        brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_session_lifetime_ms=SESSION_MS
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=provider,
            linger_ms=0,
        )
        try:
            await within(producer.start(), 10, "start")
            await within(producer.send("refresh", b"first"), 10, "first send")
            opened = cluster.request_count(18)
            results = await _send_until(producer, lambda: endpoint["requests"] >= 2, "a 503")
            results += await _send_until(
                producer, _reauthentications(cluster, 3), "three re-authentications"
            )
            assert all(isinstance(r, RecordMetadata) for r in results)
            # No connection was aborted and reopened for the failed refresh.
            assert cluster.request_count(18) == opened
        finally:
            await within(producer.close(), 10, "close")
            provider.close()
    assert provider.fetches == 1 and cluster.sasl_failures == 0
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "refresh" in r.getMessage()
    ]
    assert warnings, caplog.text
    assert "current token stays in use" in warnings[0].getMessage()
    assert CLIENT_SECRET not in caplog.text


@pytest.mark.parametrize(
    ("lifetime", "rand", "expected"),
    [
        (3600, 0.0, 2880),  # 80% of an hour
        (3600, 1.0, 3060),  # plus the 5% jitter
        (400, 0.0, 100),  # 80% is 320 s, past the 300 s buffer before expiry: at 100 s
        (370, 0.0, 70),  # at the buffer: 70 s (more than the 60 s minimum period)
        (100, 0.5, 82.5),  # too short for buffer + minimum period: 82.5% alone
        (2, 0.0, 1.6),
    ],
)
def test_refresh_time_follows_java(lifetime: float, rand: float, expected: float) -> None:
    # ExpiringCredentialRefreshingLogin.refreshMs with Java's defaults.
    assert refresh_delay(lifetime, rand) == pytest.approx(expected)
