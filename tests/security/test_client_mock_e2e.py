"""aioproducer against a MockCluster with TLS and SASL: every mechanism, both transports.

The mock checks credentials, certificates and session lifetimes the way a
Kafka broker does (its own tests prove that with librdkafka); here the
producer's records must arrive, in order, once, through every security setting.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.testing import MockCluster
from tests.security.client_matrix import CASES, Case
from tests.security.token_endpoint import token_endpoint  # noqa: F401 - fixture
from tests.support.aio import gather_within, within
from tests.support.certs import Pki

pytestmark = pytest.mark.asyncio

RECORDS = 200


async def produce_and_check(cluster: MockCluster, producer: Producer, topic: str) -> None:
    futures = [
        await producer.enqueue(topic, f"v-{i}".encode(), key=f"k-{i % 7}".encode())
        for i in range(RECORDS)
    ]
    await producer.flush(10)
    results = await gather_within(futures, 10, "delivery")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    stored = cluster.records(topic)
    assert sorted(r.value for r in stored) == sorted(f"v-{i}".encode() for i in range(RECORDS))
    # Per key (so per partition) the order of sending is kept.
    for key in {f"k-{i % 7}".encode() for i in range(RECORDS)}:
        sent = [f"v-{i}".encode() for i in range(RECORDS) if f"k-{i % 7}".encode() == key]
        got = [r.value for r in sorted(stored, key=lambda r: r.offset) if r.key == key]
        assert got == sent


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_matrix(case: Case, pki: Pki) -> None:
    async with MockCluster(brokers=3, default_partitions=4, **case.server_kwargs(pki)) as cluster:
        producer = Producer(cluster.bootstrap_servers, linger_ms=2, **case.client_kwargs(pki))
        await within(producer.start(), 10, "start")
        try:
            await produce_and_check(cluster, producer, "secure-topic")
        finally:
            await within(producer.close(), 10, "close")
        if case.mechanism is not None:
            # Bootstrap plus the leaders: at least one login per broker used.
            assert cluster.sasl_authentications >= 3
            assert cluster.sasl_authentications_by_mechanism().keys() == {case.mechanism}
            assert cluster.sasl_failures == 0


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
async def test_oidc_client_credentials_provider(tls: bool, pki: Pki, token_endpoint: dict) -> None:
    seen_subjects: list[str] = []

    def validator(token: str):  # noqa: ANN202 - the mock's validator signature
        from aioproducer.testing.mock.sasl import validate_unsecured_jwt

        claims = validate_unsecured_jwt(token)
        seen_subjects.append(claims["sub"])
        return claims

    server = {"sasl_mechanisms": ["OAUTHBEARER"], "oauth_validator": validator}
    client = {
        "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauthbearer_token_endpoint_url": token_endpoint["url"],
        "sasl_oauthbearer_client_id": "orders-service",
        "sasl_oauthbearer_client_secret": "client-Secret-9",
        "sasl_oauthbearer_scope": "kafka",
    }
    if tls:
        server["ssl_context"] = pki.server_context()
        client["ssl_cafile"] = pki.ca_file
    async with MockCluster(brokers=3, **server) as cluster:
        producer = Producer(cluster.bootstrap_servers, linger_ms=2, **client)
        await within(producer.start(), 10, "start")
        try:
            await produce_and_check(cluster, producer, "oidc-topic")
        finally:
            await within(producer.close(), 10, "close")
    assert seen_subjects and set(seen_subjects) == {"orders-service"}
    # One token, cached and reused for every connection.
    assert len(token_endpoint["requests"]) == 1
    _auth, form = token_endpoint["requests"][0]
    assert form == {"grant_type": "client_credentials", "scope": "kafka"}


async def test_oidc_provider_refreshes_before_expiry(token_endpoint: dict) -> None:
    from aioproducer.sasl import ClientCredentialsTokenProvider

    token_endpoint["lifetime"] = 1  # refreshed after 80% of a second
    provider = ClientCredentialsTokenProvider(
        token_endpoint["url"], "orders-service", "client-Secret-9"
    )
    first = await provider.token()
    assert await provider.token() == first and provider.fetches == 1
    await asyncio.sleep(0.9)
    await provider.token()
    assert provider.fetches == 2
    assert "client-Secret-9" not in repr(provider)


async def test_oidc_provider_reports_a_refusal(token_endpoint: dict) -> None:
    from aioproducer import errors
    from aioproducer.sasl import ClientCredentialsTokenProvider

    provider = ClientCredentialsTokenProvider(token_endpoint["url"], "orders-service", "Wrong-Secret")
    with pytest.raises(errors.SaslAuthenticationError, match="HTTP 401") as info:
        await provider.token()
    assert "Wrong-Secret" not in str(info.value)
