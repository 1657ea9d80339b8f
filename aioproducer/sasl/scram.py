"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677, KIP-84), as Kafka's client does it.

Kafka's ``ScramSaslClient`` / ``ScramFormatter`` differ from a textbook
RFC 5802 client in one way that matters: the password is hashed as its raw
UTF-8 bytes, without SASLprep (``ScramFormatter.normalize`` is
``getBytes(UTF_8)``), and the broker stores credentials derived the same way.
A password with a no-break space, a ligature or an emoji must therefore reach
the broker unchanged, or the proofs disagree. User names are only escaped
(``=`` -> ``=3D``, ``,`` -> ``=2C``, ``ScramFormatter.saslName``).

The exchange: client-first ``n,,n=<user>,r=<nonce>``; the server-first
message brings the combined nonce, salt and iteration count; the client-final
message carries the proof; the server-final ``v=`` signature proves that the
server knows the password, and a server that cannot prove it is refused, as is
an ``e=`` server error.

The iteration count is the server's choice, and hashing costs time in
proportion: a count outside Kafka's range (``ScramMechanism``: 4096-16384,
the only counts a Kafka broker stores credentials with) is refused before any
hashing, and the hash runs in a worker thread (``hashlib.pbkdf2_hmac``
releases the GIL), never on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets

from .. import errors

__all__ = ["MAX_ITERATIONS", "MIN_ITERATIONS", "SCRAM_MECHANISMS", "ScramExchange", "sasl_name"]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# RFC 5802 section 7: channel binding "n,," (none), base64 "biws".
_GS2_HEADER = "n,,"
_CHANNEL_BINDING = base64.b64encode(_GS2_HEADER.encode()).decode()
# Kafka's ScramMechanism minIterations / maxIterations (both SHA-256 and SHA-512).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def sasl_name(username: str) -> str:
    """RFC 5802 ``saslname``: ``=`` and ``,`` escaped, nothing else changed (as Kafka)."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramExchange:
    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        if mechanism not in _HASHES:
            raise errors.ConfigurationError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._username = username
        self._password = password
        # RFC 5802 "printable" characters without ","; token_urlsafe's are.
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={sasl_name(username)},r={self._nonce}"
        self._server_signature = b""
        self._stage = 0

    def __repr__(self) -> str:
        return f"<ScramExchange {self.mechanism} user={self._username!r} stage={self._stage}>"

    async def first(self) -> bytes:
        self._stage = 1
        return (_GS2_HEADER + self._client_first_bare).encode()

    async def step(self, server: bytes) -> bytes | None:
        try:
            text = server.decode()
        except UnicodeDecodeError:
            raise self._failure("the server's message is not UTF-8") from None
        if self._stage == 1:
            self._stage = 2
            return (await self._client_final(text)).encode()
        if self._stage == 2:
            self._check_server_final(text)
            self._stage = 3
            return None
        raise self._failure("the server sent a message after the exchange ended")

    async def _client_final(self, server_first: str) -> str:
        attrs = _attributes(server_first)
        if "e" in attrs:
            raise self._failure(f"the server refused the login: {attrs['e']}")
        if "m" in attrs:
            raise self._failure("bad server-first message (a mandatory extension is not supported)")
        nonce, salt_b64, count = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or count is None:
            raise self._failure("bad server-first message (no nonce, salt or iteration count)")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._failure("bad server-first message (its nonce does not extend ours)")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except (binascii.Error, ValueError):
            raise self._failure("bad server-first message (the salt is not base64)") from None
        if not (count.isascii() and count.isdigit()):
            raise self._failure("bad server-first message (the iteration count is not a number)")
        iterations = int(count)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            # Checked before hashing: ten million iterations would take seconds.
            raise self._failure(
                f"the server asks for {iterations} iterations; Kafka's SCRAM credentials use "
                f"{MIN_ITERATIONS}-{MAX_ITERATIONS}"
            )
        salted = await asyncio.get_running_loop().run_in_executor(
            None, hashlib.pbkdf2_hmac, self._hash, self._password.encode("utf-8"), salt, iterations
        )
        without_proof = f"c={_CHANNEL_BINDING},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = self._hmac(salted, b"Client Key")
        signature = self._hmac(hashlib.new(self._hash, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}"

    def _check_server_final(self, server_final: str) -> None:
        attrs = _attributes(server_final)
        if "e" in attrs:
            # RFC 5802 server-error, e.g. Tansu's "e=unknown-user".
            raise self._failure(f"the server refused the login: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except (binascii.Error, ValueError):
            signature = b""
        if not signature or not hmac.compare_digest(signature, self._server_signature):
            raise self._failure(
                "the server could not prove it knows the password (bad server signature)"
            )

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _failure(self, why: str) -> errors.KafkaError:
        return errors.SaslAuthenticationError(
            f"{self.mechanism} for user {self._username!r}: {why}"
        )


def _attributes(message: str) -> dict[str, str]:
    """``a=value,b=value`` -> ``{"a": "value", ...}`` (values may contain ``=``)."""
    attrs: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if eq and len(key) == 1 and key not in attrs:
            attrs[key] = value
    return attrs
