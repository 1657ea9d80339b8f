"""A built-in OAUTHBEARER token provider: OAuth 2 client credentials (KIP-768).

POSTs ``grant_type=client_credentials`` (and ``scope``) to the token endpoint
with HTTP Basic client authentication, as Java's
``OAuthBearerLoginCallbackHandler`` does, and caches the access token until
``refresh_window`` of its lifetime has passed (Java's
``sasl.login.refresh.window.factor``, 0.8). An unreachable endpoint or an
HTTP 5xx is retried like a broker connection (ConnectionFailedError); an HTTP
4xx refusal is final (SaslAuthenticationError). Needs aiohttp: ``pip install
aioproducer[oauth]``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from typing import Any
from urllib.parse import quote_plus

from .. import errors

__all__ = ["ClientCredentialsTokenProvider"]

# Used when the endpoint says nothing about the token's lifetime.
_DEFAULT_LIFETIME = 300.0


def _require_aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError:
        raise errors.ConfigurationError(
            "the OAUTHBEARER token endpoint needs aiohttp: pip install 'aioproducer[oauth]'"
        ) from None
    return aiohttp


class ClientCredentialsTokenProvider:
    """Fetch, cache and refresh access tokens from an OIDC token endpoint."""

    def __init__(
        self,
        token_endpoint_url: str,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout_ms: int = 10000,
        refresh_window: float = 0.8,
        extensions: dict[str, str] | None = None,
    ) -> None:
        self._aiohttp = _require_aiohttp()
        if not token_endpoint_url.startswith(("https://", "http://")):
            raise errors.ConfigurationError(
                f"sasl_oauthbearer_token_endpoint_url must be an http(s) URL, got {token_endpoint_url!r}"
            )
        if not 0 < refresh_window <= 1:
            raise errors.ConfigurationError("refresh_window must be in (0, 1]")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self._ssl = ssl_context
        self._timeout = timeout_ms / 1000
        self._window = refresh_window
        self._extensions = dict(extensions or {})
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock: asyncio.Lock | None = None
        #: How many tokens were fetched (for tests and metrics).
        self.fetches = 0

    def __repr__(self) -> str:
        return (
            f"<ClientCredentialsTokenProvider {self.token_endpoint_url} "
            f"client_id={self.client_id!r} scope={self.scope!r}>"
        )

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    async def token(self) -> str:
        """A valid access token: the cached one, or a fresh one near its expiry."""
        if self._token is not None and time.monotonic() < self._refresh_at:
            return self._token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._token is None or time.monotonic() >= self._refresh_at:
                await self._fetch()
        assert self._token is not None
        return self._token

    async def _fetch(self) -> None:
        aiohttp = self._aiohttp
        data = {"grant_type": "client_credentials"}
        if self.scope:
            data["scope"] = self.scope
        started = time.monotonic()
        url = self.token_endpoint_url
        failure: str | None = None
        try:
            async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout)
            ) as session, session.post(
                url,
                data=data,
                headers={"Accept": "application/json", "Authorization": self._basic_auth()},
                ssl=self._ssl if self._ssl is not None else True,
            ) as response:
                raw = await response.read()
                status = response.status
                charset = response.get_encoding() if raw else "utf-8"
        except asyncio.TimeoutError:
            failure = f"no answer within {self._timeout * 1000:.0f} ms"
        except aiohttp.TooManyRedirects:
            failure = "too many redirects (a redirect loop?)"
        except (aiohttp.ClientError, OSError, LookupError) as exc:
            # Never the exception's repr: aiohttp's carries the request headers,
            # the HTTP Basic client credentials among them.
            failure = self._redact(f"{type(exc).__name__}: {exc}")
        if failure is not None:
            # Raised outside the handler, so the aiohttp error is not chained
            # (__context__) to it either. Unreachable for now: retried like a
            # broker connection.
            raise errors.ConnectionFailedError(f"OAUTHBEARER: token endpoint {url} failed: {failure}")
        body = raw.decode(charset, "replace")
        if status >= 500:
            raise errors.ConnectionFailedError(f"OAUTHBEARER: token endpoint {url} answered HTTP {status}")
        if status != 200:
            # 4xx: the endpoint refused these client credentials. Its answer is
            # shown, with anything that echoes the credentials blanked out.
            raise errors.SaslAuthenticationError(
                f"OAUTHBEARER: token endpoint {url} answered HTTP {status}: {self._redact(body[:200])}"
            )
        token = _access_token(body)
        if token is None:
            raise errors.SaslAuthenticationError(
                f"OAUTHBEARER: token endpoint {url} sent no access_token"
            )
        payload = json.loads(body)
        lifetime = _lifetime(payload, token)
        self._token = token
        self._refresh_at = started + lifetime * self._window
        self.fetches += 1

    def _basic_auth(self) -> str:
        # RFC 6749 section 2.3.1: form-encode id and secret, then HTTP Basic
        # (Java's HttpAccessTokenRetriever does the same).
        pair = f"{quote_plus(self.client_id)}:{quote_plus(self._client_secret)}"
        return "Basic " + base64.b64encode(pair.encode()).decode()

    def _redact(self, text: str) -> str:
        """``text`` with every form of the client secret in it replaced by ``***``."""
        basic = self._basic_auth()
        forms = {
            basic,
            basic.removeprefix("Basic "),
            self._client_secret,
            quote_plus(self._client_secret),
            repr(self._client_secret.encode())[2:-1],
        }
        for form in sorted(forms, key=len, reverse=True):
            if form:
                text = text.replace(form, "***")
        return text


def _access_token(body: str) -> str | None:
    try:
        token = json.loads(body)["access_token"]
    except (ValueError, KeyError, TypeError):
        return None
    return token if isinstance(token, str) else None


def _lifetime(payload: dict[str, Any], token: str) -> float:
    """Seconds the token lives: ``expires_in``, else the JWT's ``exp`` claim."""
    expires_in = payload.get("expires_in")
    if isinstance(expires_in, (int, float)) and expires_in > 0:
        return float(expires_in)
    try:
        claims = json.loads(_b64url(token.split(".")[1]))
        return max(0.0, float(claims["exp"]) - time.time())
    except (IndexError, ValueError, KeyError, TypeError):
        return _DEFAULT_LIFETIME


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
