"""The server-side SASL exchanges and session rules, without sockets.

Tokens in, tokens out: each mechanism is driven by a client built
independently (scramp's client for SCRAM, hand-made RFC 4616 / RFC 7628
messages for PLAIN and OAUTHBEARER), and the session state machine is fed
encoded request frames with an explicit clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]

from aioproducer.protocol.apis import (
    API_VERSIONS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from aioproducer.protocol.framing import decode_response, encode_request
from aioproducer.protocol.generated import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from aioproducer.testing.mock.sasl import (
    OAuthBearerAuthenticator,
    SaslFailure,
    SaslServerConfig,
    new_authenticator,
    validate_unsecured_jwt,
)
from aioproducer.testing.mock.sasl_session import SaslSession, SaslStats
from tests.support.sasl import unsecured_jwt

USERS = {"alice": "alice-secret"}
NOW = 1_700_000_000_000


def _oauth_message(token: str, authzid: str = "", **extensions: str) -> bytes:
    pairs = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}\x01auth=Bearer {token}\x01{pairs}\x01".encode()


# -- mechanisms -----------------------------------------------------------------


def test_plain() -> None:
    config = SaslServerConfig(["PLAIN"], USERS)
    ok = new_authenticator("PLAIN", config)
    assert ok.step(b"\x00alice\x00alice-secret", NOW) == b""
    assert ok.complete and ok.principal == "alice"
    for token, message in [
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00nobody\x00alice-secret", "Invalid username or password"),
        (b"bob\x00alice\x00alice-secret", "authorization id"),
        (b"alice\x00alice-secret", "expected 3 tokens"),
    ]:
        with pytest.raises(SaslFailure, match=message) as failure:
            new_authenticator("PLAIN", config).step(token, NOW)
        assert "alice-secret" not in str(failure.value)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_proves_it_knows_the_password(mechanism: str) -> None:
    server = new_authenticator(mechanism, SaslServerConfig([mechanism], USERS))
    client = scramp.ScramClient([mechanism], "alice", "alice-secret")
    server_first = server.step(client.get_client_first().encode(), NOW)
    client.set_server_first(server_first.decode())
    assert not server.complete
    server_final = server.step(client.get_client_final().encode(), NOW)
    assert server_final.startswith(b"v=")
    client.set_server_final(server_final.decode())  # raises if the signature is wrong
    assert server.complete and server.principal == "alice"


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "x")])
def test_scram_refuses_bad_credentials(user: str, password: str) -> None:
    server = new_authenticator("SCRAM-SHA-256", SaslServerConfig(["SCRAM-SHA-256"], USERS))
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with pytest.raises(SaslFailure, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        client.set_server_first(server.step(client.get_client_first().encode(), NOW).decode())
        server.step(client.get_client_final().encode(), NOW)
    assert not server.complete


def test_oauthbearer_default_validator_and_extensions() -> None:
    server = new_authenticator("OAUTHBEARER", SaslServerConfig(["OAUTHBEARER"]))
    assert isinstance(server, OAuthBearerAuthenticator)
    token = unsecured_jwt({"sub": "alice", "exp": NOW / 1000 + 30})
    assert server.step(_oauth_message(token, "alice", traceId="42"), NOW) == b""
    assert server.complete and server.principal == "alice"
    assert server.credential_expiry_ms == NOW + 30_000
    assert server.extensions == {"traceId": "42"}


@pytest.mark.parametrize(
    "message, reason",
    [
        (_oauth_message(unsecured_jwt({"sub": "alice", "exp": NOW / 1000 - 1})), "expired"),
        (
            _oauth_message(unsecured_jwt({"sub": "alice", "exp": NOW / 1000 + 30}), "bob"),
            "authorization",
        ),
        (b"y,,\x01auth=Bearer x\x01\x01", "GS2"),
    ],
)
def test_oauthbearer_refusal_is_an_error_challenge_then_a_failure(
    message: bytes, reason: str
) -> None:
    server = new_authenticator("OAUTHBEARER", SaslServerConfig(["OAUTHBEARER"]))
    challenge = json.loads(server.step(message, NOW))
    assert challenge["status"] == "invalid_token" and reason in challenge["message"]
    with pytest.raises(SaslFailure, match="invalid_token"):
        server.step(b"\x01", NOW)  # RFC 7628: the client acknowledges the error
    assert not server.complete


def test_custom_oauth_validator_refuses_by_raising() -> None:
    def validator(token: str) -> Mapping[str, Any]:
        if token != "good":
            raise PermissionError("unknown token")
        return {"sub": "svc"}

    config = SaslServerConfig(["OAUTHBEARER"], oauth_validator=validator)
    accepted = new_authenticator("OAUTHBEARER", config)
    accepted.step(_oauth_message("good"), NOW)
    assert accepted.principal == "svc" and accepted.credential_expiry_ms is None
    refused = new_authenticator("OAUTHBEARER", config)
    assert b"unknown token" in refused.step(_oauth_message("bad"), NOW)


# -- the session state machine -------------------------------------------------------


def _frame(api: Any, version: int, body: Any, cid: int = 1) -> bytes:
    return encode_request(api, version, cid, "t", body)[4:]


def _answer(api: Any, version: int, data: bytes) -> Any:
    return decode_response(api, version, data[4:])


def _login(session: SaslSession, now: int, version: int = 2) -> Any:
    handshake = session.receive(
        _frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")), now
    )
    assert handshake is not None and not handshake.close
    reply = session.receive(
        _frame(
            SASL_AUTHENTICATE,
            version,
            SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"),
        ),
        now,
    )
    assert reply is not None
    return reply


def test_session_gate_and_lifetime() -> None:
    stats = SaslStats()
    session = SaslSession(SaslServerConfig(["PLAIN"], USERS, session_lifetime_ms=1000), stats)
    assert (
        session.receive(_frame(API_VERSIONS, 3, ApiVersionsRequest()), NOW) is None
    )  # served normally
    refused = session.receive(_frame(METADATA, 9, MetadataRequest(topics=None)), NOW)
    assert refused is not None and refused.close and refused.data == b""
    reply = _login(session, NOW)
    answer = _answer(SASL_AUTHENTICATE, 2, reply.data)
    assert answer.error_code == 0 and answer.session_lifetime_ms == 1000
    assert session.receive(_frame(METADATA, 9, MetadataRequest(topics=None)), NOW + 999) is None
    # Re-authentication just in time starts a new session.
    _login(session, NOW + 999)
    assert session.receive(_frame(METADATA, 9, MetadataRequest(topics=None)), NOW + 1500) is None
    assert stats.authentications == 2
    expired = session.receive(_frame(METADATA, 9, MetadataRequest(topics=None)), NOW + 1999)
    assert expired is not None and expired.close and stats.expired_sessions == 1


def test_session_lifetime_ends_with_the_token() -> None:
    config = SaslServerConfig(["OAUTHBEARER"], session_lifetime_ms=60_000)
    session = SaslSession(config, SaslStats())
    session.receive(_frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER")), NOW)
    token = unsecured_jwt({"sub": "alice", "exp": NOW / 1000 + 5})
    reply = session.receive(
        _frame(SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=_oauth_message(token))), NOW
    )
    assert reply is not None
    assert _answer(SASL_AUTHENTICATE, 1, reply.data).session_lifetime_ms == 5000


def test_unsupported_mechanism_lists_the_offered_ones() -> None:
    stats = SaslStats()
    session = SaslSession(SaslServerConfig(["SCRAM-SHA-512", "PLAIN"], USERS), stats)
    reply = session.receive(
        _frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI")), NOW
    )
    assert reply is not None and reply.close
    answer = _answer(SASL_HANDSHAKE, 1, reply.data)
    assert answer.error_code == 33 and answer.mechanisms == ["SCRAM-SHA-512", "PLAIN"]
    assert stats.failed["GSSAPI"] == 1


def test_failed_authentication_answers_58_then_closes() -> None:
    stats = SaslStats()
    session = SaslSession(SaslServerConfig(["PLAIN"], USERS), stats)
    session.receive(_frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")), NOW)
    reply = session.receive(
        _frame(SASL_AUTHENTICATE, 0, SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00no")), NOW
    )
    assert reply is not None and reply.close
    answer = _answer(SASL_AUTHENTICATE, 0, reply.data)
    assert answer.error_code == 58 and "Invalid username or password" in answer.error_message
    assert stats.failed["PLAIN"] == 1 and stats.authentications == 0


def test_only_sasl_authenticate_after_a_handshake() -> None:
    session = SaslSession(SaslServerConfig(["PLAIN"], USERS), SaslStats())
    session.receive(_frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")), NOW)
    reply = session.receive(_frame(API_VERSIONS, 3, ApiVersionsRequest()), NOW)
    assert reply is not None and reply.close


def test_unsecured_jwt_validator() -> None:
    now = 1_700_000_000_000
    good = unsecured_jwt({"sub": "alice", "exp": now / 1000 + 60})
    assert validate_unsecured_jwt(good, now)["sub"] == "alice"
    for token, problem in [
        (unsecured_jwt({"sub": "alice", "exp": now / 1000 - 1}), "expired"),
        (unsecured_jwt({"exp": now / 1000 + 60}), "sub"),
        (unsecured_jwt({"sub": "alice"}), "exp"),
        (unsecured_jwt({"sub": "alice", "exp": now / 1000 + 60}, alg="RS256"), "alg"),
        ("not-a-jwt", "three"),
    ]:
        with pytest.raises(ValueError, match=problem):
            validate_unsecured_jwt(token, now)


def test_config_keeps_passwords_out_of_repr() -> None:
    config = SaslServerConfig(["PLAIN"], USERS)
    assert "alice-secret" not in repr(config) and "alice" in repr(config)
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslServerConfig(["GSSAPI"])


def test_sasl_authenticate_after_authentication_is_illegal_but_harmless() -> None:
    session = SaslSession(SaslServerConfig(["PLAIN"], USERS), SaslStats())
    _login(session, NOW)
    reply = session.receive(
        _frame(SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=b"x")), NOW
    )
    assert reply is not None and not reply.close
    assert _answer(SASL_AUTHENTICATE, 1, reply.data).error_code == 34
    assert session.receive(_frame(METADATA, 9, MetadataRequest(topics=None)), NOW) is None


def test_failed_reauthentication_says_so() -> None:
    stats = SaslStats()
    config = SaslServerConfig(["SCRAM-SHA-256"], USERS, session_lifetime_ms=60_000)
    session = SaslSession(config, stats)
    reply = None
    for password, cid in (("alice-secret", 1), ("wrong", 3)):
        session.receive(
            _frame(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), cid), NOW
        )
        client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", password)
        first = SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode())
        reply = session.receive(_frame(SASL_AUTHENTICATE, 2, first, cid), NOW)
        assert reply is not None
        client.set_server_first(_answer(SASL_AUTHENTICATE, 2, reply.data).auth_bytes.decode())
        final = SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode())
        reply = session.receive(_frame(SASL_AUTHENTICATE, 2, final, cid + 1), NOW)
    assert reply is not None
    answer = _answer(SASL_AUTHENTICATE, 2, reply.data)
    assert reply.close and answer.error_code == 58
    assert answer.error_message.startswith("Authentication failed during re-authentication")
    assert stats.authentications == 1 and stats.failed["SCRAM-SHA-256"] == 1
