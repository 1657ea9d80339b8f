"""Server side of the SASL mechanisms a Kafka broker offers: tokens in, tokens out.

No sockets here: an :class:`Authenticator` is fed the client's tokens (the
``auth_bytes`` of SaslAuthenticate requests, or raw v0 frames) together with
the current time, and returns the server's next token, or raises
:class:`SaslFailure` carrying the error message Kafka would answer. The mock
cluster and the TLS/SASL-terminating test front both drive it.

Mechanisms, as Kafka's server implements them:

* ``PLAIN`` (RFC 4616, ``PlainSaslServer``): ``authzid NUL user NUL password``;
  an authorization id other than the user is refused.
* ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802/7677, KIP-84) through
  :mod:`scramp`: two round trips; the server-final message carries the server
  signature (``v=...``), so the client can check that the broker knows the
  password.
* ``OAUTHBEARER`` (RFC 7628, KIP-255): the client's first message is a GS2
  header then ``auth=Bearer <token>`` and extensions separated by ``\\x01``.
  A refused token gets an error challenge (``{"status":"invalid_token"}``);
  the client acknowledges it with a lone ``\\x01`` and the exchange fails, as
  in Kafka's ``OAuthBearerSaslServer``. Tokens are checked by
  :func:`validate_unsecured_jwt` unless a validator is configured.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "MECHANISMS",
    "Authenticator",
    "OAuthBearerAuthenticator",
    "OAuthValidator",
    "PlainAuthenticator",
    "SaslFailure",
    "SaslServerConfig",
    "ScramAuthenticator",
    "new_authenticator",
    "sasl_server_config",
    "validate_unsecured_jwt",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# The default iteration count of kafka-configs.sh --alter --add-config SCRAM-...
SCRAM_ITERATIONS = 4096

OAuthValidator = Callable[[str], Mapping[str, Any]]


def _scramp() -> ModuleType:
    # Imported on first use: a mock cluster without SCRAM does not need scramp.
    try:
        import scramp  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            "the mock cluster's SCRAM mechanisms need the 'scramp' package: pip install scramp"
        ) from None
    return scramp


class SaslFailure(Exception):
    """Authentication refused; ``str(exc)`` is the message sent to the client."""


class SaslServerConfig:
    """What a SASL listener offers: mechanisms, users, token validator, session lifetime.

    SCRAM credentials (salt, stored and server keys) are derived once per
    user and mechanism, as a broker keeps them, rather than from the password
    on every login.
    """

    def __init__(
        self,
        mechanisms: Sequence[str],
        users: Mapping[str, str] | None = None,
        oauth_validator: OAuthValidator | None = None,
        session_lifetime_ms: int | None = None,
    ) -> None:
        if isinstance(mechanisms, str):
            mechanisms = [mechanisms]
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown or not mechanisms:
            raise ValueError(
                f"unsupported SASL mechanisms {unknown or list(mechanisms)}; "
                f"choose from {list(MECHANISMS)}"
            )
        if session_lifetime_ms is not None and session_lifetime_ms <= 0:
            raise ValueError("sasl_session_lifetime_ms must be positive (None: no expiry)")
        self.mechanisms = list(mechanisms)
        self.users = dict(users or {})
        self.oauth_validator = oauth_validator
        self.session_lifetime_ms = session_lifetime_ms
        self._scram: dict[tuple[str, str], tuple[Any, ...]] = {}

    def __repr__(self) -> str:
        # Passwords stay out: only user names are shown.
        return (
            f"SaslServerConfig(mechanisms={self.mechanisms}, users={sorted(self.users)}, "
            f"session_lifetime_ms={self.session_lifetime_ms})"
        )

    def scram_credential(self, mechanism: str, user: str) -> tuple[Any, ...] | None:
        """scramp's (salt, stored key, server key, iterations) for ``user``, None if unknown."""
        password = self.users.get(user)
        if password is None:
            return None
        key = (mechanism, user)
        if key not in self._scram:
            self._scram[key] = (
                _scramp()
                .ScramMechanism(mechanism)
                .make_auth_info(password, iteration_count=SCRAM_ITERATIONS)
            )
        return self._scram[key]


class Authenticator:
    """One SASL exchange on the server side."""

    mechanism: str = ""

    def __init__(self, config: SaslServerConfig) -> None:
        self.config = config
        self.complete = False
        #: The authenticated user (Kafka's principal name) once complete.
        self.principal: str | None = None
        #: When the credential itself expires (an OAuth token's ``exp``), in ms.
        self.credential_expiry_ms: int | None = None
        #: Named in Kafka's failure messages: "authentication" or "re-authentication".
        self.phase = "authentication"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(complete={self.complete}, principal={self.principal!r})"

    def step(self, token: bytes, now_ms: int) -> bytes:
        """Consume the client's token; return the server's. Raises SaslFailure."""
        raise NotImplementedError


class PlainAuthenticator(Authenticator):
    mechanism = "PLAIN"

    def step(self, token: bytes, now_ms: int) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if self.config.users.get(user) != password:
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.principal = user
        self.complete = True
        return b""


class ScramAuthenticator(Authenticator):
    """SCRAM through scramp; a second step checks the client proof and signs."""

    def __init__(self, config: SaslServerConfig, mechanism: str) -> None:
        super().__init__(config)
        self.mechanism = mechanism
        scramp = _scramp()
        self._errors = (scramp.ScramException, KeyError)
        self._server = scramp.ScramMechanism(mechanism).make_server(self._credential)
        self._user: str | None = None
        self._unknown_user = False

    def _credential(self, user: str) -> tuple[Any, ...]:
        self._user = user
        found = self.config.scram_credential(self.mechanism, user)
        if found is None:
            self._unknown_user = True
            raise KeyError(user)
        return found

    def _failed(self) -> SaslFailure:
        # Kafka answers unknown users and wrong proofs alike (ScramSaslServer
        # raises a SaslException that SaslServerAuthenticator turns into this).
        return SaslFailure(
            f"Authentication failed during {self.phase} due to invalid credentials "
            f"with SASL mechanism {self.mechanism}"
        )

    def step(self, token: bytes, now_ms: int) -> bytes:
        message = token.decode("utf-8", "replace")
        try:
            if self._server.stage is None:
                self._server.set_client_first(message)
                return str(self._server.get_server_first()).encode("utf-8")
            self._server.set_client_final(message)
            final = str(self._server.get_server_final())
        except self._errors as exc:
            raise self._failed() from exc
        self.principal = self._user
        self.complete = True
        return final.encode("utf-8")


class OAuthBearerAuthenticator(Authenticator):
    mechanism = "OAUTHBEARER"

    def __init__(self, config: SaslServerConfig) -> None:
        super().__init__(config)
        self._error: str | None = None
        #: SASL extensions the client sent (KIP-342), e.g. a logical cluster id.
        self.extensions: dict[str, str] = {}

    def step(self, token: bytes, now_ms: int) -> bytes:
        if self._error is not None:
            # RFC 7628 3.2.3: the client answers the error challenge with %x01.
            raise SaslFailure(self._error)
        try:
            authzid, fields = _parse_oauth_initial(token.decode("utf-8"))
            header = fields.pop("auth", "")
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer" or not value:
                raise SaslFailure(f"Invalid OAUTHBEARER client first message: auth={header!r}")
            validator = self.config.oauth_validator
            claims = (
                validator(value) if validator is not None else validate_unsecured_jwt(value, now_ms)
            )
            principal = claims.get("sub")
            if not isinstance(principal, str) or not principal:
                raise SaslFailure("Authentication failed: the token has no 'sub' claim")
            if authzid and authzid != principal:
                raise SaslFailure(
                    f"Authentication failed: Client requested an authorization id ({authzid}) "
                    f"that is different from the token's principal name ({principal})"
                )
        except Exception as exc:  # noqa: BLE001 - a validator refuses a token by raising anything
            self._error = json.dumps({"status": "invalid_token", "message": str(exc)})
            return self._error.encode("utf-8")
        exp = claims.get("exp")
        if isinstance(exp, (int, float)):
            self.credential_expiry_ms = int(exp * 1000)
        self.extensions = fields
        self.principal = principal
        self.complete = True
        return b""


def _parse_oauth_initial(message: str) -> tuple[str | None, dict[str, str]]:
    """(authzid, key/value fields) of an RFC 7628 client initial response."""
    gs2, sep, rest = message.partition(",")
    authz, sep2, rest = rest.partition(",")
    if gs2 != "n" or not sep or not sep2 or not rest.startswith("\x01"):
        raise SaslFailure("Invalid OAUTHBEARER client first message: bad GS2 header")
    if authz and not authz.startswith("a="):
        raise SaslFailure("Invalid OAUTHBEARER client first message: bad authzid")
    if not rest.endswith("\x01\x01"):
        raise SaslFailure("Invalid OAUTHBEARER client first message: missing terminator")
    fields: dict[str, str] = {}
    for pair in rest[1:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise SaslFailure(f"Invalid OAUTHBEARER key/value pair {key!r}")
        fields[key] = value
    return (authz[2:] or None), fields


def _b64url_json(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def validate_unsecured_jwt(token: str, now_ms: int | None = None) -> dict[str, Any]:
    """Claims of an unsecured JWT, checked as Kafka's default validator does.

    ``OAuthBearerUnsecuredValidatorCallbackHandler``: header ``alg`` is
    ``none``, the signature part is empty, the payload is base64url JSON with a
    string ``sub`` and a numeric ``exp`` (seconds) still in the future.
    Raises ValueError naming what is wrong.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("an unsecured JWT has three dot-separated parts")
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"the token is not base64url-encoded JSON: {exc}") from None
    # ValueError throughout, not TypeError: these are facts about the token's content.
    if not isinstance(header, dict) or header.get("alg") != "none" or parts[2]:
        raise ValueError("an unsecured JWT must have alg 'none' and no signature")
    if not isinstance(claims, dict) or not isinstance(claims.get("sub"), str):
        raise ValueError("the token has no string 'sub' claim")  # noqa: TRY004
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool):
        raise ValueError("the token has no numeric 'exp' claim")  # noqa: TRY004
    now = time.time() * 1000 if now_ms is None else now_ms
    if exp * 1000 <= now:
        raise ValueError(f"the token expired at {exp} (now {now / 1000:.3f})")
    return claims


def sasl_server_config(
    mechanisms: Sequence[str] | None,
    users: Mapping[str, str] | None = None,
    oauth_validator: OAuthValidator | None = None,
    session_lifetime_ms: int | None = None,
) -> SaslServerConfig | None:
    """A listener's SASL settings, or None when it offers no mechanism (no SASL)."""
    if mechanisms is None:
        if users or oauth_validator is not None or session_lifetime_ms is not None:
            raise ValueError(
                "users, oauth_validator and sasl_session_lifetime_ms need sasl_mechanisms"
            )
        return None
    return SaslServerConfig(mechanisms, users, oauth_validator, session_lifetime_ms)


def new_authenticator(mechanism: str, config: SaslServerConfig) -> Authenticator:
    """A fresh server-side exchange for one of ``config.mechanisms``."""
    if mechanism == "PLAIN":
        return PlainAuthenticator(config)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramAuthenticator(config, mechanism)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerAuthenticator(config)
    raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
