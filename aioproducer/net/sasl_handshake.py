"""Authenticate a connection with SASL, and keep it authenticated (KIP-368).

After ApiVersions, :func:`authenticate` sends SaslHandshake v1 (choose the
mechanism; the broker lists what it offers) and then SaslAuthenticate requests
carrying the mechanism's messages until the exchange ends. No other request
goes out on the connection before that.

When the broker answers with ``session_lifetime_ms > 0`` it closes the
connection if a request other than SaslHandshake arrives once the session has
expired. As Java's ``SaslClientAuthenticator``, the session is due for renewal
at a random 85-95% of its lifetime, and renewed before the first request sent
after that (:meth:`BrokerConnection.reauthenticate_after`), not on a timer: an
idle connection does nothing, and a tiny lifetime costs at most one
re-authentication per batch of requests. Re-authentication holds new
requests, waits for the responses of those already written, runs the exchange
with urgent writes, and then writes the held requests in their original
order: nothing in flight fails and nothing is reordered.
"""

from __future__ import annotations

import asyncio
import logging
import random

from .. import errors
from ..protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from ..protocol.generated import SaslAuthenticateRequest, SaslHandshakeRequest
from ..sasl.credentials import SaslCredentials, SaslExchange
from .connection import BrokerConnection

__all__ = ["authenticate", "reauthentication_delay"]

log = logging.getLogger("aioproducer.sasl")


def reauthentication_delay(session_lifetime_ms: int, rand: float) -> float:
    """Seconds until re-authentication: 85-95% of the lifetime (``rand`` in [0, 1))."""
    return session_lifetime_ms * (0.85 + 0.10 * rand) / 1000


async def authenticate(conn: BrokerConnection, credentials: SaslCredentials, timeout: float) -> int:
    """Run the SASL exchange on ``conn``; return the session lifetime in ms (0: none).

    Schedules re-authentication when the broker announces a lifetime.
    """
    try:
        lifetime = await asyncio.wait_for(_exchange(conn, credentials, urgent=False), timeout)
    except asyncio.TimeoutError:
        raise errors.KafkaTimeoutError(
            f"SASL {credentials.mechanism} authentication with broker {conn.node_id} at "
            f"{conn.host}:{conn.port} did not finish within {timeout * 1000:.0f} ms"
        ) from None
    if lifetime > 0:
        _renew_when_due(conn, credentials, lifetime, timeout)
    return lifetime


def _renew_when_due(
    conn: BrokerConnection, credentials: SaslCredentials, lifetime_ms: int, timeout: float
) -> None:
    delay = reauthentication_delay(lifetime_ms, random.random())
    conn.reauthenticate_after(delay, lambda: _reauthenticate(conn, credentials, timeout))


async def _exchange(conn: BrokerConnection, credentials: SaslCredentials, *, urgent: bool) -> int:
    mechanism = credentials.mechanism
    where = f"broker {conn.node_id} at {conn.host}:{conn.port}"
    handshake_version = min(conn.api_versions.get(SASL_HANDSHAKE.key, 1), 1)
    try:
        response = await conn.request(
            SASL_HANDSHAKE,
            SaslHandshakeRequest(mechanism=mechanism),
            version=handshake_version,
            urgent=urgent,
        )
    except errors.ConnectionLostError as exc:
        # Kafka answers an unknown mechanism with code 33; some brokers (Tansu
        # for PLAIN) close the connection instead. Say so: it is the likely cause.
        raise errors.ConnectionLostError(
            f"{where} closed the connection in answer to SaslHandshake for {mechanism} "
            f"(does it offer {mechanism}?): {exc.message}"
        ) from None
    if response.error_code == errors.UnsupportedSaslMechanismError.code:
        offered = ", ".join(response.mechanisms) or "none"
        raise errors.UnsupportedSaslMechanismError(
            f"{where} does not offer {mechanism}; it offers: {offered}"
        )
    errors.raise_for_code(response.error_code, f"SaslHandshake for {mechanism} with {where}")
    if handshake_version == 0 or SASL_AUTHENTICATE.key not in conn.api_versions:
        # SaslHandshake v0 means raw tokens without SaslAuthenticate framing,
        # which only brokers before 1.0 speak.
        raise errors.UnsupportedVersionError(
            f"{where} does not support SaslAuthenticate (Kafka < 1.0)"
        )
    exchange = credentials.exchange()
    try:
        message: bytes | None = await _first_message(exchange, where)
        lifetime = 0
        while message is not None:
            auth = await conn.request(
                SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=message), urgent=urgent
            )
            if auth.error_code:
                detail = auth.error_message or ""
                raise errors.error_for_code(auth.error_code)(
                    f"{mechanism} authentication with {where} failed"
                    + (f": {detail}" if detail else "")
                )
            lifetime = auth.session_lifetime_ms  # 0 below v1: no expiry (KIP-368)
            message = await exchange.step(bytes(auth.auth_bytes))
    except errors.SaslAuthenticationError as exc:
        if exc.message and where in exc.message:
            raise
        raise errors.SaslAuthenticationError(f"{exc.message} (with {where})") from None
    return lifetime


async def _first_message(exchange: SaslExchange, where: str) -> bytes:
    try:
        return await exchange.first()
    except (errors.KafkaError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a user's token provider failed
        # Retriable, like a connection failure: the provider may recover
        # (the bounds are max_block_ms and the delivery timeout).
        raise errors.ConnectionFailedError(
            f"{exchange.mechanism} token provider failed for {where}: {exc!r}"
        ) from exc


async def _reauthenticate(
    conn: BrokerConnection, credentials: SaslCredentials, timeout: float
) -> None:
    """Renew the session; the connection holds new requests meanwhile and writes them after."""
    try:
        await conn.wait_quiet(timeout)
        lifetime_ms = await asyncio.wait_for(_exchange(conn, credentials, urgent=True), timeout)
    except asyncio.CancelledError:
        raise
    except asyncio.TimeoutError:
        conn.abort(
            errors.RequestTimedOutError(
                f"re-authentication with broker {conn.node_id} did not finish in "
                f"{timeout * 1000:.0f} ms"
            )
        )
        return
    except errors.KafkaError as exc:
        # The held requests were never written: they fail with the reason,
        # and the client's reconnect reports it like a first login.
        conn.abort(exc)
        return
    log.debug(
        "[%s] re-authenticated %r; next session lifetime %s ms", conn.client_id, conn, lifetime_ms
    )
    if lifetime_ms > 0:
        _renew_when_due(conn, credentials, lifetime_ms, timeout)
