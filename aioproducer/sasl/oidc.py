"""A built-in OAUTHBEARER token provider: OAuth 2 client credentials (KIP-768).

POSTs ``grant_type=client_credentials`` (and ``scope``) to the token endpoint
with HTTP Basic client authentication, as Java's
``OAuthBearerLoginCallbackHandler`` does. The access token is cached and
refreshed in the background ahead of its expiry, as Java's
``ExpiringCredentialRefreshingLogin`` does (:mod:`.token_refresh`: at
``refresh_window`` of its lifetime, Java's ``sasl.login.refresh.window.factor``
0.8, plus jitter, within ``sasl.login.refresh.buffer.seconds`` and
``.min.period.seconds``), so re-authentication never waits for the endpoint;
a refresh that fails keeps the still-valid token and is retried with backoff.
With no valid token, an unreachable endpoint or an HTTP 5xx is retried like a
broker connection (ConnectionFailedError) and an HTTP 4xx refusal is final
(SaslAuthenticationError). Needs aiohttp: ``pip install aioproducer[oauth]``.
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
from .token_refresh import RefreshingToken, RefreshingTokenProvider

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


class ClientCredentialsTokenProvider(RefreshingTokenProvider):
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
        refresh_window_jitter: float = 0.05,
        refresh_min_period_s: float = 60.0,
        refresh_buffer_s: float = 300.0,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10000,
    ) -> None:
        self._aiohttp = _require_aiohttp()
        if not token_endpoint_url.startswith(("https://", "http://")):
            raise errors.ConfigurationError(
                f"sasl_oauthbearer_token_endpoint_url must be an http(s) URL, got {token_endpoint_url!r}"
            )
        if not 0 < refresh_window <= 1:
            raise errors.ConfigurationError("refresh_window must be in (0, 1]")
        if not 0 <= refresh_window_jitter <= 1 - refresh_window:
            raise errors.ConfigurationError(
                "refresh_window_jitter must be in [0, 1 - refresh_window]"
            )
        if refresh_min_period_s < 0 or refresh_buffer_s < 0:
            raise errors.ConfigurationError(
                "refresh_min_period_s and refresh_buffer_s must be >= 0"
            )
        if not 0 < retry_backoff_ms <= retry_backoff_max_ms:
            raise errors.ConfigurationError("need 0 < retry_backoff_ms <= retry_backoff_max_ms")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self._ssl = ssl_context
        self._timeout = timeout_ms / 1000
        self._extensions = dict(extensions or {})
        self._tokens = RefreshingToken(
            self._fetch,
            describe=f"token endpoint {token_endpoint_url}",
            window=refresh_window,
            jitter=refresh_window_jitter,
            min_period=refresh_min_period_s,
            buffer=refresh_buffer_s,
            retry_backoff=retry_backoff_ms / 1000,
            retry_backoff_max=retry_backoff_max_ms / 1000,
        )

    def __repr__(self) -> str:
        return (
            f"<ClientCredentialsTokenProvider {self.token_endpoint_url} "
            f"client_id={self.client_id!r} scope={self.scope!r}>"
        )

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    async def _fetch(self) -> tuple[str, float]:
        """(access token, lifetime in seconds) from the endpoint."""
        aiohttp = self._aiohttp
        data = {"grant_type": "client_credentials"}
        if self.scope:
            data["scope"] = self.scope
        url = self.token_endpoint_url
        failure: str | None = None
        try:
            async with (
                aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=self._timeout)
                ) as session,
                session.post(
                    url,
                    data=data,
                    headers={"Accept": "application/json", "Authorization": self._basic_auth()},
                    ssl=self._ssl if self._ssl is not None else True,
                ) as response,
            ):
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
            raise errors.ConnectionFailedError(
                f"OAUTHBEARER: token endpoint {url} failed: {failure}"
            )
        body = raw.decode(charset, "replace")
        if status >= 500:
            raise errors.ConnectionFailedError(
                f"OAUTHBEARER: token endpoint {url} answered HTTP {status}"
            )
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
        return token, _lifetime(json.loads(body), token)

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
