"""The mock cluster's TLS and SASL listeners, proven against librdkafka.

confluent-kafka is the independent client: it authenticates with each
mechanism over SASL_PLAINTEXT and SASL_SSL, connects over TLS and mutual TLS,
and produces records that ``cluster.records()`` then holds. Refusals are
checked as librdkafka reports them (its ``error_cb``). The SASL state machine
itself (requests before authentication, KIP-368 expiry, re-authentication) is
driven with raw frames, so each rule is seen on the wire.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import confluent_kafka
import pytest
import scramp  # type: ignore[import-untyped]

from aioproducer.protocol.apis import (
    API_VERSIONS,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from aioproducer.protocol.framing import encode_request
from aioproducer.protocol.generated import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.sasl import validate_unsecured_jwt
from tests.mock import RawClient
from tests.support.certs import Pki
from tests.support.sasl import librdkafka_sasl

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
TIMEOUT = 20.0


def _sasl_conf(mechanism: str, password: str = USERS["alice"]) -> dict[str, Any]:
    return librdkafka_sasl(mechanism, "alice", password)


def _produce(
    bootstrap: str, topic: str, n: int, conf: Mapping[str, Any], timeout: float = TIMEOUT
) -> tuple[int, list[confluent_kafka.KafkaError], list[confluent_kafka.KafkaError]]:
    """(undelivered count, delivery errors, error_cb errors) of producing ``n`` records."""
    failures: list[confluent_kafka.KafkaError] = []
    reported: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
            "error_cb": reported.append,
            **conf,
        }
    )
    for i in range(n):
        producer.produce(
            topic,
            b"v%d" % i,
            b"k%d" % i,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
    left = producer.flush(timeout)
    return left, failures, reported


async def _produce_ok(cluster: MockCluster, topic: str, n: int, conf: Mapping[str, Any]) -> None:
    left, failures, _ = await asyncio.to_thread(_produce, cluster.bootstrap_servers, topic, n, conf)
    assert left == 0 and not failures, failures
    got = sorted(r.value or b"" for r in cluster.records(topic))
    assert got == sorted(b"v%d" % i for i in range(n))


async def _first_error(
    bootstrap: str, conf: Mapping[str, Any], timeout: float = 10.0
) -> confluent_kafka.KafkaError:
    """The first error librdkafka reports while trying to produce one record."""

    def first() -> list[confluent_kafka.KafkaError]:
        reported: list[confluent_kafka.KafkaError] = []
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "error_cb": reported.append, **conf}
        )
        producer.produce("t", b"v")
        deadline = time.monotonic() + timeout
        while not reported and time.monotonic() < deadline:
            producer.poll(0.05)
        producer.purge()
        producer.flush(1)
        return reported

    reported = await asyncio.to_thread(first)
    assert reported, "librdkafka reported no error"
    return reported[0]


# -- librdkafka authenticates with each mechanism -------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_librdkafka_sasl_plaintext(mechanism: str) -> None:
    async with MockCluster(brokers=2, sasl_mechanisms=MECHANISMS, users=USERS) as cluster:
        await _produce_ok(
            cluster, "sasl", 20, {"security.protocol": "SASL_PLAINTEXT", **_sasl_conf(mechanism)}
        )
        assert cluster.sasl_authentications_by_mechanism().get(mechanism, 0) >= 1
        assert cluster.sasl_failures == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_librdkafka_sasl_ssl(pki: Pki, mechanism: str) -> None:
    async with MockCluster(
        brokers=2,
        ssl_context=pki.server_context(),
        sasl_mechanisms=[mechanism],
        users=USERS,
    ) as cluster:
        conf = {"security.protocol": "SASL_SSL", **pki.librdkafka_ssl(), **_sasl_conf(mechanism)}
        await _produce_ok(cluster, "sasl-ssl", 20, conf)
        assert cluster.sasl_authentications >= 1


@pytest.mark.asyncio
@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
async def test_librdkafka_ssl(pki: Pki, mutual: bool) -> None:
    async with MockCluster(
        brokers=2, ssl_context=pki.server_context(require_client_cert=mutual)
    ) as cluster:
        conf = {"security.protocol": "SSL", **pki.librdkafka_ssl(with_cert=mutual)}
        await _produce_ok(cluster, "tls", 20, conf)


@pytest.mark.asyncio
async def test_librdkafka_mtls_with_encrypted_key(pki: Pki) -> None:
    async with MockCluster(
        brokers=1, ssl_context=pki.server_context(require_client_cert=True)
    ) as cluster:
        conf = {
            "security.protocol": "SSL",
            **pki.librdkafka_ssl(with_cert=True),
            "ssl.key.location": pki.client_encrypted_key_file,
            "ssl.key.password": pki.client_key_password,
        }
        await _produce_ok(cluster, "tls", 5, conf)


# -- refusals, as librdkafka reports them ----------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_wrong_password_is_an_authentication_error(mechanism: str) -> None:
    async with MockCluster(brokers=1, sasl_mechanisms=[mechanism], users=USERS) as cluster:
        conf = {"security.protocol": "SASL_PLAINTEXT", **_sasl_conf(mechanism, "wrong")}
        err = await _first_error(cluster.bootstrap_servers, conf)
        assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION, err
        assert "SASL authentication error" in err.str()
        assert "wrong" not in err.str()
        assert cluster.sasl_failures >= 1 and cluster.sasl_authentications == 0
        assert "t" not in cluster.topic_states  # nothing served before authentication


@pytest.mark.asyncio
async def test_plain_wrong_password_message_is_kafkas() -> None:
    async with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], users=USERS) as cluster:
        conf = {"security.protocol": "SASL_PLAINTEXT", **_sasl_conf("PLAIN", "wrong")}
        err = await _first_error(cluster.bootstrap_servers, conf)
        assert "Invalid username or password" in err.str()


@pytest.mark.asyncio
async def test_unoffered_mechanism_is_reported_with_the_offered_ones() -> None:
    async with MockCluster(brokers=1, sasl_mechanisms=["SCRAM-SHA-512"], users=USERS) as cluster:
        conf = {"security.protocol": "SASL_PLAINTEXT", **_sasl_conf("PLAIN")}
        err = await _first_error(cluster.bootstrap_servers, conf)
        assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION, err
        assert "SCRAM-SHA-512" in err.str()


@pytest.mark.asyncio
async def test_expired_oauth_token_is_refused() -> None:
    def validator(token: str) -> Mapping[str, Any]:
        claims = validate_unsecured_jwt(token)
        # Pretend the token expired: what Kafka's validator does with a past exp.
        return validate_unsecured_jwt(token, now_ms=int(claims["exp"] * 1000) + 1)

    async with MockCluster(
        brokers=1, sasl_mechanisms=["OAUTHBEARER"], oauth_validator=validator
    ) as cluster:
        conf = {"security.protocol": "SASL_PLAINTEXT", **_sasl_conf("OAUTHBEARER")}
        err = await _first_error(cluster.bootstrap_servers, conf)
        assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION, err
        assert "invalid_token" in err.str()
        assert cluster.sasl_authentications == 0


@pytest.mark.asyncio
async def test_mtls_without_client_certificate_is_refused(pki: Pki) -> None:
    async with MockCluster(
        brokers=1, ssl_context=pki.server_context(require_client_cert=True)
    ) as cluster:
        conf = {"security.protocol": "SSL", **pki.librdkafka_ssl(with_cert=False)}
        err = await _first_error(cluster.bootstrap_servers, conf)
        assert err.code() in (
            confluent_kafka.KafkaError._TRANSPORT,
            confluent_kafka.KafkaError._SSL,
            confluent_kafka.KafkaError._ALL_BROKERS_DOWN,
        ), err
        assert cluster.request_count() == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["unknown_ca", "wrong_host", "expired"])
async def test_librdkafka_refuses_a_bad_server_certificate(pki: Pki, case: str) -> None:
    cert = "good" if case == "unknown_ca" else case
    async with MockCluster(brokers=1, ssl_context=pki.server_context(cert=cert)) as cluster:
        ca = pki.other_ca_file if case == "unknown_ca" else pki.ca_file
        conf = {"security.protocol": "SSL", **pki.librdkafka_ssl(ca_file=ca)}
        err = await _first_error(cluster.bootstrap_servers, conf)
        # librdkafka reports the failed verification as _SSL, or, when its socket
        # is torn down first (a busy machine makes that likelier), as _TRANSPORT
        # with the same OpenSSL reason.
        assert err.code() in (
            confluent_kafka.KafkaError._SSL,
            confluent_kafka.KafkaError._TRANSPORT,
        ), err
        assert "certificate verify failed" in err.str() or "verify" in err.str().lower()
        assert cluster.request_count() == 0


# -- KIP-368: session lifetime and re-authentication -------------------------------


@pytest.mark.asyncio
async def test_librdkafka_reauthenticates_within_the_session_lifetime() -> None:
    RECORDS = 33
    async with MockCluster(
        brokers=1,
        sasl_mechanisms=["SCRAM-SHA-256"],
        users=USERS,
        # librdkafka re-authenticates at 90% of the lifetime: 5 s leaves 0.5 s
        # for the last request before that to be read, on a busy machine too.
        sasl_session_lifetime_ms=5000,
    ) as cluster:

        def produce_slowly() -> int:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "security.protocol": "SASL_PLAINTEXT",
                    **_sasl_conf("SCRAM-SHA-256"),
                    "linger.ms": 0,
                }
            )
            failed = 0
            for i in range(RECORDS):  # ~6.6 s: well past the first session's end
                producer.produce("reauth", b"%d" % i, partition=0)
                failed += producer.flush(TIMEOUT)
                time.sleep(0.2)
            return failed

        assert await asyncio.to_thread(produce_slowly) == 0
        # Authentications on the bootstrap and the broker connection, plus the
        # broker connection's renewal before its session ended: it was never
        # cut off, and records went on past the end of the first session.
        assert cluster.sasl_authentications >= 3
        assert cluster.sasl_stats.expired_sessions == 0
        assert [r.value for r in cluster.records("reauth")] == [b"%d" % i for i in range(RECORDS)]


async def _raw_sasl(
    client: RawClient, version: int, mechanism: str, token: bytes, auth_version: int = 1
) -> Any:
    client.writer.write(
        encode_request(SASL_HANDSHAKE, version, 1, "raw", SaslHandshakeRequest(mechanism=mechanism))
    )
    _, handshake = await client.receive(SASL_HANDSHAKE, version)
    assert handshake.error_code == 0, handshake
    client.writer.write(
        encode_request(
            SASL_AUTHENTICATE, auth_version, 2, "raw", SaslAuthenticateRequest(auth_bytes=token)
        )
    )
    _, answer = await client.receive(SASL_AUTHENTICATE, auth_version)
    return answer


PLAIN_TOKEN = b"\x00alice\x00alice-secret"


@pytest.mark.asyncio
async def test_requests_before_authentication_close_the_connection() -> None:
    async with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], users=USERS) as cluster:
        client = await RawClient.connect(cluster.bootstrap_servers)
        versions = await client.request(API_VERSIONS.key, 3, ApiVersionsRequest())
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[17] == (0, 1) and advertised[36] == (0, 2)
        client.send(METADATA.key, 9, MetadataRequest(topics=None))
        assert await client.read_frame() is None  # closed, unanswered
        await client.close()
        assert cluster.topic_states == {}


@pytest.mark.asyncio
async def test_session_expiry_closes_the_connection_and_reauthentication_renews_it() -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=["PLAIN"], users=USERS, sasl_session_lifetime_ms=1200
    ) as cluster:
        # Sessions of 1.2 s; each wait below is at least 0.4 s away from the
        # session end it must not cross, and a slow machine only pushes the
        # others further past theirs.
        client = await RawClient.connect(cluster.bootstrap_servers)
        answer = await _raw_sasl(client, 1, "PLAIN", PLAIN_TOKEN)
        assert answer.error_code == 0 and 0 < answer.session_lifetime_ms <= 1200
        await client.request(METADATA.key, 9, MetadataRequest(topics=None))
        await asyncio.sleep(0.8)
        again = await _raw_sasl(client, 1, "PLAIN", PLAIN_TOKEN)  # re-authenticate in time
        assert again.error_code == 0 and again.session_lifetime_ms > 0
        await asyncio.sleep(0.6)  # past the first session's end, within the second's
        await client.request(METADATA.key, 9, MetadataRequest(topics=None))
        assert cluster.sasl_authentications == 2
        await asyncio.sleep(0.7)  # the second session is over
        client.send(METADATA.key, 9, MetadataRequest(topics=None))
        assert await client.read_frame() is None
        assert cluster.sasl_stats.expired_sessions == 1
        await client.close()


@pytest.mark.asyncio
async def test_reauthentication_cannot_change_the_principal() -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=["PLAIN"], users=USERS, sasl_session_lifetime_ms=10_000
    ) as cluster:
        client = await RawClient.connect(cluster.bootstrap_servers)
        assert (await _raw_sasl(client, 1, "PLAIN", PLAIN_TOKEN)).error_code == 0
        other = await _raw_sasl(client, 1, "PLAIN", b"\x00bob\x00bob-secret")
        assert other.error_code == 58 and "principal" in other.error_message
        assert await client.read_frame() is None
        await client.close()


@pytest.mark.asyncio
async def test_handshake_v0_with_raw_tokens() -> None:
    async with MockCluster(brokers=1, sasl_mechanisms=["SCRAM-SHA-256"], users=USERS) as cluster:
        client = await RawClient.connect(cluster.bootstrap_servers)
        client.writer.write(
            encode_request(
                SASL_HANDSHAKE, 0, 1, "raw", SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
            )
        )
        _, handshake = await client.receive(SASL_HANDSHAKE, 0)
        assert handshake.error_code == 0
        scram = scramp.ScramClient(["SCRAM-SHA-256"], "alice", USERS["alice"])
        steps = [
            (scram.get_client_first, scram.set_server_first),
            (scram.get_client_final, scram.set_server_final),  # checks the server signature
        ]
        for client_message, take_answer in steps:
            token = client_message().encode()
            client.writer.write(len(token).to_bytes(4, "big") + token)
            frame = await client.read_frame()
            assert frame is not None
            take_answer(frame.decode())
        await client.request(METADATA.key, 9, MetadataRequest(topics=None))
        assert cluster.sasl_authentications == 1
        await client.close()


# -- a second independent client: aiokafka -------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_aiokafka_sasl_ssl(pki: Pki, mechanism: str) -> None:
    import aiokafka  # type: ignore[import-untyped]

    async with MockCluster(
        brokers=2, ssl_context=pki.server_context(), sasl_mechanisms=[mechanism], users=USERS
    ) as cluster:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            security_protocol="SASL_SSL",
            ssl_context=pki.client_context(),
            sasl_mechanism=mechanism,
            sasl_plain_username="alice",
            sasl_plain_password=USERS["alice"],
            request_timeout_ms=10_000,
        )
        await asyncio.wait_for(producer.start(), TIMEOUT)
        try:
            for i in range(10):
                await asyncio.wait_for(producer.send_and_wait("aio", b"v%d" % i), TIMEOUT)
        finally:
            await producer.stop()
        assert sorted(r.value or b"" for r in cluster.records("aio")) == sorted(
            b"v%d" % i for i in range(10)
        )
        assert cluster.sasl_authentications_by_mechanism()[mechanism] >= 1
