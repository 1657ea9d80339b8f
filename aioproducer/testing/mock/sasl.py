"""Server side of the SASL mechanisms a Kafka broker offers: tokens in, tokens out.

No sockets here: an :class:`Authenticator` is fed the client's tokens (the
``auth_bytes`` of SaslAuthenticate requests, or raw v0 frames) together with
the current time, and returns the server's next token, or raises
:class:`SaslFailure` carrying the error message Kafka would answer. The mock
cluster and the TLS/SASL-terminating test front both drive it.

Mechanisms, as Kafka's server implements them:

* ``PLAIN`` (RFC 4616, ``PlainSaslServer``): ``authzid NUL user NUL password``;
  an authorization id other than the user is refused.
* ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (RFC 5802/7677, KIP-84), as Kafka's
  ``ScramSaslServer``: two round trips; credentials are derived from the raw
  UTF-8 bytes of the password (no SASLprep, ``ScramFormatter``); the
  server-final message carries the server signature (``v=...``), so the
  client can check that the broker knows the password.
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
import hashlib
import hmac
import importlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...sasl.registry import MECHANISMS, REGISTRY

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


# The default iteration count of kafka-configs.sh --alter --add-config SCRAM-...
SCRAM_ITERATIONS = 4096
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

OAuthValidator = Callable[[str], Mapping[str, Any]]


class SaslFailure(Exception):
    """Authentication refused; ``str(exc)`` is the message sent to the client."""


class SaslServerConfig:
    """What a SASL listener offers: mechanisms, users, token validator, session lifetime.

    SCRAM credentials (salt, stored and server keys) are derived once per
    user, password and mechanism, as a broker keeps them, from the raw UTF-8
    bytes of the password as Kafka's ``ScramFormatter`` does; only when a
    client proof has to be checked.
    """

    def __init__(
        self,
        mechanisms: Sequence[str],
        users: Mapping[str, str] | None = None,
        oauth_validator: OAuthValidator | None = None,
        session_lifetime_ms: int | None = None,
        scram_iterations: int = SCRAM_ITERATIONS,
    ) -> None:
        if isinstance(mechanisms, str):
            mechanisms = [mechanisms]
        unknown = [m for m in mechanisms if m not in REGISTRY]
        if unknown or not mechanisms:
            raise ValueError(
                f"unsupported SASL mechanisms {unknown or list(mechanisms)}; "
                f"choose from {list(REGISTRY)}"
            )
        if session_lifetime_ms is not None and session_lifetime_ms <= 0:
            raise ValueError("sasl_session_lifetime_ms must be positive (None: no expiry)")
        if scram_iterations < 1:
            raise ValueError("scram_iterations must be positive")
        self.mechanisms = list(mechanisms)
        self.users = dict(users or {})
        self.oauth_validator = oauth_validator
        self.session_lifetime_ms = session_lifetime_ms
        #: Iterations the SCRAM credentials are derived with (sent in server-first).
        #: Any count is offered, even one a Kafka broker would not store, to see
        #: what a client makes of it.
        self.scram_iterations = scram_iterations
        self._scram_salts: dict[tuple[str, str], bytes] = {}
        self._scram_keys: dict[tuple[str, str, str, int, bytes], tuple[bytes, bytes]] = {}

    def __repr__(self) -> str:
        # Passwords stay out: only user names are shown.
        return (
            f"SaslServerConfig(mechanisms={self.mechanisms}, users={sorted(self.users)}, "
            f"session_lifetime_ms={self.session_lifetime_ms})"
        )

    def scram_salt(self, mechanism: str, user: str) -> bytes | None:
        """The salt of ``user``'s SCRAM credential, None for an unknown user."""
        if user not in self.users:
            return None
        # Kafka's salt: secureRandomBytes, a base-36 string's bytes.
        return self._scram_salts.setdefault((mechanism, user), os.urandom(16).hex().encode())

    def scram_keys(self, mechanism: str, user: str, salt: bytes) -> tuple[bytes, bytes] | None:
        """(StoredKey, ServerKey) of ``user``'s credential (RFC 5802), None if unknown."""
        password = self.users.get(user)
        if password is None:
            return None
        iterations = self.scram_iterations
        key = (mechanism, user, password, iterations, salt)
        if key not in self._scram_keys:
            name = _SCRAM_HASHES[mechanism]
            salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
            client_key = hmac.new(salted, b"Client Key", name).digest()
            self._scram_keys[key] = (
                hashlib.new(name, client_key).digest(),
                hmac.new(salted, b"Server Key", name).digest(),
            )
        return self._scram_keys[key]


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

    @classmethod
    def serve(cls, mechanism: str, config: SaslServerConfig) -> Authenticator:
        """A fresh exchange for ``mechanism`` (the registry's ``server`` pointer names the class)."""
        return cls(config)

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
    """Kafka's ``ScramSaslServer``: server-first, then check the client proof and sign."""

    @classmethod
    def serve(cls, mechanism: str, config: SaslServerConfig) -> Authenticator:
        return cls(config, mechanism)

    def __init__(self, config: SaslServerConfig, mechanism: str) -> None:
        super().__init__(config)
        self.mechanism = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self._user: str | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._salt = b""

    def _failed(self) -> SaslFailure:
        # Kafka answers unknown users and wrong proofs alike (ScramSaslServer
        # raises a SaslException that SaslServerAuthenticator turns into this).
        return SaslFailure(
            f"Authentication failed during {self.phase} due to invalid credentials "
            f"with SASL mechanism {self.mechanism}"
        )

    def step(self, token: bytes, now_ms: int) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed() from None
        if not self._server_first:
            return self._first(message).encode("utf-8")
        final = self._final(message)
        self.principal = self._user
        self.complete = True
        return final.encode("utf-8")

    def _first(self, message: str) -> str:
        # gs2-header "n," [ "a=" authzid ] "," then client-first-message-bare.
        cbind, _, rest = message.partition(",")
        authz, _, bare = rest.partition(",")
        fields = bare.split(",")
        if (
            cbind != "n"
            or len(fields) < 2
            or not fields[0].startswith("n=")
            or not fields[1].startswith("r=")
        ):
            raise self._failed()
        user = _scram_username(fields[0][2:])
        if user is None or (authz and authz != f"a={fields[0][2:]}"):
            raise self._failed()
        salt = self.config.scram_salt(self.mechanism, user)
        if salt is None or len(fields[1]) <= 2:
            raise self._failed()
        self._user, self._salt, self._client_first_bare = user, salt, bare
        self._nonce = fields[1][2:] + base64.b64encode(os.urandom(18)).decode().replace("/", "-")
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(salt).decode()},i={self.config.scram_iterations}"
        )
        return self._server_first

    def _final(self, message: str) -> str:
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except (binascii.Error, ValueError):
            raise self._failed() from None
        if not sep or without_proof != f"c=biws,r={self._nonce}":
            raise self._failed()
        assert self._user is not None
        keys = self.config.scram_keys(self.mechanism, self._user, self._salt)
        if keys is None:
            raise self._failed()
        stored_key, server_key = keys
        auth = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth, self._hash).digest()
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), stored_key):
            raise self._failed()
        return "v=" + base64.b64encode(hmac.new(server_key, auth, self._hash).digest()).decode()


def _scram_username(saslname: str) -> str | None:
    """Kafka's ``ScramFormatter.username``: =2C -> ",", =3D -> "="; any other "=" is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        return None
    return name.replace("=3D", "=")


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
    scram_iterations: int | None = None,
) -> SaslServerConfig | None:
    """A listener's SASL settings, or None when it offers no mechanism (no SASL)."""
    if mechanisms is None:
        if (
            users
            or oauth_validator is not None
            or session_lifetime_ms is not None
            or scram_iterations is not None
        ):
            raise ValueError(
                "users, oauth_validator, sasl_session_lifetime_ms and scram_iterations "
                "need sasl_mechanisms"
            )
        return None
    return SaslServerConfig(
        mechanisms,
        users,
        oauth_validator,
        session_lifetime_ms,
        SCRAM_ITERATIONS if scram_iterations is None else scram_iterations,
    )


def new_authenticator(mechanism: str, config: SaslServerConfig) -> Authenticator:
    """A fresh server-side exchange for one of ``config.mechanisms``."""
    entry = REGISTRY.get(mechanism)
    if entry is None:
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
    # The client's registry points at the server side ("module:Class"): the
    # arrow runs from the mock to aioproducer.sasl, never back.
    module, _, name = entry.server.partition(":")
    server: Any = getattr(importlib.import_module(module), name)
    authenticator: Authenticator = server.serve(mechanism, config)
    return authenticator
