"""Every registry request is bounded, and the client's connections end with it.

A registry that accepts connections and never answers (over http, or over
https where the handshake itself never completes) must not hang a caller: the
typed unavailable error comes after ``timeout_s`` per attempt. The servers here
are raw asyncio sockets, so what the client does on the wire is what is checked.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from aioproducer import Producer
from aioproducer.schema_registry import (
    AvroSerializer,
    SchemaRegistryClient,
    SchemaRegistryUnavailableError,
)
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

ORDER = (
    '{"type": "record", "name": "Order", "namespace": "shop", '
    '"fields": [{"name": "id", "type": "long"}]}'
)
TIMEOUT_S = 0.3
# Far from a working client (two attempts of 0.3 s) and from a hung one.
BOUND_S = 10.0


class Server:
    """A loopback TCP server; ``answer`` decides what (if anything) a connection gets."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.connections = 0
        self.closed_by_client = asyncio.Event()
        self.port = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        if not self.answer:
            await reader.read()  # read whatever comes (a request, a ClientHello), say nothing
            return
        await reader.readuntil(b"\r\n\r\n")
        body = json.dumps({"compatibilityLevel": "FULL"}).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        if await reader.read() == b"":  # the connection stays open until the client ends it
            self.closed_by_client.set()


@asynccontextmanager
async def serving(answer: bool) -> AsyncIterator[Server]:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        for writer in server._writers:
            writer.close()
        listener.close()
        await listener.wait_closed()


@pytest.mark.parametrize(
    ("scheme", "timeout"),
    [
        ("http", {"request.timeout.ms": str(int(TIMEOUT_S * 1000))}),
        ("https", {"request.timeout.ms": str(int(TIMEOUT_S * 1000))}),
        ("http", {"timeout": TIMEOUT_S}),  # confluent-kafka-python's name, in seconds
    ],
    ids=["http", "https", "python-timeout"],
)
async def test_a_registry_that_never_answers_times_out_typed(
    scheme: str, timeout: dict[str, object]
) -> None:
    async with serving(answer=False) as server:
        conf = {
            "schema.registry.url": f"{scheme}://127.0.0.1:{server.port}",
            **timeout,
            "max.retries": "1",
            "retries.wait.ms": "10",
        }
        started = time.monotonic()
        async with SchemaRegistryClient.from_config(conf) as registry:
            with pytest.raises(SchemaRegistryUnavailableError) as failure:
                await within(registry.get_compatibility(), BOUND_S, "get_compatibility")
        elapsed = time.monotonic() - started
    assert elapsed < BOUND_S
    assert "2 attempt(s)" in str(failure.value)
    assert f"no answer within request timeout {TIMEOUT_S:g} s" in str(failure.value)
    assert server.connections == 2  # each attempt reached the server, and gave up on it


async def test_send_to_a_silent_registry_fails_typed_and_buffers_nothing() -> None:
    async with serving(answer=False) as server, MockCluster() as cluster:
        cluster.create_topic("orders", partitions=1)
        async with (
            SchemaRegistryClient(
                f"http://127.0.0.1:{server.port}", timeout_s=TIMEOUT_S, max_retries=0
            ) as registry,
            Producer(
                cluster.bootstrap_servers, value_serializer=AvroSerializer(registry, ORDER)
            ) as producer,
        ):
            with pytest.raises(SchemaRegistryUnavailableError, match="no answer within"):
                await within(producer.send("orders", {"id": 1}), BOUND_S, "send")
            with pytest.raises(SchemaRegistryUnavailableError, match="no answer within"):
                await within(producer.enqueue("orders", {"id": 2}), BOUND_S, "enqueue")
            with pytest.raises(SchemaRegistryUnavailableError, match="no answer within"):
                await within(producer.send_many("orders", [{"id": 3}]), BOUND_S, "send_many")
            await within(producer.flush(), BOUND_S, "flush")
        assert cluster.records("orders") == []
        assert server.connections == 3


async def test_async_with_closes_the_session_and_its_connections() -> None:
    async with serving(answer=True) as server:
        async with SchemaRegistryClient(f"http://127.0.0.1:{server.port}") as registry:
            assert await registry.get_compatibility() == "FULL"
            session = registry._session
            assert session is not None and not session.closed
            # Kept alive for the next request while the client is open.
            await asyncio.sleep(0.2)
            assert not server.closed_by_client.is_set()
        assert session.closed and registry._session is None
        await within(server.closed_by_client.wait(), BOUND_S, "the client closing its connection")
        # A closed client may be used again: a new session, closed in turn.
        assert await registry.get_compatibility() == "FULL"
        await registry.close()
        assert registry._session is None
        assert server.connections == 2
