"""A broker connection speaks Kafka's generated message classes, end to end against the mock."""

from __future__ import annotations

import pytest

from aioproducer.net.connect import open_connection
from aioproducer.protocol.apis import API_VERSIONS, INIT_PRODUCER_ID, METADATA
from aioproducer.protocol.generated import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
)
from aioproducer.protocol.generated._wire import MessageError
from aioproducer.protocol.generated.metadata import MetadataRequestTopic
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio


async def test_requests_go_out_as_generated_messages_and_answers_come_back_as_their_classes() -> (
    None
):
    async with MockCluster(brokers=1, default_partitions=2) as cluster:
        cluster.create_topic("orders")
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        conn = await open_connection(
            0, host, int(port), client_id="t", request_timeout_ms=10_000, connect_timeout=10
        )
        try:
            # Every API the client negotiated has a version within its range.
            assert API_VERSIONS.key in conn.api_versions
            assert METADATA.min_version <= conn.version_for(METADATA) <= METADATA.max_version
            answer = await conn.request(
                METADATA, MetadataRequest(topics=[MetadataRequestTopic(name="orders")])
            )
            assert type(answer) is MetadataResponse
            (topic,) = answer.topics
            assert (topic.name, topic.error_code, len(topic.partitions)) == ("orders", 0, 2)
            pid = await conn.request(
                INIT_PRODUCER_ID,
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
            )
            assert type(pid) is InitProducerIdResponse
            assert pid.error_code == 0 and pid.producer_id >= 0
            # Bad input is refused before anything is written; the connection goes on.
            with pytest.raises(TypeError, match="MetadataRequest"):
                conn.send(METADATA, {"topics": []})  # type: ignore[arg-type]
            with pytest.raises(MessageError):
                conn.send(
                    METADATA, MetadataRequest(topics=[MetadataRequestTopic(name=None)]), version=1
                )
            assert conn.in_flight == 0
            again = await conn.request(METADATA, MetadataRequest(topics=[]))
            assert again.topics == [] and again.brokers[0].port == int(port)
        finally:
            await conn.close()
