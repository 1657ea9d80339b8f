"""Per-connection SASL state of a broker listener: which requests it admits, and when.

:class:`SaslSession` is fed every request frame a connection receives and the
current time; it answers SaslHandshake and SaslAuthenticate itself, and says
whether any other request may be served. It does no I/O: the caller writes
the :class:`Reply` bytes and closes the connection when told to. The rules are
those of Kafka's ``SaslServerAuthenticator``:

* before authentication only ApiVersions and SaslHandshake are admitted; after
  a SaslHandshake v1 only SaslAuthenticate. Anything else closes the
  connection (Kafka fails the channel with IllegalSaslStateException);
* a mechanism the listener does not offer is answered
  UNSUPPORTED_SASL_MECHANISM (33) with the offered list, then the connection
  is closed; refused credentials get SASL_AUTHENTICATION_FAILED (58) with
  Kafka's message, then the connection is closed;
* SaslHandshake v0 (before KIP-152) is followed by raw size-prefixed tokens
  instead of SaslAuthenticate requests; a refused v0 token closes the
  connection, since that framing has no way to carry an error;
* KIP-368: with a session lifetime, SaslAuthenticate v1+ announces it; once
  it has passed, any request other than SaslHandshake or ApiVersions closes
  the connection. A SaslHandshake on an authenticated connection starts a
  re-authentication, which must keep the mechanism and the principal, and
  which starts a new session.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import struct
from typing import Any

from ...protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, Api
from ...protocol.framing import decode_request, encode_response
from ...protocol.generated import SaslAuthenticateResponse, SaslHandshakeResponse
from ...protocol.generated._wire import MessageError
from .sasl import Authenticator, SaslFailure, SaslServerConfig, new_authenticator

__all__ = ["SASL_API_VERSIONS", "Reply", "SaslSession", "SaslStats"]

#: Versions a SASL listener adds to its ApiVersions answer.
SASL_API_VERSIONS: dict[int, tuple[int, int]] = {
    SASL_HANDSHAKE.key: (SASL_HANDSHAKE.min_version, SASL_HANDSHAKE.max_version),
    SASL_AUTHENTICATE.key: (SASL_AUTHENTICATE.min_version, SASL_AUTHENTICATE.max_version),
}

_SASL_APIS: dict[int, Api[Any, Any]] = {
    SASL_HANDSHAKE.key: SASL_HANDSHAKE,
    SASL_AUTHENTICATE.key: SASL_AUTHENTICATE,
}
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_NONE = 0
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58


@dataclasses.dataclass(frozen=True)
class Reply:
    """What to do with a frame the session consumed: write ``data``, then maybe close."""

    data: bytes = b""
    close: bool = False


_REFUSE = Reply(close=True)


class SaslStats:
    """Completed and failed authentications, per mechanism, over every connection."""

    def __init__(self) -> None:
        self.completed: collections.Counter[str] = collections.Counter()
        self.failed: collections.Counter[str] = collections.Counter()
        #: Connections closed because their session had expired (KIP-368).
        self.expired_sessions = 0
        #: Completed re-authentications (KIP-368), a subset of the completed ones.
        self.reauthentications = 0

    @property
    def authentications(self) -> int:
        """Authentications completed, every mechanism together."""
        return sum(self.completed.values())

    def __repr__(self) -> str:
        return (
            f"SaslStats(completed={dict(self.completed)}, failed={dict(self.failed)}, "
            f"expired_sessions={self.expired_sessions}, "
            f"reauthentications={self.reauthentications})"
        )


class _State(enum.Enum):
    START = "start"  # nothing but ApiVersions / SaslHandshake yet
    AUTHENTICATING = "authenticating"  # after a handshake: tokens only
    AUTHENTICATED = "authenticated"


class SaslSession:
    """The SASL state of one connection to a SASL listener."""

    def __init__(self, config: SaslServerConfig, stats: SaslStats) -> None:
        self.config = config
        self.stats = stats
        self._state = _State.START
        self._raw_tokens = False  # SaslHandshake v0: tokens arrive as bare frames
        self._exchange: Authenticator | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None
        #: When the current session ends (KIP-368), None if it does not.
        self.expires_at_ms: int | None = None

    def __repr__(self) -> str:
        return (
            f"SaslSession({self._state.value}, mechanism={self.mechanism}, "
            f"principal={self.principal!r}, expires_at_ms={self.expires_at_ms})"
        )

    @property
    def authenticated(self) -> bool:
        return self._state is _State.AUTHENTICATED

    @property
    def expects_raw_token(self) -> bool:
        """Whether the next frame is a bare token (after SaslHandshake v0), not a request."""
        return self._raw_tokens

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def receive(self, frame: bytes, now_ms: int) -> Reply | None:
        """Consume a SASL frame (return the Reply), or None: serve this request normally."""
        if self._raw_tokens:
            return self._raw_token(frame, now_ms)
        if len(frame) < _API_KEY.size:
            return _REFUSE
        (api_key,) = _API_KEY.unpack_from(frame, 0)
        state = self._state
        if api_key == SASL_HANDSHAKE.key and state is not _State.AUTHENTICATING:
            return self._decoded(frame, now_ms)
        if api_key == SASL_AUTHENTICATE.key and state is _State.AUTHENTICATING:
            return self._decoded(frame, now_ms)
        if api_key == API_VERSIONS.key and state is not _State.AUTHENTICATING:
            return None
        if state is _State.AUTHENTICATED:
            if self.expired(now_ms):
                self.stats.expired_sessions += 1
                return _REFUSE
            if api_key == SASL_AUTHENTICATE.key:
                return self._decoded(frame, now_ms)
            return None
        # Kafka closes the channel: a request before (or during) authentication,
        # or after the session expired (KIP-368).
        return _REFUSE

    # -- the two SASL APIs -----------------------------------------------------

    def _decoded(self, frame: bytes, now_ms: int) -> Reply:
        try:
            api, version, correlation_id, _client, body = decode_request(frame, _SASL_APIS)
        except (MessageError, UnicodeDecodeError, ValueError, IndexError):
            return _REFUSE
        response: SaslHandshakeResponse | SaslAuthenticateResponse
        if api is SASL_HANDSHAKE:
            response, close = self._handshake(version, body.mechanism)
        elif self.authenticated:
            # Kafka's KafkaApis answers this; the connection stays usable.
            response, close = (
                SaslAuthenticateResponse(
                    error_code=_ILLEGAL_SASL_STATE,
                    error_message="SaslAuthenticate request received after successful "
                    "authentication",
                ),
                False,
            )
        else:
            response, close = self._authenticate(version, body.auth_bytes, now_ms)
        return Reply(encode_response(api, version, correlation_id, response), close)

    def _handshake(self, version: int, mechanism: str | None) -> tuple[SaslHandshakeResponse, bool]:
        offered = list(self.config.mechanisms)
        if mechanism not in offered:
            self._fail(mechanism or "")
            return SaslHandshakeResponse(_UNSUPPORTED_SASL_MECHANISM, offered), True
        if self._state is _State.AUTHENTICATED and mechanism != self.mechanism:
            # KIP-368: re-authentication keeps the mechanism.
            self._fail(mechanism)
            return SaslHandshakeResponse(_ILLEGAL_SASL_STATE, offered), True
        if self._state is _State.AUTHENTICATED and version == 0:
            return SaslHandshakeResponse(_ILLEGAL_SASL_STATE, offered), True
        self._exchange = new_authenticator(mechanism, self.config)
        if self._state is _State.AUTHENTICATED:
            self._exchange.phase = "re-authentication"
        self.mechanism = mechanism
        self._state = _State.AUTHENTICATING
        self._raw_tokens = version == 0
        return SaslHandshakeResponse(_NONE, offered), False

    def _authenticate(
        self, version: int, token: bytes, now_ms: int
    ) -> tuple[SaslAuthenticateResponse, bool]:
        try:
            answer = self._step(token, now_ms)
        except SaslFailure as exc:
            response = SaslAuthenticateResponse(
                error_code=_SASL_AUTHENTICATION_FAILED, error_message=str(exc)
            )
            return response, True
        lifetime = 0
        if self.authenticated and self.expires_at_ms is not None:
            lifetime = self.expires_at_ms - now_ms
        return SaslAuthenticateResponse(
            error_code=_NONE, error_message=None, auth_bytes=answer, session_lifetime_ms=lifetime
        ), False

    def _raw_token(self, token: bytes, now_ms: int) -> Reply:
        try:
            answer = self._step(token, now_ms)
        except SaslFailure:
            return _REFUSE
        if self.authenticated:
            self._raw_tokens = False
        return Reply(_SIZE.pack(len(answer)) + answer)

    # -- one token of the exchange ------------------------------------------------

    def _step(self, token: bytes, now_ms: int) -> bytes:
        exchange = self._exchange
        assert exchange is not None and self.mechanism is not None
        try:
            answer = exchange.step(token, now_ms)
            if exchange.complete and self.principal not in (None, exchange.principal):
                raise SaslFailure(
                    f"Cannot change principals during re-authentication from "
                    f"{self.principal} to {exchange.principal}"
                )
        except SaslFailure:
            self._fail(self.mechanism)
            raise
        if exchange.complete:
            self._complete(exchange, now_ms)
        return answer

    def _complete(self, exchange: Authenticator, now_ms: int) -> None:
        self._state = _State.AUTHENTICATED
        self._exchange = None
        self.principal = exchange.principal
        self.expires_at_ms = None
        lifetime = self.config.session_lifetime_ms
        if lifetime is not None:
            # Kafka ends the session at connections.max.reauth.ms or when the
            # credential expires, whichever comes first (KIP-368).
            end = now_ms + lifetime
            if exchange.credential_expiry_ms is not None:
                end = min(end, exchange.credential_expiry_ms)
            self.expires_at_ms = max(end, now_ms + 1)
        self.stats.completed[exchange.mechanism] += 1
        if exchange.phase == "re-authentication":
            self.stats.reauthentications += 1

    def _fail(self, mechanism: str) -> None:
        self._exchange = None
        self.stats.failed[mechanism] += 1
