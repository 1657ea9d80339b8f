"""The SASL mechanisms this client speaks: one table, read by the client and the mock broker.

A mechanism is one module under :mod:`aioproducer.sasl` (its client-side
exchange) plus one :class:`Mechanism` row in :data:`REGISTRY`. The row says
which settings the mechanism takes (a user name and password, or an
OAUTHBEARER token source), how to check them, how to build a fresh exchange,
and where the mock broker's server side lives (a ``"module:Class"`` pointer,
so this package never imports :mod:`aioproducer.testing`). Nothing else
dispatches on a mechanism's name. docs/contributing.md has the recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigurationError
from ..types import TokenProvider
from .oauthbearer import OAuthBearerExchange
from .plain import PlainExchange, check_plain_credentials
from .scram import ScramExchange

__all__ = [
    "MECHANISMS",
    "REGISTRY",
    "Mechanism",
    "mechanism_for",
    "unknown_mechanism_message",
]

_MOCK = "aioproducer.testing.mock.sasl"

#: What a mechanism's exchange is built from: (mechanism, username, password, token provider).
ExchangeFactory = Callable[[str, "str | None", "str | None", "TokenProvider | None"], object]


@dataclass(frozen=True)
class Mechanism:
    """One SASL mechanism: what the client and the mock broker need to know about it."""

    name: str
    #: "password": sasl_plain_username + sasl_plain_password;
    #: "token": sasl_oauth_token_provider or the sasl_oauthbearer_* endpoint settings.
    settings: Literal["password", "token"]
    #: Builds a fresh client exchange (a :class:`~aioproducer.sasl.SaslExchange`).
    new_exchange: ExchangeFactory
    #: "module:Class" of the mock broker's server side; the class has
    #: ``serve(mechanism, config) -> Authenticator``.
    server: str
    #: Extra checks of the username and password (raise ConfigurationError), or None.
    check_password: Callable[[str, str], None] | None = None


def _plain(mechanism: str, user: str | None, password: str | None, _: object) -> PlainExchange:
    assert user is not None and password is not None
    return PlainExchange(user, password)


def _scram(mechanism: str, user: str | None, password: str | None, _: object) -> ScramExchange:
    assert user is not None and password is not None
    return ScramExchange(mechanism, user, password)


def _oauthbearer(
    mechanism: str, _u: str | None, _p: str | None, provider: TokenProvider | None
) -> OAuthBearerExchange:
    assert provider is not None
    return OAuthBearerExchange(provider)


REGISTRY: dict[str, Mechanism] = {
    m.name: m
    for m in (
        # RFC 4616; Java PlainLoginModule / PlainSaslServer.
        Mechanism(
            "PLAIN", "password", _plain, f"{_MOCK}:PlainAuthenticator", check_plain_credentials
        ),
        # RFC 5802/7677, KIP-84; Java ScramSaslClient / ScramSaslServer.
        Mechanism("SCRAM-SHA-256", "password", _scram, f"{_MOCK}:ScramAuthenticator"),
        Mechanism("SCRAM-SHA-512", "password", _scram, f"{_MOCK}:ScramAuthenticator"),
        # RFC 7628, KIP-255/768; Java OAuthBearerSaslClient / OAuthBearerSaslServer.
        # AWS MSK IAM rides on it: MSKIAMTokenProvider (aioproducer.sasl.msk_iam).
        Mechanism("OAUTHBEARER", "token", _oauthbearer, f"{_MOCK}:OAuthBearerAuthenticator"),
    )
}

#: The registered mechanism names, in table order.
MECHANISMS: tuple[str, ...] = tuple(REGISTRY)

# Names users bring from other clients that this one does not speak, and what to do instead.
_HINTS = {
    "AWS_MSK_IAM": (
        "for AWS MSK IAM use sasl_mechanism='OAUTHBEARER' with "
        "sasl_oauth_token_provider=aioproducer.sasl.MSKIAMTokenProvider(region=...) "
        "(pip install 'aioproducer[msk-iam]')"
    ),
    "GSSAPI": "GSSAPI (Kerberos) is not supported",
}


def unknown_mechanism_message(given: object) -> str:
    """The error for a mechanism that is not registered: it lists the registered ones."""
    message = f"sasl_mechanism {given!r} is not supported (supported: {', '.join(REGISTRY)})"
    hint = _HINTS.get(str(given).strip().upper())
    return f"{message}; {hint}" if hint else message


def mechanism_for(name: str) -> Mechanism:
    """The registered :class:`Mechanism` called ``name`` (case-insensitive); ConfigurationError if none."""
    try:
        return REGISTRY[name.strip().upper()]
    except (KeyError, AttributeError):
        raise ConfigurationError(unknown_mechanism_message(name)) from None
