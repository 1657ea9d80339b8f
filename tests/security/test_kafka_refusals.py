"""Refusals by Apache Kafka's listeners: typed, fast (well under max_block_ms), no secret in them.

The same refusals as tests/security/test_client_mock_failures.py checks on
the mock, now from Kafka itself: a wrong password (PLAIN and both SCRAMs), a
server certificate from an unknown CA or one that expired, no client
certificate on a listener requiring one, a mechanism the listener does not
enable (Kafka answers UNSUPPORTED_SASL_MECHANISM and names what it offers,
where Tansu hangs up), and an OAUTHBEARER token the JWKS does not verify.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from aioproducer import Producer, errors
from tests.support.aio import within
from tests.support.secure_kafka import USERS, SecureKafka

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

MAX_BLOCK_MS = 20_000
FAST_S = 5.0  # a refusal must come within this, a quarter of max_block_ms
WRONG = "Wrong-Password-123"


async def refused(settings: dict[str, Any], error: type[Exception]) -> Exception:
    """Start a producer with ``settings``; it must raise ``error`` fast. Returns the error."""
    producer = Producer(**{**settings, "max_block_ms": MAX_BLOCK_MS})
    started = time.monotonic()
    try:
        with pytest.raises(error) as info:
            await within(producer.start(), MAX_BLOCK_MS / 1000 + 10, "start")
        elapsed = time.monotonic() - started
    finally:
        await within(producer.close(), 10, "close")
    assert elapsed < FAST_S, f"{type(info.value).__name__} after {elapsed:.1f} s: {info.value}"
    return info.value


@pytest.mark.parametrize("listener", ["SASL", "SASLTLS"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_wrong_password(secure_kafka: SecureKafka, listener: str, mechanism: str) -> None:
    settings = secure_kafka.producer_settings(listener, mechanism, sasl_plain_password=WRONG)
    exc = await refused(settings, errors.SaslAuthenticationError)
    text = str(exc)
    assert exc.code == 58 and mechanism in text
    assert secure_kafka.address(listener) in text  # names the broker
    assert WRONG not in text and WRONG not in repr(exc) and USERS["alice"] not in text


async def test_unknown_ca(secure_kafka: SecureKafka) -> None:
    settings = secure_kafka.producer_settings("TLS", ssl_cafile=secure_kafka.pki.other_ca_file)
    exc = await refused(settings, errors.SslError)
    assert "unable to get local issuer certificate" in str(exc).lower(), str(exc)


async def test_expired_server_certificate(secure_kafka: SecureKafka) -> None:
    exc = await refused(secure_kafka.producer_settings("EXPIRED"), errors.SslError)
    assert "certificate has expired" in str(exc).lower(), str(exc)


async def test_missing_client_certificate(secure_kafka: SecureKafka) -> None:
    settings = secure_kafka.producer_settings("MTLS")
    del settings["ssl_certfile"], settings["ssl_keyfile"]
    exc = await refused(settings, errors.SslError)
    # Kafka's "bad certificate" alert, and what it most likely means.
    assert "bad certificate" in str(exc) and "needs one (ssl_certfile/ssl_keyfile)" in str(exc), (
        str(exc)
    )


async def test_mechanism_the_listener_does_not_enable(secure_kafka: SecureKafka) -> None:
    # SASLTLS enables PLAIN and the SCRAMs, not OAUTHBEARER.
    settings = secure_kafka.producer_settings("SASLTLS", "OAUTHBEARER")
    exc = await refused(settings, errors.UnsupportedSaslMechanismError)
    assert exc.code == 33
    assert "does not offer OAUTHBEARER" in str(exc)
    offered = str(exc).rpartition("it offers: ")[2]
    assert set(offered.split(", ")) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, str(exc)


async def test_token_the_jwks_does_not_verify(secure_kafka: SecureKafka) -> None:
    issuer = secure_kafka.issuer

    class Forged:
        async def token(self) -> str:
            return issuer.sign({"sub": "orders-service", "scope": "kafka"}, foreign_key=True)

    settings = secure_kafka.producer_settings("SASL", "OAUTHBEARER")
    settings.update(
        bootstrap_servers=secure_kafka.address("OIDC"), sasl_oauth_token_provider=Forged()
    )
    exc = await refused(settings, errors.SaslAuthenticationError)
    assert "OAUTHBEARER" in str(exc) and "invalid_token" in str(exc)
