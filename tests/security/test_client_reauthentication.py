"""KIP-368: the broker announces a short session lifetime; records keep streaming.

The mock closes a connection that sends anything but re-authentication once
its session has expired, as Kafka does. The producer must authenticate again
on the same connection before that, holding new requests while the exchange
runs, so that no batch fails, none is duplicated and none is reordered.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.net import sasl_handshake as handshake
from aioproducer.testing import MockCluster
from tests.security.client_matrix import USERS, JwtProvider, plain_producer
from tests.support.aio import gather_within, until, within

pytestmark = pytest.mark.asyncio

LIFETIME_MS = 1500
STREAM_SECONDS = 6.0  # four lifetimes


@pytest.fixture(autouse=True)
def reauthenticate_at_half_the_lifetime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-authenticate at 50% of the session lifetime instead of 85-95%.

    With sessions of a second or so, 85-95% leaves 75-225 ms before the broker
    closes the connection: a busy machine can miss that. The schedule itself is
    checked in test_client_sasl_exchanges; here it only has to come in time.
    """
    monkeypatch.setattr(
        handshake, "reauthentication_delay", lambda lifetime_ms, rand: lifetime_ms * 0.5 / 1000
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "OAUTHBEARER"])
async def test_records_stream_across_reauthentications(mechanism: str) -> None:
    server = {"sasl_mechanisms": [mechanism], "sasl_session_lifetime_ms": LIFETIME_MS}
    client = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        provider = JwtProvider()
        client["sasl_oauth_token_provider"] = provider
    else:
        server["users"] = USERS
        client.update(sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    async with MockCluster(brokers=2, default_partitions=4, **server) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            enable_idempotence=True,
            linger_ms=5,
            max_in_flight_requests_per_connection=5,
            **client,
        )
        await within(producer.start(), 10, "start")
        futures = []
        sent: dict[bytes, list[bytes]] = {}
        try:
            # Warm up: one record per key, so both brokers have their connection.
            for i in range(8):
                key, value = f"k{i}".encode(), f"v{i}".encode()
                sent[key] = [value]
                futures.append(await producer.enqueue("reauth", value, key=key))
            await gather_within(futures, 10, "warm-up")
            logins_at_start = cluster.sasl_authentications
            connections_at_start = cluster.request_count(18)  # ApiVersions opens each connection
            deadline = time.monotonic() + STREAM_SECONDS
            i = 8
            while time.monotonic() < deadline:
                for _ in range(20):
                    key = f"k{i % 8}".encode()
                    value = f"v{i}".encode()
                    sent.setdefault(key, []).append(value)
                    futures.append(await producer.enqueue("reauth", value, key=key))
                    i += 1
                await asyncio.sleep(0.01)
            results = await gather_within(futures, 20, "delivery")
        finally:
            await within(producer.close(), 10, "close")
        failures = [r for r in results if not isinstance(r, RecordMetadata)]
        assert not failures, failures[:3]
        stored = sorted(cluster.records("reauth"), key=lambda r: (r.partition, r.offset))
        # Exactly once ...
        assert len(stored) == len(futures)
        assert sorted(r.value for r in stored) == sorted(v for vs in sent.values() for v in vs)
        # ... and in order per key (each key lives on one partition).
        for key, values in sent.items():
            assert [r.value for r in stored if r.key == key] == values
        # The same connections all along: none expired and had to be replaced.
        opened = cluster.request_count(18) - connections_at_start
        assert opened == 0, f"{opened} connections opened while streaming"
        # Each connection re-authenticated several times (two brokers, ~4 lifetimes).
        reauths = cluster.sasl_authentications - logins_at_start
        assert reauths >= 2 * 3, cluster.sasl_authentications
        assert cluster.sasl_failures == 0
        if mechanism == "OAUTHBEARER":
            assert provider.calls >= cluster.sasl_authentications


async def test_an_idle_connection_neither_reauthenticates_nor_stays_open() -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=["PLAIN"], users=USERS, sasl_session_lifetime_ms=1000
    ) as cluster:
        async with plain_producer(cluster, connections_max_idle_ms=1500) as producer:
            await within(producer.send("idle", b"first", key=b"k"), 10, "first send")
            opened = cluster.request_count(18)
            logins = cluster.sasl_authentications
            # Idle past connections_max_idle_ms: the connection is closed ...
            await until(lambda: _open_connections(producer) == 0, 10, "idle close")
            # ... and nothing was sent to renew a session no request needed (KIP-368).
            assert cluster.sasl_authentications == logins
            await within(producer.send("idle", b"second", key=b"k"), 10, "second send")
            # The second record needed a new connection.
            assert cluster.request_count(18) > opened
        assert [r.value for r in cluster.records("idle")] == [b"first", b"second"]


def _open_connections(producer: Producer) -> float:
    (count,) = [v for m, v in producer.metrics().items() if m.name == "connection-count"]
    return count


def _requests_but_sasl(cluster: MockCluster) -> int:
    # Everything but ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36).
    return cluster.request_count() - sum(cluster.request_count(k) for k in (17, 18, 36))


async def test_a_tiny_session_lifetime_costs_at_most_one_reauthentication_per_request() -> None:
    """A 1 ms session: re-authenticate when a request is to go out, never on a timer."""
    async with MockCluster(
        brokers=1, sasl_mechanisms=["PLAIN"], users=USERS, sasl_session_lifetime_ms=1
    ) as cluster:
        async with plain_producer(cluster, linger_ms=0) as producer:
            await within(producer.send("tiny", b"warm-up"), 10, "first send")
            # Idle: nothing to send, so no re-authentication, however often
            # the session expires.
            reauths = cluster.sasl_reauthentications
            await asyncio.sleep(1.0)
            assert cluster.sasl_reauthentications - reauths <= 1
            # 200 records in 20 rounds: each request is preceded by at most one
            # re-authentication, and requests queued meanwhile share it.
            reauths, requests = cluster.sasl_reauthentications, _requests_but_sasl(cluster)
            results = []
            for round_ in range(20):
                futures = [
                    await producer.enqueue("tiny", f"{round_}-{i}".encode()) for i in range(10)
                ]
                results += await gather_within(futures, 20, f"round {round_}")
            sent = _requests_but_sasl(cluster) - requests
            renewed = cluster.sasl_reauthentications - reauths
        assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
        assert len(cluster.records("tiny")) == 201
        assert 1 <= renewed <= sent, (renewed, sent, cluster.sasl_stats)
