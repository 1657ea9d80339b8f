"""The TLS/SASL front is a faithful relay to the real broker.

confluent-kafka produces through :class:`~tests.support.secure_front.SecureFront`
(TLS, mutual TLS, SASL_PLAINTEXT and SASL_SSL with each mechanism) into the
test run's shared Tansu, and a second confluent-kafka client reads the records back
from Tansu directly, bypassing the front. Metadata answers must name the
front, or the producer would have talked to Tansu in plaintext; the front's
authentication counter shows that its SASL was used.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import confluent_kafka
import pytest

from tests.conftest import TopicFactory
from tests.support.aio import read_back
from tests.support.certs import Pki
from tests.support.sasl import librdkafka_sasl
from tests.support.secure_front import SecureFront
from tests.support.verify import produce_with_librdkafka

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret"}
TIMEOUT = 30.0


def _sasl(mechanism: str) -> dict[str, Any]:
    return librdkafka_sasl(mechanism, "alice", USERS["alice"])


async def _relay_round_trip(
    front: SecureFront, kafka_bootstrap: str, topic: str, conf: dict[str, Any], n: int = 50
) -> None:
    records = [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(n)]
    delivered = await asyncio.to_thread(
        produce_with_librdkafka,
        front.bootstrap_servers,
        topic,
        records,
        config={"enable.idempotence": True, **conf},
        timeout=TIMEOUT,
    )
    assert len(delivered) == n
    # Read straight from the broker: the front only relayed.
    got = await read_back(kafka_bootstrap, topic, n)
    assert sorted((r.partition, r.key, r.value) for r in got) == sorted(
        (r["partition"], r["key"], r["value"]) for r in records
    )
    for partition in (0, 1):
        keys = [r.key for r in got if r.partition == partition]
        assert keys == [r["key"] for r in records if r["partition"] == partition]


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
async def test_sasl_ssl_through_the_front(
    pki: Pki, kafka_bootstrap: str, topic_factory: TopicFactory, mechanism: str
) -> None:
    topic = topic_factory(2)
    async with SecureFront(
        kafka_bootstrap,
        ssl_context=pki.server_context(),
        sasl_mechanisms=[mechanism],
        users=USERS,
    ) as front:
        conf = {"security.protocol": "SASL_SSL", **pki.librdkafka_ssl(), **_sasl(mechanism)}
        await _relay_round_trip(front, kafka_bootstrap, topic, conf)
        # Bootstrap and broker connections both went through the front's SASL.
        assert front.sasl_authentications >= 2


@pytest.mark.asyncio
async def test_sasl_plaintext_through_the_front(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    async with SecureFront(
        kafka_bootstrap, sasl_mechanisms=["SCRAM-SHA-512"], users=USERS
    ) as front:
        conf = {"security.protocol": "SASL_PLAINTEXT", **_sasl("SCRAM-SHA-512")}
        await _relay_round_trip(front, kafka_bootstrap, topic, conf)
        assert front.sasl_authentications >= 2


@pytest.mark.asyncio
@pytest.mark.parametrize("mutual", [False, True], ids=["ssl", "mtls"])
async def test_tls_through_the_front(
    pki: Pki, kafka_bootstrap: str, topic_factory: TopicFactory, mutual: bool
) -> None:
    topic = topic_factory(2)
    async with SecureFront(
        kafka_bootstrap, ssl_context=pki.server_context(require_client_cert=mutual)
    ) as front:
        conf = {"security.protocol": "SSL", **pki.librdkafka_ssl(with_cert=mutual)}
        await _relay_round_trip(front, kafka_bootstrap, topic, conf)


@pytest.mark.asyncio
async def test_front_advertises_itself_and_the_sasl_apis(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    async with SecureFront(kafka_bootstrap, sasl_mechanisms=["PLAIN"], users=USERS) as front:

        def describe() -> confluent_kafka.admin.ClusterMetadata:
            admin = confluent_kafka.admin.AdminClient(
                {
                    "bootstrap.servers": front.bootstrap_servers,
                    "security.protocol": "SASL_PLAINTEXT",
                    **_sasl("PLAIN"),
                }
            )
            return admin.list_topics(topic, timeout=TIMEOUT)

        metadata = await asyncio.to_thread(describe)
        addresses = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
        assert addresses == {front.bootstrap_servers}
        assert len(metadata.topics[topic].partitions) == 2


@pytest.mark.asyncio
async def test_wrong_password_at_the_front(kafka_bootstrap: str) -> None:
    async with SecureFront(kafka_bootstrap, sasl_mechanisms=["PLAIN"], users=USERS) as front:

        def first_error() -> list[confluent_kafka.KafkaError]:
            reported: list[confluent_kafka.KafkaError] = []
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": front.bootstrap_servers,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "alice",
                    "sasl.password": "wrong",
                    "error_cb": reported.append,
                }
            )
            producer.poll(0)
            for _ in range(200):
                if reported:
                    break
                producer.poll(0.05)
            return reported

        reported = await asyncio.to_thread(first_error)
        assert reported and reported[0].code() == confluent_kafka.KafkaError._AUTHENTICATION
        assert "Invalid username or password" in reported[0].str()


@pytest.mark.asyncio
async def test_reauthentication_through_the_front_keeps_records_in_order(
    pki: Pki, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(1)
    n = 66
    async with SecureFront(
        kafka_bootstrap,
        ssl_context=pki.server_context(),
        sasl_mechanisms=["SCRAM-SHA-512"],
        users=USERS,
        # librdkafka re-authenticates at 90% of the lifetime: 5 s leaves 0.5 s
        # for the last request before that to be read, on a busy machine too.
        sasl_session_lifetime_ms=5000,
    ) as front:

        def produce_while_sessions_end() -> int:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": front.bootstrap_servers,
                    "security.protocol": "SASL_SSL",
                    **pki.librdkafka_ssl(),
                    **_sasl("SCRAM-SHA-512"),
                    "enable.idempotence": True,
                    "linger.ms": 20,
                }
            )
            for i in range(n):  # ~6.6 s of traffic: well past the first session's end
                producer.produce(topic, b"%d" % i, partition=0)
                producer.poll(0)
                time.sleep(0.1)
            return producer.flush(TIMEOUT)

        assert await asyncio.to_thread(produce_while_sessions_end) == 0
        assert front.sasl_authentications >= 3  # renewed on the open connections
        assert front.sasl_stats.expired_sessions == 0  # never cut off for lateness
    got = await read_back(kafka_bootstrap, topic, n)
    assert [r.value for r in got] == [b"%d" % i for i in range(n)]
