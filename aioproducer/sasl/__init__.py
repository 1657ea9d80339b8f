"""SASL authentication (KIP-43, KIP-152, KIP-368): the mechanisms and their credentials.

Each mechanism is a small exchange object (``first()`` then ``step(server)``)
that knows nothing of sockets; :mod:`aioproducer.net.sasl_handshake` carries its messages in
SaslHandshake / SaslAuthenticate requests on a connection and keeps the
session alive by authenticating again before the broker's lifetime ends.
"""

from __future__ import annotations

from .credentials import SaslCredentials, SaslExchange
from .msk_iam import MSKIAMTokenProvider
from .oauthbearer import TokenProvider
from .oidc import ClientCredentialsTokenProvider
from .registry import MECHANISMS, REGISTRY, Mechanism

__all__ = [
    "MECHANISMS",
    "REGISTRY",
    "ClientCredentialsTokenProvider",
    "MSKIAMTokenProvider",
    "Mechanism",
    "SaslCredentials",
    "SaslExchange",
    "TokenProvider",
]
