"""The FastAPI lifespan example against the mock cluster (skipped without FastAPI)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from aioproducer import errors
from aioproducer.testing import MockCluster
from examples.fastapi_service import create_app

pytestmark = [pytest.mark.asyncio, pytest.mark.kafka_cluster(brokers=1, default_partitions=2)]


async def test_the_lifespan_runs_the_producer_for_the_app(kafka_cluster: MockCluster) -> None:
    app = create_app(kafka_cluster.bootstrap_servers, linger_ms=0)
    # httpx's ASGI transport does not run the lifespan: enter it as the server would.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            resp = await client.post("/events/orders", json={"id": 17, "total": 990})
            assert resp.status_code == 200, resp.text
            where = resp.json()
            bad = await client.post("/events/no%20spaces", json={"id": 1})
            assert bad.status_code == 400
            assert "illegal characters" in bad.json()["detail"]["error"]
        producer = app.state.producer
    [record] = kafka_cluster.records("orders")
    assert (record.partition, record.offset) == (where["partition"], where["offset"])
    assert (record.key, json.loads(record.value)) == (b"17", {"id": 17, "total": 990})
    with pytest.raises(errors.ProducerClosedError):  # the lifespan's exit closed it
        await producer.send("orders", b"late")


async def test_a_full_buffer_is_503_with_retry_after(kafka_cluster: MockCluster) -> None:
    app = create_app(
        kafka_cluster.bootstrap_servers,
        buffer_memory=8 * 1024,
        batch_size=1024,
        max_block_ms=200,
        request_timeout_ms=60_000,
        delivery_timeout_ms=120_000,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            assert (await client.post("/events/t", json={"id": 1})).status_code == 200
            kafka_cluster.stall_broker(kafka_cluster.broker_ids[0])
            producer = app.state.producer
            for size in (500, 1):  # fill the 8 kB buffer to the last byte behind the stall
                with pytest.raises(errors.KafkaTimeoutError):
                    for _ in range(100):
                        await producer.enqueue("t", b"x" * size)
            resp = await client.post("/events/t", json={"id": 2})
            assert resp.status_code == 503
            assert resp.headers["Retry-After"] == "1"
            assert "memory" in resp.json()["detail"]["error"]
            assert resp.json()["detail"]["safe_to_retry"] is True  # never buffered
            kafka_cluster.resume_broker(kafka_cluster.broker_ids[0])
            await producer.flush(timeout=30)
            assert (await client.post("/events/t", json={"id": 3})).status_code == 200


def fastapi_snippet(document: str) -> str:
    text = (Path(__file__).resolve().parents[2] / document).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    [snippet] = [b for b in blocks if "FastAPI(lifespan=producer_lifespan(" in b]
    return snippet


@pytest.mark.parametrize("document", ["README.md", "docs/guides/web.md"])
async def test_the_documented_example_works_as_written(
    kafka_cluster: MockCluster, document: str
) -> None:
    source = fastapi_snippet(document).replace(
        '"kafka:9092"', repr(kafka_cluster.bootstrap_servers)
    )
    namespace: dict[str, Any] = {"__name__": "documented_fastapi"}
    exec(compile(source, document, "exec"), namespace)  # noqa: S102 - our own documentation
    app = namespace["app"]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            resp = await client.post("/events/readme", json={"n": 1})
            assert resp.status_code == 200, resp.text
    [record] = kafka_cluster.records("readme")
    assert resp.json() == {"partition": record.partition, "offset": record.offset}
    assert json.loads(record.value) == {"n": 1}


def _testing_guide_module() -> dict[str, Any]:
    text = (Path(__file__).resolve().parents[2] / "docs/guides/testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    [snippet] = [b for b in blocks if "from examples.fastapi_service import create_app" in b]
    namespace: dict[str, Any] = {"__name__": "documented_fastapi_tests"}
    exec(compile(snippet, "docs/guides/testing.md", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


@pytest.mark.parametrize(
    "name",
    [
        "test_an_event_is_published_keyed_by_its_id",
        "test_a_broker_that_stops_answering_is_a_503_within_the_bound",
    ],
)
async def test_the_testing_guides_fastapi_tests_pass_as_written(
    kafka_cluster: MockCluster, name: str
) -> None:
    module = _testing_guide_module()
    marks = {m.name: m for m in module["pytestmark"]}
    assert marks["kafka_cluster"].kwargs == {
        "brokers": 1,
        "default_partitions": 1,
    }  # as this module's
    await asyncio.wait_for(module[name](kafka_cluster), 60)
