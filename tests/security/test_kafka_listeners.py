"""Every listener and SASL mechanism of Apache Kafka delivers (read back with confluent-kafka).

One broker serves them all (``secure_kafka``): SSL with PEM stores, mTLS,
SASL_PLAINTEXT and SASL_SSL with PLAIN and both SCRAMs, OAUTHBEARER with
Kafka's unsecured validator, and OAUTHBEARER with tokens from our
client-credentials provider verified against the issuer's JWKS (KIP-768).
"""

from __future__ import annotations

import pytest

from tests.support.secure_kafka import SecureKafka, deliver_and_read_back

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("TLS", None),
        ("MTLS", None),
        ("SASL", "PLAIN"),
        ("SASL", "SCRAM-SHA-256"),
        ("SASL", "SCRAM-SHA-512"),
        ("SASL", "OAUTHBEARER"),
        ("SASLTLS", "PLAIN"),
        ("SASLTLS", "SCRAM-SHA-256"),
        ("SASLTLS", "SCRAM-SHA-512"),
    ],
    ids=lambda v: v or "-",
)
async def test_listener_delivers(
    secure_kafka: SecureKafka, listener: str, mechanism: str | None
) -> None:
    # alice (or the mTLS client) may write only ok-* topics: delivery also
    # shows the broker saw the identity we authenticated as.
    topic = secure_kafka.topic()
    await deliver_and_read_back(
        secure_kafka, secure_kafka.producer_settings(listener, mechanism), topic
    )


async def test_oidc_tokens_verified_against_the_jwks(secure_kafka: SecureKafka) -> None:
    issuer = secure_kafka.issuer
    tokens_before = len(issuer.token_requests)
    settings = secure_kafka.producer_settings("OIDC", "OAUTHBEARER")
    await deliver_and_read_back(secure_kafka, settings, secure_kafka.topic())
    # Our provider fetched one token (cached for every connection) ...
    assert len(issuer.token_requests) - tokens_before == 1
    assert issuer.token_requests[-1] == {"grant_type": "client_credentials", "scope": "kafka"}
    # ... and the broker verified it with the issuer's published key.
    assert issuer.jwks_requests >= 1
