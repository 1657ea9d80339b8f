"""SASL PLAIN (RFC 4616): one message, ``authzid NUL username NUL password``.

Only safe over TLS: the password travels as is.
"""

from __future__ import annotations

from ..errors import ConfigurationError

__all__ = ["PlainExchange", "check_plain_credentials"]


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


def check_plain_credentials(username: str, password: str) -> None:
    """Refuse a NUL inside the username or password (ConfigurationError)."""
    # RFC 4616 section 2: authcid and passwd are 1*SAFE, UTF-8 without NUL;
    # NUL separates the fields of the message, so a NUL inside one would
    # shift them and the broker would refuse the login for another reason.
    for name, value in (("sasl_plain_username", username), ("sasl_plain_password", password)):
        if "\x00" in value:
            raise ConfigurationError(
                f"{name} contains a NUL character, which SASL PLAIN cannot carry (RFC 4616)"
            )
