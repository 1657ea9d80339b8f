"""SASL PLAIN (RFC 4616): one message, ``authzid NUL username NUL password``.

Only safe over TLS: the password travels as is.
"""

from __future__ import annotations

__all__ = ["PlainExchange"]


class PlainExchange:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()

    def __repr__(self) -> str:
        return "<PlainExchange>"

    async def first(self) -> bytes:
        return self._message

    async def step(self, server: bytes) -> bytes | None:
        # The broker answers an accepted PLAIN message with empty bytes; a
        # refusal comes as an error code, which the handshake reports.
        return None
