"""The SASL APIs (KIP-43, KIP-152), written down as data like ``messages.py``.

A connection to a SASL listener sends SaslHandshake (key 17) to choose a
mechanism, then one or more SaslAuthenticate (key 36) requests carrying the
mechanism's opaque tokens, before any other request except ApiVersions.
SaslHandshake v1 announces that the tokens travel inside SaslAuthenticate
frames (KIP-152) rather than as raw length-prefixed bytes after v0.
SaslAuthenticate v1 adds ``session_lifetime_ms`` to the answer (KIP-368): a
client must authenticate again on the same connection before it ends.
v2 is the flexible version (KIP-482).

Field version ranges follow Apache Kafka's JSON message definitions
(``SaslHandshakeRequest.json``, ``SaslAuthenticateRequest.json``).
"""

from __future__ import annotations

from .messages import Api
from .schema import BYTES, INT16, INT64, STRING, Array, Field, Struct

__all__ = ["SASL_APIS", "SASL_AUTHENTICATE", "SASL_HANDSHAKE"]

F = Field

SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    min_version=0,
    max_version=1,
    # SaslHandshake has no flexible version.
    flexible_from=99,
    request=Struct(F("mechanism", STRING)),
    response=Struct(
        F("error_code", INT16),
        F("mechanisms", Array(STRING)),
    ),
)

SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request=Struct(F("auth_bytes", BYTES)),
    response=Struct(
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F("auth_bytes", BYTES),
        F("session_lifetime_ms", INT64, "1+"),
    ),
)

SASL_APIS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
