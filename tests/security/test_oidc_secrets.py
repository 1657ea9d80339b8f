"""The OIDC client secret never shows: not in errors, their chains, nor any log line.

Raw asyncio servers stand in for broken token endpoints: one answers garbage
bytes, one echoes the request's Authorization line back as its status line,
one redirects in a loop, one refuses with HTTP 400 and echoes the request in
its body. For each, the error of ``token()`` and of ``Producer.start()``
(walking ``__cause__`` / ``__context__``, ``str`` and ``repr`` of each
exception and of its args) and every log record at DEBUG must be free of the
secret in all its forms: as is, form-encoded, and inside the base64 HTTP Basic
credentials.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import quote_plus

import pytest
import pytest_asyncio

from aioproducer import Producer, errors
from aioproducer.sasl import ClientCredentialsTokenProvider
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

CLIENT_ID = "orders-service"
SECRET = "s3cr+t/Client=Secret"
BASIC = base64.b64encode(f"{quote_plus(CLIENT_ID)}:{quote_plus(SECRET)}".encode()).decode()
FORMS = (SECRET, quote_plus(SECRET), BASIC, f"Basic {BASIC}")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + (await reader.readexactly(length) if length else b"")


async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    writer.write(b"\x00\xff\xfe not HTTP at all \x01\x02\r\n\r\n")
    await writer.drain()
    writer.close()


async def echo_authorization(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await _request(reader)
    line = next(x for x in request.split(b"\r\n") if x.lower().startswith(b"authorization"))
    writer.write(line + b"\r\n\r\n")
    await writer.drain()
    writer.close()


async def redirect_loop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    writer.write(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /oauth2/token\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()
    writer.close()


async def refusal_echoing_the_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    body = await _request(reader)
    writer.write(
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


ENDPOINTS = [garbage, echo_authorization, redirect_loop, refusal_echoing_the_request]


@pytest_asyncio.fixture(params=ENDPOINTS, ids=lambda h: h.__name__)
async def endpoint(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    server = await asyncio.start_server(request.param, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/oauth2/token"
    finally:
        server.close()
        await server.wait_closed()


def _texts(exc: BaseException) -> list[str]:
    """str and repr of ``exc``, of its args, and of every exception chained to it."""
    out: list[str] = []
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        out += [str(item), repr(item)]
        out += [text for arg in item.args for text in (str(arg), repr(arg))]
        stack += [item.__cause__, item.__context__]
    return out


def _assert_hidden(texts: list[str], where: str) -> None:
    for text in texts:
        for form in FORMS:
            assert form not in text, f"{where} shows the secret ({form!r}): {text[:400]}"


def _log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [caplog.text]
    for record in caplog.records:
        out += [record.getMessage(), repr(record.args), repr(record.__dict__)]
        if record.exc_info and record.exc_info[1] is not None:
            out += _texts(record.exc_info[1])
    return out


async def test_token_errors_never_show_the_secret(
    endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = ClientCredentialsTokenProvider(endpoint, CLIENT_ID, SECRET, timeout_ms=5000)
    with pytest.raises((errors.ConnectionFailedError, errors.SaslAuthenticationError)) as info:
        await within(provider.token(), 10, "token")
    assert "token endpoint" in str(info.value)
    _assert_hidden(_texts(info.value), "token() error")
    _assert_hidden(_log_texts(caplog), "the log")


async def test_start_errors_never_show_the_secret(
    endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"]) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauthbearer_token_endpoint_url=endpoint,
            sasl_oauthbearer_client_id=CLIENT_ID,
            sasl_oauthbearer_client_secret=SECRET,
            max_block_ms=1500,
        )
        try:
            with pytest.raises(errors.KafkaError) as info:
                await within(producer.start(), 10, "start")
        finally:
            await within(producer.close(), 10, "close")
    assert "token endpoint" in str(info.value)
    _assert_hidden(_texts(info.value), "start() error")
    _assert_hidden(_log_texts(caplog), "the log")
