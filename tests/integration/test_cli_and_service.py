"""The command line and the ingest service against Tansu, read back with confluent-kafka."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aioproducer import Producer
from examples.aiohttp_service import NDJSON, Settings, create_app
from tests.conftest import TopicFactory
from tests.support.aio import read_back, within
from tests.support.cli import run_cli

pytestmark = pytest.mark.asyncio


async def test_produce_writes_what_librdkafka_reads(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=3)
    lines = "".join(f"key-{i % 7}|value {i}\n" for i in range(200)).encode()
    code, _out, err = await run_cli(
        "produce", "-b", kafka_bootstrap, "-t", topic, "-K", "|", "-H", "origin=cli", stdin=lines
    )
    assert code == 0, err
    assert f"delivered 200 record(s) to {topic!r}" in err

    records = await read_back(kafka_bootstrap, topic, 200)
    assert len(records) == 200
    assert sorted((r.key, r.value) for r in records) == sorted(
        (f"key-{i % 7}".encode(), f"value {i}".encode()) for i in range(200)
    )
    assert all(r.headers == [("origin", b"cli")] for r in records)
    for key in {r.key for r in records}:  # one key, one partition, in line order
        same = [r for r in records if r.key == key]
        assert len({r.partition for r in same}) == 1
        assert [int(r.value.split()[1]) for r in same] == sorted(
            int(r.value.split()[1]) for r in same
        )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_broker_command_serves_until_a_signal(sig: signal.Signals) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aioproducer.cli",
        "broker",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        address = (
            (await within(proc.stdout.readline(), 60, "the broker's address")).decode().strip()
        )
        assert address.startswith("127.0.0.1:"), address
        async with Producer(address, linger_ms=0) as producer:
            sent = [await producer.send("dev", f"r{i}".encode()) for i in range(3)]
        records = await read_back(address, "dev", 3)
        assert sorted(r.value for r in records) == [b"r0", b"r1", b"r2"]
        assert {(r.partition, r.offset) for r in records} == {(m.partition, m.offset) for m in sent}

        proc.send_signal(sig)
        _out, err = await within(proc.communicate(), 30, "the broker's shutdown")
        assert proc.returncode == 0, err
        assert b"broker stopped" in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_perf_without_a_bootstrap_server_runs_on_the_embedded_broker() -> None:
    code, out, err = await run_cli(
        "perf", "--topic", "perf", "--num-records", "20000", "--record-size", "100", "--json"
    )
    assert code == 0, err
    assert "started the embedded broker at 127.0.0.1:" in err
    summary = json.loads(out)
    assert summary["records"] == 20000 and summary["errors"] == 0


async def test_the_ingest_service_answers_with_offsets_librdkafka_finds(
    aiohttp_client: Callable[..., Awaitable[Any]],
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
) -> None:
    topic = topic_factory(partitions=3)
    app = create_app(lambda: Producer(kafka_bootstrap, linger_ms=2), Settings(key_field="user"))
    client = await aiohttp_client(app)
    events = [{"user": f"u{i % 5}", "n": i} for i in range(100)]
    body = "".join(json.dumps(e) + "\n" for e in events).encode()
    resp = await client.post(f"/events/{topic}", data=body, headers={"Content-Type": NDJSON})
    assert resp.status == 200, await resp.text()
    results = (await resp.json())["results"]
    assert (await client.get("/health")).status == 200

    records = await read_back(kafka_bootstrap, topic, 100)
    assert len(records) == 100
    found = {(r.partition, r.offset): (r.key, json.loads(r.value)) for r in records}
    for event, where in zip(events, results):
        assert found[(where["partition"], where["offset"])] == (event["user"].encode(), event)
