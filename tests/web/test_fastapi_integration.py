"""aioproducer.integrations.fastapi against the mock cluster, through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from fastapi import FastAPI, Request

from aioproducer import Producer, errors
from aioproducer.integrations.fastapi import (
    ProducerDep,
    get_producer,
    producer_lifespan,
    run_producer,
    send_within,
    status_for,
)
from aioproducer.testing import MockCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.kafka_cluster(brokers=1, default_partitions=1)]

# What a handler gives the producer to answer while the broker is stalled (the
# answer must come after it), what it gives a healthy send (the answer must
# come before it), and what the tests give any answer: far apart, so that a
# slow machine cannot blur them.
TIMEOUT = 1.0
HEALTHY = 60.0
ANSWER_BOUND = 30.0


def make_app(bootstrap: str, **config: Any) -> FastAPI:
    config = {"linger_ms": 0, **config}
    app = FastAPI(lifespan=producer_lifespan(lambda: Producer(bootstrap, **config)))

    @app.post("/events/{topic}")
    async def publish(
        topic: str, request: Request, producer: ProducerDep, timeout: float = HEALTHY
    ) -> dict[str, int]:
        md = await send_within(producer, topic, await request.body(), timeout=timeout)
        return {"partition": md.partition, "offset": md.offset}

    return app


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[Any]:
    # httpx's ASGI transport does not run the lifespan: enter it as the server would.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            yield client


async def test_the_lifespan_runs_the_producer_and_send_within_answers(
    kafka_cluster: MockCluster,
) -> None:
    app = make_app(kafka_cluster.bootstrap_servers)
    async with serving(app) as client:
        resp = await client.post("/events/orders", content=b"one")
        assert resp.status_code == 200, resp.text
        producer = app.state.producer
    [record] = kafka_cluster.records("orders")
    assert resp.json() == {"partition": record.partition, "offset": record.offset}
    assert record.value == b"one"
    with pytest.raises(errors.ProducerClosedError):  # the lifespan's exit closed it
        await producer.send("orders", b"late")


async def test_a_broker_that_stops_answering_is_503_within_the_handlers_bound(
    kafka_cluster: MockCluster,
) -> None:
    """The producer would retry for delivery_timeout_ms (two minutes); the
    handler answers after its own timeout, and the record is delivered later."""
    app = make_app(kafka_cluster.bootstrap_servers, request_timeout_ms=60_000)
    async with serving(app) as client:
        assert (await client.post("/events/t", content=b"before")).status_code == 200
        broker = kafka_cluster.broker_ids[0]
        kafka_cluster.stall_broker(broker)
        resp = await asyncio.wait_for(
            client.post("/events/t", content=b"stalled", params={"timeout": TIMEOUT}), ANSWER_BOUND
        )
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "1"
        assert resp.json()["detail"] == {
            "error": f"the record was not acknowledged within {TIMEOUT} s; it may still be delivered",
            "safe_to_retry": False,
        }
        kafka_cluster.resume_broker(broker)
        await app.state.producer.flush(timeout=ANSWER_BOUND)
        assert (await client.post("/events/t", content=b"after")).status_code == 200
    # The record the handler gave up on stayed in the producer: written once.
    assert [r.value for r in kafka_cluster.records("t")] == [b"before", b"stalled", b"after"]


async def test_refusals_get_their_status_and_say_whether_a_resend_is_safe(
    kafka_cluster: MockCluster,
) -> None:
    app = make_app(kafka_cluster.bootstrap_servers, max_request_size=1000, retries=0)
    async with serving(app) as client:
        too_large = await client.post("/events/t", content=b"x" * 2000)
        assert too_large.status_code == 413
        assert too_large.json()["detail"]["safe_to_retry"] is True
        bad_topic = await client.post("/events/no%20spaces", content=b"x")
        assert bad_topic.status_code == 400
        assert "illegal characters" in bad_topic.json()["detail"]["error"]
        # A broker refusal that wrote nothing: the error says so, so a resend is safe.
        kafka_cluster.fail_produce("t", 0, errors.InvalidRecordError.code)
        refused = await client.post("/events/t", content=b"refused")
        assert refused.status_code == 502
        assert refused.json()["detail"]["safe_to_retry"] is True
        assert "INVALID_RECORD" in refused.json()["detail"]["error"]
    assert kafka_cluster.records("t") == []


async def test_a_programming_error_is_raised_not_answered(kafka_cluster: MockCluster) -> None:
    """A transactional producer outside a transaction is the program's mistake:
    no 5xx that invites a retry."""
    async with run_producer(
        FastAPI(), Producer(kafka_cluster.bootstrap_servers, transactional_id="fastapi-txn")
    ) as producer:
        with pytest.raises(errors.IllegalStateError):
            await send_within(producer, "t", b"x", timeout=HEALTHY)


async def test_many_requests_with_a_broker_lost_midway_all_answer_and_acks_are_true(
    kafka_cluster: MockCluster,
) -> None:
    """200 concurrent requests, the broker stalled after half: every request
    answers within the bound, and every 200 names a record that is there once."""
    app = make_app(kafka_cluster.bootstrap_servers, request_timeout_ms=60_000)
    broker = kafka_cluster.broker_ids[0]
    async with serving(app) as client:
        first = await asyncio.gather(
            *(client.post("/events/load", content=b"a%d" % i) for i in range(100))
        )
        kafka_cluster.stall_broker(broker)
        second = await asyncio.wait_for(
            asyncio.gather(
                *(
                    client.post("/events/load", content=b"b%d" % i, params={"timeout": TIMEOUT})
                    for i in range(100)
                )
            ),
            ANSWER_BOUND,
        )
        kafka_cluster.resume_broker(broker)
        await app.state.producer.flush(timeout=ANSWER_BOUND)
    assert [r.status_code for r in first] == [200] * 100
    assert {r.status_code for r in second} == {503}
    assert all(r.json()["detail"]["safe_to_retry"] is False for r in second)
    records = kafka_cluster.records("load")
    where = {(r.partition, r.offset): r.value for r in records}
    assert len(where) == len(records) == 200  # the given-up records were delivered once too
    for i, resp in enumerate(first):
        assert where[(resp.json()["partition"], resp.json()["offset"])] == b"a%d" % i


async def test_run_producer_composes_with_an_apps_own_lifespan(kafka_cluster: MockCluster) -> None:
    opened: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened.append("registry")
        async with run_producer(app, Producer(kafka_cluster.bootstrap_servers, linger_ms=0)) as p:
            assert app.state.producer is p
            yield
        opened.append("closed")

    app = FastAPI(lifespan=lifespan)

    @app.get("/ping")
    async def ping(producer: ProducerDep) -> dict[str, int]:
        return {"brokers": await producer.ping(5)}

    async with serving(app) as client:
        assert (await client.get("/ping")).json() == {"brokers": 1}
    assert opened == ["registry", "closed"]


async def test_without_the_lifespan_the_dependency_says_what_is_missing() -> None:
    app = FastAPI()

    @app.get("/")
    async def handler(request: Request) -> None:
        get_producer(request)

    async with serving(app) as client:
        with pytest.raises(RuntimeError, match=r"producer_lifespan"):
            await client.get("/")


async def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="close_timeout"):
        producer_lifespan(lambda: None, close_timeout=-1)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="timeout must be > 0"):
        await send_within(None, "t", b"x", timeout=0)  # type: ignore[arg-type]
    assert status_for(errors.KafkaTimeoutError("x")) == 503
    assert status_for(errors.NotEnoughReplicasError("x")) == 503  # retriable
