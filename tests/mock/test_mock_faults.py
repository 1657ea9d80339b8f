"""Each fault API does what it says, seen through real client behaviour.

Most tests drive aioproducer's Producer and assert both sides: what the client
experienced (success after retries, a timeout, an error) and what the mock saw
(request counts, records written exactly once). Connection-level faults are
also checked with the raw client, which has no retries to hide them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.protocol.apis import APIS_BY_KEY
from aioproducer.protocol.generated import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
from aioproducer.protocol.generated.metadata import MetadataRequestTopic
from aioproducer.protocol.generated.produce import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from tests.mock import RawClient, batch_bytes
from tests.support.producers import make_producer

TIMEOUT = 10.0
# Delays and throttles whose effect a test times: long enough that a slow or
# busy machine cannot make an undelayed answer look delayed.
DELAY = 2.0
NOT_ENOUGH_REPLICAS = errors.NotEnoughReplicasError.code
NOT_LEADER = errors.NotLeaderOrFollowerError.code
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code


async def _send(producer: Producer, topic: str, value: bytes, **kwargs: Any) -> Any:
    return await asyncio.wait_for(producer.send(topic, value, **kwargs), TIMEOUT)


async def _raw(cluster: MockCluster, broker: int = 0) -> RawClient:
    return await RawClient.connect(cluster.bootstrap_servers.split(",")[broker])


_VERSIONS_BODY = ApiVersionsRequest(client_software_name="t", client_software_version="1")
_METADATA_T = MetadataRequest(topics=[MetadataRequestTopic(name="t")])


@pytest.mark.asyncio
async def test_fail_produce_is_retried_then_written_once() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        cluster.fail_produce("t", 0, NOT_ENOUGH_REPLICAS, count=2)
        async with make_producer(cluster) as producer:
            md = await _send(producer, "t", b"once")
            assert cluster.request_count(0) == 3  # two scripted failures, then the write
            assert [(r.value, r.offset) for r in cluster.records("t")] == [(b"once", md.offset)]
            # A non-retriable code reaches the caller and nothing is written.
            cluster.fail_produce("t", 0, errors.TopicAuthorizationFailedError.code)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await _send(producer, "t", b"refused")
        assert [r.value for r in cluster.records("t")] == [b"once"]


@pytest.mark.asyncio
async def test_move_leader_client_follows_new_leader() -> None:
    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=1)
        assert cluster.leader("t", 0) == 0
        async with make_producer(cluster) as producer:
            await _send(producer, "t", b"before", partition=0)
            assert cluster.move_leader("t", 0) == 1
            assert cluster.leader("t", 0) == 1
            await _send(producer, "t", b"after", partition=0)
        assert [r.value for r in cluster.records("t")] == [b"before", b"after"]
        assert cluster.request_count(0, broker=0) == 2  # the write, then NOT_LEADER
        assert cluster.request_count(0, broker=1) == 1
        # Metadata shows the new leader with a bumped leader epoch.
        client = await _raw(cluster, 2)
        meta = await client.request(3, 12, _METADATA_T)
        partition = meta.topics[0].partitions[0]
        assert (partition.leader_id, partition.leader_epoch) == (1, 1)
        stale = await (await _raw(cluster, 0)).produce("t", 0, batch_bytes([b"raw"]))
        assert stale.error_code == NOT_LEADER
        await client.close()


@pytest.mark.asyncio
async def test_take_leader_offline_until_a_leader_is_elected_again() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=1)
        cluster.take_leader_offline("t", 0)
        client = await _raw(cluster, 1)
        meta = await client.request(3, 12, _METADATA_T)
        partition = meta.topics[0].partitions[0]
        assert (partition.error_code, partition.leader_id) == (
            errors.LeaderNotAvailableError.code,
            -1,
        )
        assert partition.leader_epoch == 1
        old_leader = await _raw(cluster, 0)
        refused = await old_leader.produce("t", 0, batch_bytes([b"raw"]), version=10)
        assert refused.error_code == NOT_LEADER
        assert refused.current_leader == LeaderIdAndEpoch()  # KIP-951: no leader to name
        await old_leader.close()
        assert cluster.records("t") == []
        assert cluster.move_leader("t", 0, 1) == 1
        meta = await client.request(3, 12, _METADATA_T)
        partition = meta.topics[0].partitions[0]
        assert (partition.error_code, partition.leader_id) == (0, 1)
        assert (await client.produce("t", 0, batch_bytes([b"raw"]))).error_code == 0
        assert [r.value for r in cluster.records("t")] == [b"raw"]
        await client.close()


@pytest.mark.asyncio
async def test_drop_mid_response_client_reconnects_without_duplicate() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(cluster) as producer:
            await _send(producer, "t", b"first")
            connections = cluster.request_count(18)
            cluster.drop_connections(mid_response=True)
            md = await _send(producer, "t", b"second")
        records = cluster.records("t")
        # The cut response's batch was written; the retry was deduplicated.
        assert [r.value for r in records] == [b"first", b"second"]
        assert records[1].offset == md.offset
        assert cluster.request_count(0) == 3
        assert cluster.request_count(18) == connections + 1  # one new connection


@pytest.mark.asyncio
async def test_drop_connections_now_and_after_requests() -> None:
    async with MockCluster(brokers=2) as cluster:
        doomed, spared, counted = (
            await _raw(cluster, 0),
            await _raw(cluster, 1),
            await _raw(cluster, 1),
        )
        for client in (doomed, spared, counted):  # the brokers have registered each connection
            assert (await client.request(18, 3, _VERSIONS_BODY)).error_code == 0
        cluster.drop_connections(0)
        assert await doomed.read_frame(2.0) is None  # closed by the broker
        assert (await spared.request(18, 3, _VERSIONS_BODY)).error_code == 0

        cluster.drop_connections(after_requests=2)
        assert (await counted.request(18, 3, _VERSIONS_BODY)).error_code == 0
        counted.send(18, 3, _VERSIONS_BODY)
        assert await counted.read_frame(2.0) is None  # the 2nd request is not answered
        assert (await spared.request(18, 3, _VERSIONS_BODY)).error_code == 0
        spared.send(18, 3, _VERSIONS_BODY)
        assert await spared.read_frame(2.0) is None
        fresh = await _raw(cluster, 1)  # connections opened later are not affected
        for _ in range(3):
            assert (await fresh.request(18, 3, _VERSIONS_BODY)).error_code == 0
        await fresh.close()


@pytest.mark.asyncio
async def test_stall_broker_requests_time_out_then_resume() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(
            cluster, request_timeout_ms=300, delivery_timeout_ms=800, max_block_ms=800
        ) as producer:
            await _send(producer, "t", b"before")
            cluster.stall_broker(0)
            silent = await _raw(cluster)  # connections are still accepted
            silent.send(18, 3, _VERSIONS_BODY)
            with pytest.raises(asyncio.TimeoutError):
                await silent.read_frame(0.3)
            with pytest.raises(errors.KafkaTimeoutError):
                await _send(producer, "t", b"stalled")
            cluster.resume_broker(0)
            assert (await silent.receive(APIS_BY_KEY[18], 3))[1].error_code == 0  # answered late
            await _send(producer, "t", b"resumed")
        values = [r.value for r in cluster.records("t")]
        assert values[0] == b"before" and values[-1] == b"resumed"
        await silent.close()


@pytest.mark.asyncio
async def test_delay_responses_and_timeout_retry_is_deduplicated() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=1)
        client, other = await _raw(cluster, 0), await _raw(cluster, 1)
        cluster.delay_responses(DELAY, broker=0, api_key=18, count=1)
        start = time.monotonic()
        await other.request(18, 3, _VERSIONS_BODY, timeout=TIMEOUT)
        assert time.monotonic() - start < DELAY  # another broker: not delayed
        start = time.monotonic()
        await client.request(18, 3, _VERSIONS_BODY, timeout=TIMEOUT)
        assert time.monotonic() - start >= DELAY
        start = time.monotonic()
        await client.request(18, 3, _VERSIONS_BODY, timeout=TIMEOUT)
        assert time.monotonic() - start < DELAY  # count=1: only once

        # A Produce answered after the client's request timeout: the client
        # retries, the mock recognises the retry and the record exists once.
        cluster.delay_responses(0.8, api_key=0, count=1)
        async with make_producer(
            cluster, request_timeout_ms=300, delivery_timeout_ms=5000
        ) as producer:
            md = await _send(producer, "t", b"slow")
        assert [(r.value, r.offset) for r in cluster.records("t")] == [(b"slow", md.offset)]
        assert cluster.request_count(0) >= 2


@pytest.mark.asyncio
async def test_throttle_answers_at_once_then_mutes_the_channel() -> None:
    # KIP-219: the throttled response is not held back; the channel is muted after it.
    async with MockCluster(brokers=1) as cluster:
        client = await _raw(cluster)
        cluster.throttle(0, int(DELAY * 1000))
        start = time.monotonic()
        response = await client.request(3, 12, MetadataRequest(topics=[]))
        answered = time.monotonic() - start
        assert response.throttle_time_ms == DELAY * 1000
        cluster.throttle(0, 0)
        # The next request on this connection is read only when the mute ends.
        assert (
            await client.request(3, 12, MetadataRequest(topics=[]), timeout=TIMEOUT)
        ).throttle_time_ms == 0
        muted = time.monotonic() - start
        assert answered < DELAY <= muted
        await client.close()


@pytest.mark.asyncio
async def test_fail_api_init_producer_id_and_end_txn() -> None:
    async with MockCluster(brokers=2) as cluster:
        first, second = await _raw(cluster, 0), await _raw(cluster, 1)
        body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
        cluster.fail_api(22, COORDINATOR_NOT_AVAILABLE, broker=0)
        assert (await second.request(22, 4, body)).error_code == 0  # other broker unaffected
        failed = await first.request(22, 4, body)
        assert (failed.error_code, failed.producer_id) == (COORDINATOR_NOT_AVAILABLE, -1)
        assert (await first.request(22, 4, body)).error_code == 0  # count=1

        cluster.create_topic("t", partitions=1)
        cluster.fail_api(22, COORDINATOR_NOT_AVAILABLE, count=2)
        cluster.fail_api(26, errors.ConcurrentTransactionsError.code, count=1)
        before = cluster.request_count(22)
        async with make_producer(cluster, transactional_id="faulty") as producer:
            await asyncio.wait_for(producer.init_transactions(), TIMEOUT)
            await asyncio.wait_for(producer.begin_transaction(), TIMEOUT)
            await _send(producer, "t", b"in-txn")
            await asyncio.wait_for(producer.commit_transaction(), TIMEOUT)
        assert cluster.request_count(22) - before == 3  # two failures, then the id
        assert cluster.request_count(26) == 2  # EndTxn retried after CONCURRENT_TRANSACTIONS
        assert [r.value for r in cluster.records("t")] == [b"in-txn"]


@pytest.mark.asyncio
async def test_intercept_custom_responses() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        seen: list[RequestContext] = []

        def fixed_id(body: InitProducerIdRequest, ctx: RequestContext) -> InitProducerIdResponse:
            seen.append(ctx)
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=0, producer_id=4242, producer_epoch=7
            )

        refusals = iter([True])

        async def refuse_once(body: ProduceRequest, ctx: RequestContext) -> ProduceResponse | None:
            await asyncio.sleep(0)
            if not next(refusals, False):
                return None  # default handling
            return ProduceResponse(
                responses=[
                    TopicProduceResponse(
                        name=t.name,
                        partition_responses=[
                            PartitionProduceResponse(
                                index=p.index, error_code=NOT_ENOUGH_REPLICAS, base_offset=-1
                            )
                            for p in t.partition_data
                        ],
                    )
                    for t in body.topic_data
                ]
            )

        cluster.intercept(22, fixed_id)
        cluster.intercept(0, refuse_once)
        async with make_producer(cluster, client_id="intercepted") as producer:
            await _send(producer, "t", b"custom")
        (record,) = cluster.records("t")
        assert (record.producer_id, record.producer_epoch) == (4242, 7)
        assert cluster.request_count(0) == 2  # refused once by the intercept, then written
        assert seen[0].broker_id == 0 and seen[0].client_id == "intercepted"
        assert seen[0].api_key == 22 and seen[0].api_version == 5

        def broken(body: MetadataRequest, ctx: RequestContext) -> None:
            raise RuntimeError("boom")

        cluster.intercept(3, broken)
        client = await _raw(cluster)
        response = await client.request(3, 12, _METADATA_T)
        assert response.topics[0].error_code == errors.UnknownServerError.code
        assert [str(e) for e in cluster.handler_errors] == ["boom"]
        cluster.intercept(3, None)
        assert (await client.request(3, 12, _METADATA_T)).topics[0].error_code == 0
        await client.close()


@pytest.mark.asyncio
async def test_intercept_answer_of_the_wrong_shape_is_a_server_error() -> None:
    """A dict, another API's response, or a field the version lacks: UNKNOWN_SERVER_ERROR, kept."""
    async with MockCluster(brokers=1) as cluster:
        client = await _raw(cluster)
        body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
        answers: list[Any] = [
            {"error_code": 0, "producer_id": 1, "producer_epoch": 0},
            ApiVersionsResponse(),
            # ongoing_txn_producer_id exists from v6 only (KIP-939); asked at v4.
            InitProducerIdResponse(producer_id=1, producer_epoch=0, ongoing_txn_producer_id=5),
        ]
        cluster.intercept(22, lambda _body, _ctx: answers[len(cluster.handler_errors)])
        for _ in answers:
            refused = await client.request(22, 4, body)
            assert refused.error_code == errors.UnknownServerError.code
        kinds = [type(e).__name__ for e in cluster.handler_errors]
        assert kinds == ["TypeError", "TypeError", "UnsupportedVersionError"]
        assert "InitProducerIdResponse" in str(cluster.handler_errors[0])
        cluster.intercept(22, None)
        assert (await client.request(22, 4, body)).error_code == 0
        await client.close()


@pytest.mark.asyncio
async def test_clear_faults_restores_normal_service() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        client = await _raw(cluster)
        cluster.fail_produce("t", 0, NOT_ENOUGH_REPLICAS, count=5)
        cluster.fail_api(3, COORDINATOR_NOT_AVAILABLE, count=5)
        cluster.delay_responses(5.0)
        cluster.throttle(0, 5000)
        cluster.intercept(18, lambda body, ctx: ApiVersionsResponse(error_code=99))
        cluster.drop_connections(after_requests=1)
        cluster.stall_broker(0)
        cluster.clear_faults()
        start = time.monotonic()
        assert (await client.request(18, 3, _VERSIONS_BODY)).error_code == 0
        assert (await client.request(3, 12, MetadataRequest(topics=[]))).throttle_time_ms == 0
        assert (await client.produce("t", 0, batch_bytes([b"raw"]))).error_code == 0
        assert time.monotonic() - start < 4.0  # none of the 5 s delays and throttles
        assert "produce=0" in repr(cluster.faults)
        await client.close()
