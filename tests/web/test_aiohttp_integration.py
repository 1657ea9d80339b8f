"""aioproducer.integrations.aiohttp: the producer follows the application's life, bounded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from aioproducer import Producer, errors
from aioproducer.integrations.aiohttp import PRODUCER, producer_context, setup_producer
from aioproducer.testing import MockCluster
from tests.support.aio import closed_port, within

pytestmark = [pytest.mark.kafka_cluster(brokers=1, default_partitions=1)]

AiohttpClient = Callable[..., Awaitable[Any]]


@pytest.mark.asyncio
async def test_handlers_reach_the_started_producer_and_cleanup_closes_it(
    aiohttp_client: AiohttpClient, kafka_cluster: MockCluster
) -> None:
    async def handler(request: web.Request) -> web.Response:
        md = await request.app[PRODUCER].send("t", await request.read())
        return web.json_response({"offset": md.offset})

    app = web.Application()
    assert setup_producer(app, lambda: Producer(kafka_cluster.bootstrap_servers)) is PRODUCER
    app.router.add_post("/", handler)
    client = await aiohttp_client(app)
    for expected in range(3):
        resp = await client.post("/", data=b"payload")
        assert (await resp.json()) == {"offset": expected}
    producer = app[PRODUCER]
    await client.close()
    with pytest.raises(errors.ProducerClosedError):
        await producer.send("t", b"after shutdown")
    assert [r.value for r in kafka_cluster.records("t")] == [b"payload"] * 3


@pytest.mark.asyncio
async def test_two_producers_under_their_own_keys(
    aiohttp_client: AiohttpClient, kafka_cluster: MockCluster
) -> None:
    audit: web.AppKey[Producer] = web.AppKey("audit", Producer)
    app = web.Application()
    setup_producer(app, Producer(kafka_cluster.bootstrap_servers, client_id="main"))
    setup_producer(app, Producer(kafka_cluster.bootstrap_servers, client_id="audit"), key=audit)
    await aiohttp_client(app)
    assert app[PRODUCER] is not app[audit]
    assert (app[PRODUCER].client_id, app[audit].client_id) == ("main", "audit")


@pytest.mark.asyncio
async def test_cleanup_is_bounded_when_the_broker_is_stuck(
    aiohttp_client: AiohttpClient, kafka_cluster: MockCluster
) -> None:
    app = web.Application()
    setup_producer(
        app,
        lambda: Producer(
            kafka_cluster.bootstrap_servers, request_timeout_ms=30_000, delivery_timeout_ms=120_000
        ),
        close_timeout=0.5,
    )
    client = await aiohttp_client(app)
    producer = app[PRODUCER]
    await producer.send("t", b"warm-up")
    kafka_cluster.stall_broker(kafka_cluster.broker_ids[0])
    pending = await producer.enqueue("t", b"never acknowledged")

    # Without the bound, close() would wait for the 120 s delivery timeout.
    await within(client.close(), 10, "the application's cleanup")
    with pytest.raises(
        errors.KafkaTimeoutError, match="the producer was closed with a timeout of 0.[45]"
    ):
        await within(pending, 5, "the pending record's future")


@pytest.mark.asyncio
async def test_startup_fails_when_the_cluster_cannot_be_reached(
    aiohttp_client: AiohttpClient,
) -> None:
    app = web.Application()
    setup_producer(app, lambda: Producer(f"127.0.0.1:{closed_port()}", max_block_ms=300))
    with pytest.raises(errors.NoBrokersAvailableError):
        await aiohttp_client(app)


@pytest.mark.asyncio
async def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="close_timeout"):
        producer_context(lambda: Producer(), close_timeout=-1)
    ctx = producer_context(lambda: "not a producer")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="expected a Producer, got str"):
        await ctx(web.Application()).__anext__()


def test_a_missing_aiohttp_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"
        "try:\n"
        "    import aioproducer.integrations.aiohttp\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "pip install 'aioproducer[aiohttp]'" in out
