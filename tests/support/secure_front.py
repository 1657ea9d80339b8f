"""A TLS- and SASL-terminating front for a plaintext broker (the test run's shared Tansu).

The embedded Tansu serves plaintext only, so secured clients reach it through
:class:`SecureFront`: a listener on a free loopback port that speaks TLS when
given a server context, authenticates every connection with the mock
cluster's server-side SASL (:class:`~aioproducer.testing.mock.sasl_session.SaslSession`),
and relays the other requests, frame by frame, over a fresh plaintext
connection to the broker. Records written through it land in the real broker,
where an independent client reads them back directly.

What the front changes in the broker's answers, and why:

* Metadata and FindCoordinator responses name the broker's own address; the
  front rewrites every broker to itself, otherwise clients would connect to
  the broker directly, bypassing TLS and SASL;
* ApiVersions gains SaslHandshake and SaslAuthenticate (the front answers
  them), and the Metadata and FindCoordinator ranges are narrowed to what the
  codecs used for that rewrite can read.

Responses go back in request order, as a broker sends them: answers the front
makes itself wait behind the relayed requests sent before them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from aioproducer.protocol.apis import (
    API_VERSIONS,
    APIS_BY_KEY,
    FIND_COORDINATOR,
    METADATA,
    PRODUCE,
    Api,
)
from aioproducer.protocol.framing import (
    FrameDecoder,
    decode_request,
    decode_response,
    encode_response,
    read_correlation_id,
)
from aioproducer.protocol.generated import MetadataResponse
from aioproducer.protocol.generated._wire import MessageError
from aioproducer.protocol.generated.api_versions import ApiVersion
from aioproducer.testing.mock.sasl import OAuthValidator, sasl_server_config
from aioproducer.testing.mock.sasl_session import SASL_API_VERSIONS, SaslSession, SaslStats

__all__ = ["SecureFront"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_TIMEOUT = 10.0
_UNSUPPORTED_VERSION = 35
# What a frame that does not decode raises (MessageError: the codecs' own word for it).
_UNDECODABLE = (MessageError, UnicodeDecodeError, IndexError, struct.error)
# Answers the front rewrites; it can only let clients use versions it can decode.
_REWRITTEN: dict[int, Api[Any, Any]] = {
    METADATA.key: METADATA,
    FIND_COORDINATOR.key: FIND_COORDINATOR,
}


class SecureFront:
    """TLS and SASL in front of the plaintext broker at ``upstream``.

    ``async with SecureFront(("127.0.0.1", 9092), ssl_context=ctx,
    sasl_mechanisms=["SCRAM-SHA-512"], users={"alice": "secret"}) as front:``
    then connect clients to ``front.bootstrap_servers``. The SASL arguments
    mean what they mean for :class:`~aioproducer.testing.MockCluster`.
    """

    def __init__(
        self,
        upstream: tuple[str, int] | str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanisms: Sequence[str] | None = None,
        users: Mapping[str, str] | None = None,
        oauth_validator: OAuthValidator | None = None,
        sasl_session_lifetime_ms: int | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if isinstance(upstream, str):
            up_host, _, up_port = upstream.rpartition(":")
            upstream = (up_host, int(up_port))
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.ssl_context = ssl_context
        self.sasl_config = sasl_server_config(
            sasl_mechanisms, users, oauth_validator, sasl_session_lifetime_ms
        )
        self.sasl_stats = SaslStats()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return (
            f"SecureFront({self.host}:{self.port} -> {self.upstream[0]}:{self.upstream[1]}, "
            f"tls={self.ssl_context is not None}, sasl={self.sasl_config!r})"
        )

    @property
    def bootstrap_servers(self) -> str:
        if self._server is None:
            raise RuntimeError("the front is not started")
        return f"{self.host}:{self.port}"

    @property
    def sasl_authentications(self) -> int:
        return self.sasl_stats.authentications

    async def __aenter__(self) -> SecureFront:
        self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.ssl_context)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        sasl = (
            SaslSession(self.sasl_config, self.sasl_stats) if self.sasl_config is not None else None
        )
        relay = _Relay(self, reader, writer, sasl)
        try:
            await relay.run()
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, OSError) as exc:
            log.debug("front: connection ended: %s", exc)
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            await relay.close()

    # -- answers rewritten on their way back ------------------------------------------

    def rewrite(self, api_key: int, version: int, frame: bytes) -> bytes:
        """The response frame (size prefix included) the client gets for ``frame``."""
        if api_key == API_VERSIONS.key:
            body = decode_response(API_VERSIONS, version, frame)
            if body.error_code == _UNSUPPORTED_VERSION:
                return _SIZE.pack(len(frame)) + frame
            body.api_keys = self._api_versions(body.api_keys)
        elif api_key in _REWRITTEN:
            body = decode_response(_REWRITTEN[api_key], version, frame)
            self._point_at_front(body, version)
        else:
            return _SIZE.pack(len(frame)) + frame
        return encode_response(APIS_BY_KEY[api_key], version, read_correlation_id(frame), body)

    def _api_versions(self, keys: list[ApiVersion]) -> list[ApiVersion]:
        out: list[ApiVersion] = []
        for entry in keys:
            api = _REWRITTEN.get(entry.api_key)
            if api is not None:
                low = max(entry.min_version, api.min_version)
                high = min(entry.max_version, api.max_version)
                if low > high:
                    continue
                entry = ApiVersion(api_key=entry.api_key, min_version=low, max_version=high)
            if entry.api_key not in SASL_API_VERSIONS:
                out.append(entry)
        if self.sasl_config is not None:
            for key, (low, high) in SASL_API_VERSIONS.items():
                out.append(ApiVersion(api_key=key, min_version=low, max_version=high))
        return sorted(out, key=lambda e: e.api_key)

    def _point_at_front(self, body: Any, version: int) -> None:
        """Name the front wherever a Metadata or FindCoordinator answer names a broker."""
        if isinstance(body, MetadataResponse):
            for broker in body.brokers:
                broker.host, broker.port = self.host, self.port
            return
        if version >= 4:  # KIP-699: a batch of coordinators, no top-level address
            for coordinator in body.coordinators:
                coordinator.host, coordinator.port = self.host, self.port
        else:
            body.host, body.port = self.host, self.port


class _Relay:
    """One client connection and its plaintext connection to the broker."""

    def __init__(
        self,
        front: SecureFront,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sasl: SaslSession | None,
    ) -> None:
        self.front = front
        self.reader = reader
        self.writer = writer
        self.sasl = sasl
        self.up_reader: asyncio.StreamReader | None = None
        self.up_writer: asyncio.StreamWriter | None = None
        # Answers in request order: (bytes to send, close after) futures.
        self.order: asyncio.Queue[asyncio.Future[tuple[bytes, bool]]] = asyncio.Queue()
        # correlation id -> (api key, version, future) of relayed requests.
        self.pending: dict[int, tuple[int, int, asyncio.Future[tuple[bytes, bool]]]] = {}
        self.helpers: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        self.helpers.append(asyncio.create_task(self._write_answers()))
        decoder = FrameDecoder()
        while True:
            data = await self.reader.read(65536)
            if not data:
                return
            for frame in decoder.feed(data):
                if not await self._request(frame):
                    # Let the answers already due (an authentication error) go out first.
                    await self._answer(b"", close=True)
                    await asyncio.wait_for(asyncio.shield(self.helpers[0]), _TIMEOUT)
                    return

    async def _answer(self, data: bytes, close: bool) -> None:
        done: asyncio.Future[tuple[bytes, bool]] = asyncio.get_running_loop().create_future()
        done.set_result((data, close))
        await self.order.put(done)

    async def _request(self, frame: bytes) -> bool:
        loop = asyncio.get_running_loop()
        if self.sasl is not None:
            reply = self.sasl.receive(frame, int(time.time() * 1000))
            if reply is not None:
                await self._answer(reply.data, reply.close)
                return not reply.close
        if len(frame) < _HEADER.size:
            return False
        api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        upstream = await self._upstream()
        if not _acks_zero(api_key, frame):
            answer: asyncio.Future[tuple[bytes, bool]] = loop.create_future()
            self.pending[correlation_id] = (api_key, version, answer)
            await self.order.put(answer)
        upstream.write(_SIZE.pack(len(frame)) + frame)
        await upstream.drain()
        return True

    async def _upstream(self) -> asyncio.StreamWriter:
        """The connection to the broker, opened with the first relayed request."""
        if self.up_writer is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*self.front.upstream), _TIMEOUT
            )
            self.up_reader, self.up_writer = reader, writer
            self.helpers.append(asyncio.create_task(self._read_upstream()))
            return writer
        return self.up_writer

    async def _read_upstream(self) -> None:
        assert self.up_reader is not None
        decoder = FrameDecoder()
        try:
            while True:
                data = await self.up_reader.read(65536)
                if not data:
                    break
                for frame in decoder.feed(data):
                    entry = self.pending.pop(read_correlation_id(frame), None)
                    if entry is None:
                        log.warning("front: broker answered an unknown correlation id")
                        continue
                    api_key, version, answer = entry
                    try:
                        answer.set_result((self.front.rewrite(api_key, version, frame), False))
                    except _UNDECODABLE as exc:
                        answer.set_exception(exc)
        finally:
            # The broker hung up: so does the front, after what it already answered.
            for _key, _version, answer in self.pending.values():
                if not answer.done():
                    answer.set_result((b"", True))
            await self._answer(b"", close=True)

    async def _write_answers(self) -> None:
        while True:
            answer = await self.order.get()
            try:
                data, close = await answer
            except _UNDECODABLE as exc:
                log.warning("front: cannot rewrite the broker's answer: %s", exc)
                data, close = b"", True
            if data:
                self.writer.write(data)
                await self.writer.drain()
            if close:
                self.writer.close()
                return

    async def close(self) -> None:
        for task in self.helpers:
            task.cancel()
        await asyncio.gather(*self.helpers, return_exceptions=True)
        for writer in (self.up_writer, self.writer):
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), 1.0)


def _acks_zero(api_key: int, frame: bytes) -> bool:
    """Whether this is a Produce with acks=0, which the broker never answers."""
    if api_key != PRODUCE.key:
        return False
    try:
        _api, _version, _cid, _client, body = decode_request(frame, APIS_BY_KEY)
    except _UNDECODABLE:
        return False
    return bool(body.acks == 0)
