"""What a connection needs to authenticate: the mechanism and its secrets.

:class:`SaslCredentials` is built once from the producer configuration and
hands out a fresh :class:`SaslExchange` per authentication (SCRAM needs a new
nonce each time, OAUTHBEARER a current token). Secrets stay out of ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, cast

from ..types import TokenProvider
from .registry import MECHANISMS, REGISTRY

__all__ = ["MECHANISMS", "SaslCredentials", "SaslExchange"]


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
        """A fresh exchange for one authentication (the registry builds it)."""
        build = REGISTRY[self.mechanism].new_exchange
        return cast(
            SaslExchange, build(self.mechanism, self.username, self.password, self.token_provider)
        )
