"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677, KIP-84) on top of ``scramp``.

scramp (the ``scram`` extra) computes the nonce, salted password and client proof, and checks the
server signature of the server-final message: a server that cannot prove it
knows the password is refused, as is a server-final ``e=...`` error.
"""

from __future__ import annotations

from typing import Any

from .. import errors

__all__ = ["SCRAM_MECHANISMS", "ScramExchange"]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def require_scramp() -> Any:
    """The scramp module, or a ConfigurationError saying how to install it."""
    try:
        import scramp  # type: ignore[import-untyped]
    except ImportError:
        raise errors.ConfigurationError(
            "SCRAM authentication needs scramp: pip install 'aioproducer[scram]'"
        ) from None
    return scramp


class ScramExchange:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._scramp = require_scramp()
        self._client = self._scramp.ScramClient([mechanism], username, password)
        self._stage = 0

    def __repr__(self) -> str:
        return f"<ScramExchange {self.mechanism} user={self._username!r} stage={self._stage}>"

    async def first(self) -> bytes:
        self._stage = 1
        return self._client.get_client_first().encode()

    def step(self, server: bytes) -> bytes | None:
        try:
            text = server.decode()
            if self._stage == 1:
                self._client.set_server_first(text)
                self._stage = 2
                return self._client.get_client_final().encode()
            if self._stage == 2:
                if text.startswith("e="):
                    # RFC 5802 server-error, e.g. Tansu's "e=unknown-user".
                    raise self._failure(f"the server refused the login: {text[2:]}")
                self._client.set_server_final(text)
                self._stage = 3
                return None
        except UnicodeDecodeError:
            raise self._failure("the server's message is not UTF-8") from None
        except self._scramp.ScramException as exc:
            raise self._failure(_describe(exc, self._stage)) from None
        raise self._failure("the server sent a message after the exchange ended")

    def _failure(self, why: str) -> errors.KafkaError:
        return errors.SaslAuthenticationError(f"{self.mechanism} for user {self._username!r}: {why}")


def _describe(exc: Exception, stage: int) -> str:
    if stage == 2:
        return f"the server could not prove it knows the password ({exc.args[0]})"
    return f"bad server-first message ({exc.args[0]})"
