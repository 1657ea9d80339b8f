"""Authorization refusals end in a typed error at once and are not remembered forever.

Apache Kafka's authorizer says no in two places a producer meets before any
Produce: Metadata (TOPIC_AUTHORIZATION_FAILED for a topic it may not
describe) and InitProducerId (CLUSTER_AUTHORIZATION_FAILED for an idempotent
producer that may write nowhere, KIP-679). As Java's producer, a refusal
fails the records it concerns long before ``delivery_timeout_ms``, and once
the ACL is granted the same producer delivers (the refusal is asked again, not
cached). tests/security/test_kafka_acls.py runs the same against Kafka.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer import RecordMetadata, errors
from aioproducer.protocol.generated import (
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
)
from aioproducer.protocol.generated.metadata import MetadataResponseBroker, MetadataResponseTopic
from aioproducer.testing import MockCluster
from tests.support.aio import gather_within, within
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.code


SETTINGS: dict[str, Any] = {"delivery_timeout_ms": 60_000, "max_block_ms": 30_000, "linger_ms": 1}


async def test_cluster_authorization_refusal_fails_queued_records_at_once() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.intercept(
            22,
            lambda body, ctx: InitProducerIdResponse(
                error_code=CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
            ),
        )
        producer = make_producer(cluster, SETTINGS, enable_idempotence=True)
        await within(producer.start(), 10, "start")
        try:
            started = time.monotonic()
            futures = [await producer.enqueue("t", f"r{i}".encode()) for i in range(10)]
            results = await gather_within(futures, 70, "refused records")
            elapsed = time.monotonic() - started
            assert all(isinstance(r, errors.ClusterAuthorizationFailedError) for r in results), (
                results[:3]
            )
            # At once, not at the 60 s delivery timeout.
            assert elapsed < 10, elapsed
            # Idle, the producer does not keep asking for an id it was refused.
            asked = cluster.request_count(22)
            await asyncio.sleep(1.5)
            assert cluster.request_count(22) - asked <= 1
            # The ACL is granted: the same producer gets an id and delivers.
            cluster.intercept(22, None)
            result = await within(producer.send("t", b"granted"), 10, "send after the grant")
        finally:
            await within(producer.close(), 10, "close")
        assert isinstance(result, RecordMetadata)
        assert [r.value for r in cluster.records("t")] == [b"granted"]


async def test_topic_refused_by_metadata_is_asked_again_on_the_next_send() -> None:
    async with MockCluster(brokers=1, default_partitions=2) as cluster:
        cluster.ensure_topic("secret")

        def refuse_secret(body: MetadataRequest, ctx: Any) -> MetadataResponse | None:
            names = [t.name for t in body.topics or ()]
            if "secret" not in names:
                return None
            return MetadataResponse(
                throttle_time_ms=0,
                brokers=[
                    MetadataResponseBroker(node_id=n, host="127.0.0.1", port=s.port, rack=None)
                    for n, s in cluster.servers.items()
                ],
                cluster_id=cluster.cluster_id,
                controller_id=min(cluster.servers),
                topics=[
                    MetadataResponseTopic(
                        error_code=TOPIC_AUTHORIZATION_FAILED if n == "secret" else 3, name=n
                    )
                    for n in names
                ],
            )

        cluster.intercept(3, refuse_secret)
        async with make_producer(cluster, SETTINGS) as producer:
            with pytest.raises(errors.TopicAuthorizationFailedError, match="secret"):
                await within(producer.send("secret", b"refused"), 10, "refusal")
            # Granted: the next send asks the broker again instead of
            # repeating the refusal it remembers (metadata_max_age_ms is 5 min).
            cluster.intercept(3, None)
            result = await within(producer.send("secret", b"granted"), 10, "send after the grant")
        assert isinstance(result, RecordMetadata)
        assert [r.value for r in cluster.records("secret")] == [b"granted"]
