"""The client side of each SASL mechanism, against independent server code (scramp)."""

from __future__ import annotations

import asyncio

import pytest
import scramp

from aioproducer import errors
from aioproducer.net.sasl_handshake import reauthentication_delay
from aioproducer.sasl import SaslCredentials
from aioproducer.sasl.oauthbearer import client_first_message


def run(coro):
    return asyncio.run(coro)


def scram_server(mechanism: str, users: dict[str, str]) -> scramp.core.ScramServer:
    mech = scramp.ScramMechanism(mechanism)
    infos = {u: mech.make_auth_info(p, iteration_count=4096) for u, p in users.items()}
    return mech.make_server(lambda user: infos[user])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_authenticates_against_a_scramp_server(mechanism: str) -> None:
    server = scram_server(mechanism, {"alice": "wonderland"})
    exchange = SaslCredentials(mechanism, "alice", "wonderland").exchange()
    first = run(exchange.first())
    assert first.startswith(b"n,,n=alice,r=")
    server.set_client_first(first.decode())
    final = run(exchange.step(server.get_server_first().encode()))
    assert final is not None and final.startswith(b"c=biws,")
    server.set_client_final(final.decode())  # raises if the proof is wrong
    assert run(exchange.step(server.get_server_final().encode())) is None


def test_scram_refuses_a_server_that_cannot_prove_the_password() -> None:
    import base64

    server = scram_server("SCRAM-SHA-256", {"alice": "wonderland"})
    exchange = SaslCredentials("SCRAM-SHA-256", "alice", "wonderland").exchange()
    server.set_client_first(run(exchange.first()).decode())
    final = run(exchange.step(server.get_server_first().encode()))
    assert final is not None
    server.set_client_final(final.decode())
    genuine = base64.b64decode(server.get_server_final().removeprefix("v="))
    # One bit off: what a server answers when it does not know the password.
    forged = bytes([genuine[0] ^ 1]) + genuine[1:]
    with pytest.raises(errors.SaslAuthenticationError, match="could not prove") as info:
        run(exchange.step(b"v=" + base64.b64encode(forged)))
    assert "wonderland" not in str(info.value)


def test_scram_server_error_is_an_authentication_error() -> None:
    server = scram_server("SCRAM-SHA-512", {"alice": "pw"})
    exchange = SaslCredentials("SCRAM-SHA-512", "alice", "pw").exchange()
    server.set_client_first(run(exchange.first()).decode())
    run(exchange.step(server.get_server_first().encode()))
    with pytest.raises(errors.SaslAuthenticationError, match="refused the login: unknown-user"):
        run(exchange.step(b"e=unknown-user"))


def test_scram_escapes_user_names() -> None:
    exchange = SaslCredentials("SCRAM-SHA-256", "a=b,c", "pw").exchange()
    assert run(exchange.first()).startswith(b"n,,n=a=3Db=2Cc,r=")


def test_plain_message() -> None:
    exchange = SaslCredentials("PLAIN", "alice", "pw").exchange()
    assert run(exchange.first()) == b"\x00alice\x00pw"
    assert run(exchange.step(b"")) is None
    assert "pw" not in repr(exchange)


class Provider:
    def __init__(self, token: str, extensions: dict[str, str] | None = None) -> None:
        self._token = token
        self._extensions = extensions

    async def token(self) -> str:
        return self._token

    def extensions(self) -> dict[str, str]:
        return self._extensions or {}


def test_oauthbearer_client_first_message_is_kafkas() -> None:
    # OAuthBearerClientInitialResponse.toBytes(): n,,^Aauth=Bearer <t>[^Ak=v]^A^A
    assert client_first_message("eyJ.abc.def") == b"n,,\x01auth=Bearer eyJ.abc.def\x01\x01"
    assert client_first_message("t", {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}) == (
        b"n,,\x01auth=Bearer t\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01"
    )
    exchange = SaslCredentials("OAUTHBEARER", token_provider=Provider("tok", {"a": "b"})).exchange()
    assert run(exchange.first()) == b"n,,\x01auth=Bearer tok\x01a=b\x01\x01"
    assert run(exchange.step(b"")) is None


def test_oauthbearer_bad_inputs() -> None:
    with pytest.raises(errors.ConfigurationError, match="'auth'"):
        client_first_message("t", {"auth": "x"})
    with pytest.raises(errors.ConfigurationError, match="'a1'"):
        client_first_message("t", {"a1": "x"})
    with pytest.raises(errors.ConfigurationError, match="invalid value"):
        client_first_message("t", {"k": "\x01"})
    with pytest.raises(errors.SaslAuthenticationError, match="not a bearer token"):
        client_first_message("two words")


@pytest.mark.parametrize("after", [b"more", b""], ids=["message", "success"])
def test_oauthbearer_error_challenge_is_acknowledged_then_reported(after: bytes) -> None:
    # RFC 7628 3.2.3: after an error challenge the exchange fails, even if the
    # server then answers as for a success (empty bytes).
    exchange = SaslCredentials("OAUTHBEARER", token_provider=Provider("tok")).exchange()
    run(exchange.first())
    assert run(exchange.step(b'{"status":"invalid_token"}')) == b"\x01"
    with pytest.raises(errors.SaslAuthenticationError, match="invalid_token"):
        run(exchange.step(after))


def test_reauthentication_happens_at_85_to_95_percent_of_the_lifetime() -> None:
    assert reauthentication_delay(10_000, 0.0) == pytest.approx(8.5)
    assert reauthentication_delay(10_000, 0.999999) == pytest.approx(9.5, abs=1e-4)
    assert reauthentication_delay(1500, 0.5) == pytest.approx(1.35)


def test_authentication_failures_are_final_for_the_client() -> None:
    assert (
        errors.SaslAuthenticationError.code == 58 and not errors.SaslAuthenticationError.retriable
    )
    assert errors.is_authentication_failure(errors.SaslAuthenticationError("x"))
    assert errors.is_authentication_failure(errors.UnsupportedSaslMechanismError("x"))
    assert errors.is_authentication_failure(errors.SslError("x"))
    assert not errors.is_authentication_failure(errors.ConnectionLostError("x"))
    assert not errors.SslError.retriable
