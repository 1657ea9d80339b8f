"""The security cases the end-to-end tests run: server settings and client settings.

One :class:`Case` per row of the matrix (SSL, mTLS, SASL_PLAINTEXT and
SASL_SSL with each mechanism); ``server_kwargs`` go to ``MockCluster`` or
``SecureFront``, ``client_kwargs`` to ``Producer``. Also the shared checks:
:func:`produce_and_check` (against a mock) and :func:`upstream`.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from aioproducer import Producer, RecordMetadata
from aioproducer.testing import MockCluster
from tests.support.aio import gather_within
from tests.support.certs import Pki

USERS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2"}


def plain_producer(cluster: MockCluster, **overrides: Any) -> Producer:
    """A SASL_PLAINTEXT + PLAIN producer logging in as alice."""
    return Producer(
        cluster.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        **overrides,
    )


def unsecured_jwt(sub: str = "alice", lifetime_s: float = 3600) -> str:
    """An unsecured JWT (alg none) as Kafka's default OAUTHBEARER validator accepts."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': time.time() + lifetime_s})}."


class JwtProvider:
    """A token provider: a fresh unsecured JWT per authentication."""

    def __init__(self) -> None:
        self.calls = 0

    async def token(self) -> str:
        self.calls += 1
        return unsecured_jwt()

    def extensions(self) -> dict[str, str]:
        return {"traceId": "abc123"}


@dataclass(frozen=True)
class Case:
    name: str
    tls: bool
    mutual: bool
    mechanism: str | None

    @property
    def protocol(self) -> str:
        if self.mechanism is None:
            return "SSL"
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"

    def server_kwargs(self, pki: Pki) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.tls:
            kwargs["ssl_context"] = pki.server_context(require_client_cert=self.mutual)
        if self.mechanism is not None:
            kwargs["sasl_mechanisms"] = [self.mechanism]
            if self.mechanism != "OAUTHBEARER":
                kwargs["users"] = USERS
        return kwargs

    def client_kwargs(self, pki: Pki, **overrides: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            kwargs["ssl_cafile"] = pki.ca_file
        if self.mutual:
            kwargs.update(
                ssl_certfile=pki.client_cert_file,
                ssl_keyfile=pki.client_encrypted_key_file,
                ssl_password=pki.client_key_password,
            )
        if self.mechanism == "OAUTHBEARER":
            kwargs.update(sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=JwtProvider())
        elif self.mechanism is not None:
            kwargs.update(
                sasl_mechanism=self.mechanism,
                sasl_plain_username="alice",
                sasl_plain_password=USERS["alice"],
            )
        kwargs.update(overrides)
        return kwargs


MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CASES = [
    Case("SSL", tls=True, mutual=False, mechanism=None),
    Case("mTLS", tls=True, mutual=True, mechanism=None),
    *(Case(f"SASL_PLAINTEXT-{m}", tls=False, mutual=False, mechanism=m) for m in MECHANISMS),
    *(Case(f"SASL_SSL-{m}", tls=True, mutual=False, mechanism=m) for m in MECHANISMS),
]


MOCK_RECORDS = 200


async def produce_and_check(cluster: MockCluster, producer: Producer, topic: str) -> None:
    """Send keyed records; all must be acknowledged and stored once, in order per key."""
    futures = [
        await producer.enqueue(topic, f"v-{i}".encode(), key=f"k-{i % 7}".encode())
        for i in range(MOCK_RECORDS)
    ]
    await producer.flush(10)
    results = await gather_within(futures, 10, "delivery")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    stored = cluster.records(topic)
    assert sorted(r.value for r in stored) == sorted(f"v-{i}".encode() for i in range(MOCK_RECORDS))
    # Per key (so per partition) the order of sending is kept.
    for key in {f"k-{i % 7}".encode() for i in range(MOCK_RECORDS)}:
        sent = [f"v-{i}".encode() for i in range(MOCK_RECORDS) if f"k-{i % 7}".encode() == key]
        got = [r.value for r in sorted(stored, key=lambda r: r.offset) if r.key == key]
        assert got == sent


def upstream(bootstrap: str) -> tuple[str, int]:
    """``(host, port)`` of the first server of a bootstrap string, for SecureFront."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)
