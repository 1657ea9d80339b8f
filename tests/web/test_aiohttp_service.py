"""The aiohttp ingest example against the mock cluster, through real HTTP and Kafka sockets.

pytest-aiohttp's ``aiohttp_client`` runs the application on a loopback port;
the ``kafka_cluster`` fixture (aioproducer's pytest plugin) is the cluster it
produces to, and ``kafka_cluster.records()`` shows what the cluster stored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from aioproducer import Producer, errors
from aioproducer.integrations.aiohttp import PRODUCER
from aioproducer.protocol.apis import PRODUCE
from aioproducer.testing import MockCluster
from examples.aiohttp_service import NDJSON, Settings, create_app

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=1, default_partitions=3, auto_create_topics=True),
]

Client = TestClient[Any, Any]
MakeClient = Callable[..., Awaitable[Client]]
TOPIC = "events"


@pytest.fixture
def service(
    aiohttp_client: Callable[..., Awaitable[Client]], kafka_cluster: MockCluster
) -> MakeClient:
    """``await service(settings, **producer_config)``: a client of a running ingest app."""

    async def make(settings: Settings | None = None, **config: Any) -> Client:
        kafka_cluster.create_topic(TOPIC, 3)
        options = {"linger_ms": 1, "request_timeout_ms": 2_000, "delivery_timeout_ms": 20_000}
        options.update(config)
        app = create_app(
            lambda: Producer(kafka_cluster.bootstrap_servers, **options),
            settings or Settings(),
            close_timeout=5.0,
        )
        return await aiohttp_client(app)

    return make


def stored(cluster: MockCluster) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in cluster.records(TOPIC)]


async def test_a_json_event_is_answered_with_its_partition_and_offset(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    client = await service()
    resp = await client.post(f"/events/{TOPIC}", json={"id": "user-7", "page": "/home"})
    assert resp.status == 200, await resp.text()
    [result] = (await resp.json())["results"]

    [record] = kafka_cluster.records(TOPIC)
    assert (record.partition, record.offset) == (result["partition"], result["offset"])
    assert record.key == b"user-7"
    assert json.loads(record.value) == {"id": "user-7", "page": "/home"}


async def test_an_ndjson_stream_produces_every_line_in_order(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    client = await service(Settings(key_field="user"))
    lines = [json.dumps({"user": 42, "seq": i}) for i in range(200)]
    body = ("\n".join(lines) + "\n").encode()

    async def chunks() -> Any:  # a streamed body, cut mid-line
        for start in range(0, len(body), 997):
            yield body[start : start + 997]

    resp = await client.post(f"/events/{TOPIC}", data=chunks(), headers={"Content-Type": NDJSON})
    assert resp.status == 200, await resp.text()
    results = (await resp.json())["results"]

    records = kafka_cluster.records(TOPIC)
    assert [json.loads(r.value)["seq"] for r in records] == list(range(200))
    assert {r.key for r in records} == {b"42"}  # one key: one partition, in order
    assert [(r.partition, r.offset) for r in records] == [
        (x["partition"], x["offset"]) for x in results
    ]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"id": 1, "x": ', "application/json"),
        (b'[{"id": 1}, 7]', "application/json"),
        (b'{"id": 1}\n{"id": 2}\n{"id": 3,,}\n{"id": 4}\n', NDJSON),
        (b'{"id": 1}\n["not", "an", "object"]\n', NDJSON),
        (b'{"id": {"nested": 1}}', "application/json"),
        (b"", "application/json"),
        (b'{"id": 1, "reading": NaN}', "application/json"),
        (b'[{"id": 1, "reading": Infinity}]', "application/json"),
        (b'{"id": 1}\n{"id": 2, "reading": -Infinity}\n', NDJSON),
    ],
    ids=[
        "truncated",
        "not-an-object",
        "ndjson-bad-line",
        "ndjson-array",
        "bad-key",
        "empty",
        "nan",
        "infinity",
        "ndjson-minus-infinity",
    ],
)
async def test_a_malformed_request_is_400_and_produces_nothing(
    service: MakeClient, kafka_cluster: MockCluster, body: bytes, content_type: str
) -> None:
    client = await service()
    resp = await client.post(f"/events/{TOPIC}", data=body, headers={"Content-Type": content_type})
    assert resp.status == 400
    assert "error" in await resp.json()
    # A good request afterwards is the only thing stored.
    ok = await client.post(f"/events/{TOPIC}", json={"id": "after"})
    assert ok.status == 200
    assert stored(kafka_cluster) == [{"id": "after"}]


async def test_an_illegal_topic_or_media_type_is_refused(service: MakeClient) -> None:
    client = await service()
    bad_topic = await client.post("/events/no%20spaces", json={"id": 1})
    assert bad_topic.status == 400
    assert "illegal characters" in (await bad_topic.json())["error"]
    text = await client.post(
        f"/events/{TOPIC}", data=b"id=1", headers={"Content-Type": "text/plain"}
    )
    assert text.status == 415


@pytest.mark.parametrize("content_type", ["application/json", NDJSON])
async def test_an_oversized_event_is_413_and_produces_nothing(
    service: MakeClient, kafka_cluster: MockCluster, content_type: str
) -> None:
    client = await service(Settings(max_event_bytes=1_000))
    small, big = {"id": "a", "pad": "x" * 100}, {"id": "b", "pad": "x" * 2_000}
    if content_type == NDJSON:
        body = f"{json.dumps(small)}\n{json.dumps(big)}\n".encode()
    else:
        body = json.dumps([small, big]).encode()
    resp = await client.post(f"/events/{TOPIC}", data=body, headers={"Content-Type": content_type})
    assert resp.status == 413
    assert "over the limit of 1000" in (await resp.json())["error"]
    assert kafka_cluster.records(TOPIC) == []


async def test_a_body_over_the_limit_is_413(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    client = await service(Settings(max_event_bytes=1_000, max_body_bytes=10_000))
    events = [{"id": i, "pad": "x" * 500} for i in range(40)]  # ~20 kB of small events
    as_json = await client.post(f"/events/{TOPIC}", json=events)
    assert as_json.status == 413
    ndjson = "".join(json.dumps(e) + "\n" for e in events)
    as_ndjson = await client.post(
        f"/events/{TOPIC}", data=ndjson.encode(), headers={"Content-Type": NDJSON}
    )
    assert as_ndjson.status == 413
    assert kafka_cluster.records(TOPIC) == []


async def test_a_stalled_broker_gives_503_with_retry_after_then_recovers(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    client = await service(
        Settings(fire_and_forget=True, retry_after_s=3),
        buffer_memory=64 * 1024,
        batch_size=4 * 1024,
        max_block_ms=300,
        request_timeout_ms=1_000,
        delivery_timeout_ms=60_000,
    )
    assert (await client.get("/health")).status == 200
    event = {"id": "k", "pad": "x" * 1_000}
    assert (await client.post(f"/events/{TOPIC}", json=event)).status == 202
    await client.app[PRODUCER].flush(timeout=10)  # the topic's metadata is known now
    kafka_cluster.stall_broker(kafka_cluster.broker_ids[0])

    accepted = 1
    for _ in range(200):  # 200 kB of events into a 64 kB buffer: it must fill
        resp = await asyncio.wait_for(client.post(f"/events/{TOPIC}", json=[event] * 4), 10)
        if resp.status == 503:
            break
        assert resp.status == 202
        accepted += (await resp.json())["accepted"]
    else:
        pytest.fail("the buffer never filled: no 503")
    assert resp.headers["Retry-After"] == "3"
    refused = await resp.json()
    assert "300" in refused["error"] and "memory" in refused["error"]
    accepted += refused["accepted"]  # events of the refused request taken before the bound
    health = await client.get("/health")
    assert health.status == 503

    kafka_cluster.resume_broker(kafka_cluster.broker_ids[0])
    for _ in range(300):  # the sender retries what the stall held up; the buffer drains
        resp = await client.post(f"/events/{TOPIC}", json=event)
        if resp.status == 202:
            break
        await asyncio.sleep(0.1)
    assert resp.status == 202
    accepted += 1
    await client.app[PRODUCER].flush(timeout=30)
    assert len(kafka_cluster.records(TOPIC)) == accepted
    assert (await client.get("/health")).status == 200
    text = await (await client.get("/metrics")).text()
    assert f"ingest_events_delivered_total {float(accepted)}" in text
    assert "ingest_events_failed_total 0.0" in text


async def test_a_stalled_leader_of_a_known_topic_gives_503_within_the_produce_timeout(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    # The producer's own bounds are Java's defaults: a request would wait for
    # delivery_timeout_ms (120 s) without the service's produce timeout.
    client = await service(request_timeout_ms=30_000, delivery_timeout_ms=120_000)
    assert (await client.post(f"/events/{TOPIC}", json={"id": "warm-up"})).status == 200
    kafka_cluster.stall_broker(kafka_cluster.broker_ids[0])

    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await asyncio.wait_for(client.post(f"/events/{TOPIC}", json={"id": "late"}), 30)
    waited = loop.time() - started
    assert resp.status == 503, await resp.text()
    assert resp.headers["Retry-After"] == str(Settings().retry_after_s)
    body = await resp.json()
    assert "not acknowledged within 5.0 s" in body["error"]
    assert body["results"] == [{"error": "not acknowledged yet", "safe_to_retry": False}]
    assert Settings().produce_timeout_s <= waited < 30

    # The record was not taken back: once the broker answers again it is delivered.
    kafka_cluster.resume_broker(kafka_cluster.broker_ids[0])
    await client.app[PRODUCER].flush(timeout=60)
    assert [e["id"] for e in stored(kafka_cluster)] == ["warm-up", "late"]


async def test_a_failed_event_says_whether_it_is_safe_to_retry(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    """Refused before anything was written: safe; written, then answered with an
    error the producer cannot retry past: not safe (a resend could duplicate it)."""
    client = await service(retries=0, enable_idempotence=False)
    assert (await client.post(f"/events/{TOPIC}", json={"id": "warm-up"})).status == 200
    for partition in range(3):
        kafka_cluster.fail_produce(TOPIC, partition, errors.InvalidRecordError.code)
    resp = await asyncio.wait_for(client.post(f"/events/{TOPIC}", json={"id": "refused"}), 30)
    assert resp.status == 502, await resp.text()
    [result] = (await resp.json())["results"]
    assert result["safe_to_retry"] is True, result
    for partition in range(3):
        kafka_cluster.fail_produce(
            TOPIC, partition, errors.NotEnoughReplicasAfterAppendError.code, after_append=True
        )
    resp = await asyncio.wait_for(client.post(f"/events/{TOPIC}", json={"id": "in the log"}), 30)
    assert resp.status == 503, await resp.text()
    [result] = (await resp.json())["results"]
    assert result["safe_to_retry"] is False, result
    assert sorted(e["id"] for e in stored(kafka_cluster)) == ["in the log", "warm-up"]


async def test_metrics_are_served_in_prometheus_text_format(service: MakeClient) -> None:
    client = await service()
    assert (await client.post(f"/events/{TOPIC}", json=[{"id": 1}, {"id": 2}])).status == 200
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=")
    text = await resp.text()
    assert "ingest_events_accepted_total 2.0" in text
    assert "ingest_events_delivered_total 2.0" in text
    assert 'kafka_producer_record_send_total{client_id="' in text
    assert 'kafka_producer_topic_record_send_total{client_id="' in text
    assert f'topic="{TOPIC}"' in text


async def test_shutdown_with_requests_in_flight_keeps_every_acknowledged_event_once(
    service: MakeClient, kafka_cluster: MockCluster
) -> None:
    client = await service()
    # Slow acknowledgements keep requests in flight while the server shuts down.
    kafka_cluster.delay_responses(0.2, api_key=PRODUCE.key)
    session = aiohttp.ClientSession()  # not the test client's: it must outlive the server
    url = client.make_url(f"/events/{TOPIC}")

    first_answer = asyncio.Event()

    async def post(i: int) -> tuple[int, dict[str, Any] | None]:
        try:
            async with session.post(url, json={"id": f"e{i}"}) as resp:
                body = (await resp.json()) if resp.status == 200 else None
        except aiohttp.ClientError:
            return i, None
        if body is not None:
            first_answer.set()
        return i, body

    try:
        tasks = [asyncio.create_task(post(i)) for i in range(300)]
        # Shut down once one request is answered (a fixed sleep is too short on a loaded
        # machine): with 0.2 s acknowledgements most of the others are still in flight.
        await asyncio.wait_for(first_answer.wait(), 20)
        await client.server.close()  # graceful: handlers finish, then the producer closes
        outcomes = await asyncio.gather(*tasks)
    finally:
        await session.close()

    acked = {f"e{i}": body["results"][0] for i, body in outcomes if body is not None}
    records = kafka_cluster.records(TOPIC)
    ids = [json.loads(r.value)["id"] for r in records]
    assert len(ids) == len(set(ids)), "an event was stored twice"
    where = {
        json.loads(r.value)["id"]: {"partition": r.partition, "offset": r.offset} for r in records
    }
    assert acked, "no request was answered before the shutdown"
    for event_id, result in acked.items():
        assert where.get(event_id) == result
