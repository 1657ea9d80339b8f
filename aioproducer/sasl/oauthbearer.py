"""SASL OAUTHBEARER (RFC 7628, KIP-255): send a bearer token from a provider.

The client-first message is Kafka's (``OAuthBearerClientInitialResponse``)::

    n,,<0x01>auth=Bearer <token>[<0x01>key=value ...]<0x01><0x01>

A broker that refuses the token answers with a JSON error challenge; the
client replies with a single 0x01 (RFC 7628 section 3.2.3) and the broker then
ends the exchange with SASL_AUTHENTICATION_FAILED; the exchange has failed
whatever the broker answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .. import errors
from ..types import TokenProvider

__all__ = ["OAuthBearerExchange", "TokenProvider", "client_first_message"]

_SEP = "\x01"
# RFC 7628 section 3.1: key = 1*(ALPHA), value = *(VCHAR / SP / HTAB / CR / LF).
_KEY = re.compile(r"[A-Za-z]+\Z")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]*\Z")
# RFC 6750 b64token.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*\Z")


def client_first_message(token: str, extensions: Mapping[str, str] | None = None) -> bytes:
    """Kafka's OAUTHBEARER client-first message for ``token`` and ``extensions``."""
    if not _TOKEN.match(token):
        raise errors.SaslAuthenticationError(
            "OAUTHBEARER: the token provider returned something that is not a bearer token"
        )
    parts = [f"auth=Bearer {token}"]
    for key, value in (extensions or {}).items():
        if key == "auth" or not _KEY.match(key):
            raise errors.ConfigurationError(f"OAUTHBEARER extension name {key!r} is not allowed")
        if not _VALUE.match(value):
            raise errors.ConfigurationError(f"OAUTHBEARER extension {key!r} has an invalid value")
        parts.append(f"{key}={value}")
    return ("n,," + _SEP + _SEP.join(parts) + _SEP + _SEP).encode()


class OAuthBearerExchange:
    mechanism = "OAUTHBEARER"

    def __init__(self, provider: TokenProvider) -> None:
        self._provider = provider
        self._refused: str | None = None

    def __repr__(self) -> str:
        return "<OAuthBearerExchange>"

    async def first(self) -> bytes:
        token = await self._provider.token()
        extensions_fn = getattr(self._provider, "extensions", None)
        extensions = extensions_fn() if callable(extensions_fn) else None
        return client_first_message(token, extensions)

    async def step(self, server: bytes) -> bytes | None:
        if self._refused is not None:
            # RFC 7628 section 3.2.3: once the server sent an error challenge the
            # exchange has failed, whatever it answers to the %x01 (Kafka's
            # OAuthBearerSaslClient fails it too): a "success" now is no login.
            raise errors.SaslAuthenticationError(f"OAUTHBEARER token refused: {self._refused}")
        if not server:
            return None
        # The error challenge (RFC 7628 section 3.2.2): acknowledge it with
        # %x01 so the broker ends the exchange.
        self._refused = server.decode("utf-8", "replace")
        return _SEP.encode()
