"""Refusals are typed, fast and final; a correctly configured producer is unaffected.

Each refusal must come out of ``start()`` within ``max_block_ms`` (asserted
loosely: the machine is shared) as the error that names it, never the
password; then a second producer with the right settings delivers every record.
A refusal on a later reconnect fails that broker's pending records with the
refusal, long before ``delivery_timeout_ms``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.protocol.generated import InitProducerIdResponse
from aioproducer.testing import MockCluster
from tests.security.client_matrix import USERS, plain_producer
from tests.support.aio import gather_within, within
from tests.support.certs import Pki

pytestmark = pytest.mark.asyncio

MAX_BLOCK_MS = 3000
WRONG = "Wrong-Password-123"


async def refused_then_good(
    cluster: MockCluster, bad: dict[str, Any], good: dict[str, Any], error: type[Exception]
) -> Exception:
    """Start a badly configured producer (must raise ``error``), then deliver with a good one."""
    producer = Producer(cluster.bootstrap_servers, max_block_ms=MAX_BLOCK_MS, **bad)
    started = time.monotonic()
    with pytest.raises(error) as info:
        await within(producer.start(), MAX_BLOCK_MS / 1000 + 10, "start")
    # Within max_block_ms (plus room for a slow machine), not the delivery timeout.
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000 + 5
    await producer.close()

    async with Producer(cluster.bootstrap_servers, linger_ms=1, **good) as ok:
        futures = [await ok.enqueue("after-refusal", f"r{i}".encode()) for i in range(50)]
        results = await gather_within(futures, 10)
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    assert sorted(r.value for r in cluster.records("after-refusal")) == sorted(
        f"r{i}".encode() for i in range(50)
    )
    return info.value


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_wrong_password(mechanism: str, pki: Pki) -> None:
    async with MockCluster(
        brokers=2, ssl_context=pki.server_context(), sasl_mechanisms=[mechanism], users=USERS
    ) as cluster:
        common = {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": pki.ca_file,
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice",
        }
        exc = await refused_then_good(
            cluster,
            {**common, "sasl_plain_password": WRONG},
            {**common, "sasl_plain_password": USERS["alice"]},
            errors.SaslAuthenticationError,
        )
    text = str(exc)
    assert exc.code == 58 and mechanism in text and "127.0.0.1:" in text
    assert WRONG not in text and WRONG not in repr(exc) and USERS["alice"] not in text


async def test_oauthbearer_expired_token_is_refused() -> None:
    from tests.security.client_matrix import unsecured_jwt

    class Expired:
        async def token(self) -> str:
            return unsecured_jwt(lifetime_s=-60)

    class Fresh:
        async def token(self) -> str:
            return unsecured_jwt()

    async with MockCluster(brokers=2, sasl_mechanisms=["OAUTHBEARER"]) as cluster:
        common = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}
        exc = await refused_then_good(
            cluster,
            {**common, "sasl_oauth_token_provider": Expired()},
            {**common, "sasl_oauth_token_provider": Fresh()},
            errors.SaslAuthenticationError,
        )
    assert "OAUTHBEARER" in str(exc)


async def test_oauthbearer_error_challenge_then_success_is_no_login(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RFC 7628 3.2.2/3.2.3: a broker that sends an error challenge and then, to
    the client's %x01, a success has not authenticated it."""
    from aioproducer.testing.mock.sasl import OAuthBearerAuthenticator
    from tests.security.client_matrix import JwtProvider

    refuse_then_accept = OAuthBearerAuthenticator.step

    def lenient_step(self: OAuthBearerAuthenticator, token: bytes, now_ms: int) -> bytes:
        if self._error is not None and token == b"\x01":
            self.principal, self.complete = "alice", True  # "success" after the error
            return b""
        return refuse_then_accept(self, token, now_ms)

    def refuse(token: str) -> dict:
        raise PermissionError("token not accepted here")

    monkeypatch.setattr(OAuthBearerAuthenticator, "step", lenient_step)
    async with MockCluster(
        brokers=1, sasl_mechanisms=["OAUTHBEARER"], oauth_validator=refuse
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=JwtProvider(),
            max_block_ms=MAX_BLOCK_MS,
        )
        try:
            with pytest.raises(errors.SaslAuthenticationError, match="token not accepted here"):
                await within(producer.start(), MAX_BLOCK_MS / 1000 + 10, "start")
        finally:
            await within(producer.close(), 10, "close")
        # The broker did count a login: only the client's refusal stopped it.
        assert cluster.sasl_authentications >= 1
        assert cluster.request_count(3) == 0  # no Metadata on the connection


async def test_unsupported_mechanism_lists_what_the_broker_offers() -> None:
    async with MockCluster(
        brokers=2, sasl_mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"], users=USERS
    ) as cluster:
        common = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
        }
        exc = await refused_then_good(
            cluster,
            {**common, "sasl_mechanism": "PLAIN"},
            {**common, "sasl_mechanism": "SCRAM-SHA-512"},
            errors.UnsupportedSaslMechanismError,
        )
    assert "PLAIN" in str(exc) and "SCRAM-SHA-512, OAUTHBEARER" in str(exc)


@pytest.mark.parametrize(
    ("server_cert", "ca", "expected"),
    [
        ("good", "other", "unable to get local issuer certificate"),
        ("wrong_host", "ours", "mismatch"),
        ("expired", "ours", "certificate has expired"),
    ],
    ids=["unknown-CA", "hostname-mismatch", "expired"],
)
async def test_certificate_that_does_not_verify(
    server_cert: str, ca: str, expected: str, pki: Pki
) -> None:
    async with MockCluster(brokers=2, ssl_context=pki.server_context(cert=server_cert)) as cluster:
        cafile = pki.other_ca_file if ca == "other" else pki.ca_file
        # The good producer: trusts the right CA; for a certificate that is bad
        # whatever the CA, it opts out of the failing check as an operator would.
        good: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": pki.ca_file}
        if server_cert == "wrong_host":
            good["ssl_check_hostname"] = False
        elif server_cert == "expired":
            import ssl

            ctx = ssl.create_default_context(cafile=pki.ca_file)
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            good = {"security_protocol": "SSL", "ssl_context": ctx}
        exc = await refused_then_good(
            cluster, {"security_protocol": "SSL", "ssl_cafile": cafile}, good, errors.SslError
        )
    assert expected in str(exc).lower(), str(exc)
    assert "certificate did not verify" in str(exc)


async def test_missing_client_certificate(pki: Pki) -> None:
    async with MockCluster(
        brokers=2, ssl_context=pki.server_context(require_client_cert=True)
    ) as cluster:
        base = {"security_protocol": "SSL", "ssl_cafile": pki.ca_file}
        exc = await refused_then_good(
            cluster,
            base,
            {**base, "ssl_certfile": pki.client_cert_file, "ssl_keyfile": pki.client_key_file},
            errors.SslError,
        )
    assert "certificate" in str(exc).lower(), str(exc)


async def test_refusal_on_reconnect_fails_pending_records_quickly() -> None:
    users = dict(USERS)
    async with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], users=users) as cluster:
        producer = plain_producer(cluster, linger_ms=50, delivery_timeout_ms=60_000)
        await within(producer.start(), 10, "start")
        try:
            first = await within(producer.send("reauth-refused", b"before"), 10, "first send")
            assert isinstance(first, RecordMetadata)
            # The password is rotated on the broker and the connection dropped.
            cluster.sasl_config.users["alice"] = "rotated-Password"
            cluster.drop_connections()
            started = time.monotonic()
            futures = [
                await producer.enqueue("reauth-refused", f"p{i}".encode()) for i in range(20)
            ]
            results = await gather_within(futures, 15, "pending records")
            elapsed = time.monotonic() - started
        finally:
            await within(producer.close(), 10, "close")
    assert all(isinstance(r, errors.SaslAuthenticationError) for r in results), results[:3]
    assert USERS["alice"] not in str(results[0])
    # Failed by the refusal, not by the 60 s delivery timeout.
    assert elapsed < 15
    assert [r.value for r in cluster.records("reauth-refused")] == [b"before"]


async def test_refusal_while_getting_a_producer_id_fails_queued_records() -> None:
    """No producer id yet, so nothing is drained: the producer id request is
    what meets the refusal, and the queued records must fail with it."""
    users = dict(USERS)
    async with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], users=users) as cluster:
        # The broker cannot hand out producer ids for now.
        cluster.intercept(
            22,
            lambda body, ctx: InitProducerIdResponse(
                error_code=15, producer_id=-1, producer_epoch=-1
            ),
        )
        producer = plain_producer(cluster, enable_idempotence=True, delivery_timeout_ms=60_000)
        await within(producer.start(), 10, "start")
        try:
            futures = [await producer.enqueue("no-pid", f"q{i}".encode()) for i in range(10)]
            cluster.sasl_config.users["alice"] = "rotated-Password"
            cluster.drop_connections()
            results = await gather_within(futures, 15, "queued records")
        finally:
            await within(producer.close(), 10, "close")
    assert all(isinstance(r, errors.SaslAuthenticationError) for r in results), results[:3]
    assert cluster.records("no-pid") == []
