"""What a connection needs to authenticate: the mechanism and its secrets.

:class:`SaslCredentials` is built once from the producer configuration and
hands out a fresh :class:`SaslExchange` per authentication (SCRAM needs a new
nonce each time, OAUTHBEARER a current token). Secrets stay out of ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .oauthbearer import OAuthBearerExchange, TokenProvider
from .plain import PlainExchange
from .scram import SCRAM_MECHANISMS, ScramExchange

__all__ = ["MECHANISMS", "SaslCredentials", "SaslExchange"]

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")


class SaslExchange(Protocol):
    """One authentication, as the client side of a challenge/response dialogue."""

    mechanism: str

    async def first(self) -> bytes:
        """The client's first message."""
        ...

    async def step(self, server: bytes) -> bytes | None:
        """The next client message for the server's answer, or None when done.

        Raises SaslAuthenticationError when the server's answer proves the
        exchange failed (a SCRAM server error or a server that cannot prove
        it knows the password).
        """
        ...


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_provider: TokenProvider | None = field(default=None, repr=False)

    def exchange(self) -> SaslExchange:
        if self.mechanism == "PLAIN":
            assert self.username is not None and self.password is not None
            return PlainExchange(self.username, self.password)
        if self.mechanism in SCRAM_MECHANISMS:
            assert self.username is not None and self.password is not None
            return ScramExchange(self.mechanism, self.username, self.password)
        assert self.mechanism == "OAUTHBEARER" and self.token_provider is not None
        return OAuthBearerExchange(self.token_provider)
