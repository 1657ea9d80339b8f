"""A small OAuth 2 token endpoint (client credentials) served by aiohttp.web on loopback.

Import the ``token_endpoint`` fixture into a test module to use it. It accepts
client ``orders-service`` / ``client-Secret-9`` (HTTP Basic, as RFC 6749
section 2.3.1 and KIP-768 send them) and hands out unsecured JWTs that the
mock's default OAUTHBEARER validator accepts; ``state["requests"]`` records
every call and ``state["lifetime"]`` sets ``expires_in``.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest_asyncio
from aiohttp import web

from tests.security.client_matrix import unsecured_jwt

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


