"""One mock broker: an asyncio server on loopback and its connection loop.

Each connection is served like a Kafka broker serves it: requests are read in
order and answered one at a time, in order (Kafka mutes a channel while a
request is being processed). The loop is also where connection-level faults
act: a stalled broker stops reading, a dropped connection is closed, a
response is delayed or cut in the middle, a throttled channel is muted (KIP-219).

On a secured cluster the listener speaks TLS (``asyncio.start_server(ssl=)``)
and each connection has a :class:`~aioproducer.testing.mock.sasl_session.SaslSession`
that answers the SASL requests and admits the others only once authenticated.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time

from ...protocol.apis import API_VERSIONS, APIS_BY_KEY
from ...protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    decode_request,
    encode_response,
)
from ...protocol.generated._wire import MessageError
from .faults import RequestContext
from .handlers import (
    SUPPORTED_VERSIONS,
    TV2_VERSIONS,
    api_versions_body,
    error_response,
    respond,
)
from .sasl_session import SaslSession
from .state import ClusterView

__all__ = ["BrokerServer"]

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_UNSUPPORTED_VERSION = 35
_UNKNOWN_SERVER_ERROR = -1


class _Connection:
    """One client connection to a mock broker."""

    __slots__ = ("drop_after", "peer", "sasl", "task", "writer")

    def __init__(self, writer: asyncio.StreamWriter, sasl: SaslSession | None) -> None:
        self.writer = writer
        self.sasl = sasl
        self.peer = writer.get_extra_info("peername")
        self.task: asyncio.Task[None] | None = None
        # Requests still to be answered before this connection is dropped.
        self.drop_after: int | None = None

    @property
    def closed(self) -> bool:
        return self.writer.transport.is_closing()

    def close(self) -> None:
        self.writer.transport.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"_Connection(peer={self.peer}, {state}, drop_after={self.drop_after})"


class BrokerServer:
    """A broker of the mock cluster, listening on ``host:port``."""

    def __init__(self, cluster: ClusterView, node_id: int, host: str, port: int = 0) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self.connections: set[_Connection] = set()
        #: Connections accepted since the start (closed ones included).
        self.accepted = 0
        self._running = asyncio.Event()  # cleared while the broker is stalled
        self._running.set()

    def __repr__(self) -> str:
        state = "stalled" if self.stalled else ("listening" if self._server else "stopped")
        return (
            f"BrokerServer(node_id={self.node_id}, {self.host}:{self.port}, {state}, "
            f"connections={len(self.connections)})"
        )

    async def start(self) -> None:
        self._stopping = False
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, ssl=self.cluster.ssl_context
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        self._stopping = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = [c.task for c in self.connections if c.task is not None]
        for conn in list(self.connections):
            conn.close()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    # -- faults acting on connections --------------------------------------

    @property
    def stalled(self) -> bool:
        return not self._running.is_set()

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def drop(self, after_requests: int) -> None:
        """Close every open connection now, or after ``after_requests`` more requests each."""
        for conn in list(self.connections):
            if after_requests <= 0:
                conn.close()
            else:
                conn.drop_after = after_requests

    # -- the connection loop -----------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        config = self.cluster.sasl_config
        conn = _Connection(
            writer, SaslSession(config, self.cluster.sasl_stats) if config is not None else None
        )
        if getattr(self, "_stopping", False):
            # Accepted just before stop(): never registered, so close it here.
            conn.close()
            return
        conn.task = asyncio.current_task()
        self.accepted += 1
        self.connections.add(conn)
        decoder = FrameDecoder()
        try:
            while not conn.closed:
                await self._running.wait()  # a stalled broker reads nothing
                data = await reader.read(65536)
                if not data:
                    break
                for frame in decoder.feed(data):
                    await self._running.wait()
                    if conn.closed or not await self._handle(conn, frame):
                        return
        except (ConnectionError, FrameTooLargeError, ssl.SSLError) as exc:
            log.debug("broker %d: connection %s ended: %s", self.node_id, conn.peer, exc)
        except asyncio.CancelledError:
            pass
        finally:
            self.connections.discard(conn)
            conn.close()

    async def _handle(self, conn: _Connection, frame: bytes) -> bool:
        """Answer one request; False closes the connection."""
        if conn.sasl is not None and conn.sasl.expects_raw_token:
            # After SaslHandshake v0 the client sends bare tokens, not requests.
            reply = conn.sasl.receive(frame, int(time.time() * 1000))
            assert reply is not None
            return await self._send(conn, reply.data, -1) and not reply.close
        if len(frame) < _HEADER.size:
            return False
        api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        self.cluster.count_request(self.node_id, api_key)
        if conn.drop_after is not None:
            conn.drop_after -= 1
            if conn.drop_after <= 0:
                return False  # dropped before answering
        if conn.sasl is not None:
            reply = conn.sasl.receive(frame, int(time.time() * 1000))
            if reply is not None:
                if reply.data and not await self._send(conn, reply.data, api_key):
                    return False
                return not reply.close
        supported = SUPPORTED_VERSIONS.get(api_key)
        if self.cluster.transaction_version >= 2:
            supported = TV2_VERSIONS.get(api_key, supported)
        if supported is None:
            # Kafka closes the connection on an API key it does not know.
            log.warning("broker %d: unsupported api key %d", self.node_id, api_key)
            return False
        if api_key == API_VERSIONS.key and version > supported[1]:
            # KIP-511: answer an ApiVersions too new to parse in v0 form, with
            # UNSUPPORTED_VERSION and the versions this broker speaks.
            body = api_versions_body(_UNSUPPORTED_VERSION, sasl=conn.sasl is not None)
            return await self._send(
                conn, encode_response(API_VERSIONS, 0, correlation_id, body), api_key
            )
        if not supported[0] <= version <= supported[1]:
            log.warning("broker %d: api %d v%d not advertised", self.node_id, api_key, version)
            return False
        try:
            api, version, correlation_id, client_id, request = decode_request(frame, APIS_BY_KEY)
        except (MessageError, UnicodeDecodeError, IndexError) as exc:
            log.warning(
                "broker %d: undecodable request (api %d v%d): %s",
                self.node_id,
                api_key,
                version,
                exc,
            )
            return False
        ctx = RequestContext(self.node_id, api_key, version, correlation_id, client_id)
        try:
            response = await respond(self.cluster, ctx, request)
        except Exception as exc:
            # Kafka answers UNKNOWN_SERVER_ERROR when a handler fails; the
            # exception (often a failed assertion in an intercept) is kept
            # for the test to see.
            log.exception("broker %d: handler for api %d failed", self.node_id, api_key)
            self.cluster.handler_errors.append(exc)
            if api_key == 0 and request.acks == 0:
                return True
            response = error_response(self.cluster, ctx, request, _UNKNOWN_SERVER_ERROR)
        if response is None:
            return True
        throttle_ms = self.cluster.faults.throttle_ms.get(self.node_id, 0)
        if throttle_ms:
            response.throttle_time_ms = throttle_ms
        try:
            data = encode_response(api, version, correlation_id, response)
        except (MessageError, TypeError) as exc:
            # A response that does not fit the request's version (an intercept
            # set a field the version lacks): kept for the test, as a failed handler.
            log.exception(
                "broker %d: response to api %d v%d not encodable", self.node_id, api_key, version
            )
            self.cluster.handler_errors.append(exc)
            data = encode_response(
                api,
                version,
                correlation_id,
                error_response(self.cluster, ctx, request, _UNKNOWN_SERVER_ERROR),
            )
        sent = await self._send(conn, data, api_key)
        if sent and throttle_ms:
            # KIP-219: the response goes out at once; then the broker mutes the
            # channel, reading nothing more from this connection until the
            # throttle time has passed.
            await asyncio.sleep(throttle_ms / 1000)
        return sent

    async def _send(self, conn: _Connection, data: bytes, api_key: int) -> bool:
        wait = self.cluster.faults.take_delay(api_key, self.node_id)
        if wait > 0:
            await asyncio.sleep(wait)
        if conn.closed:
            return False
        if self.cluster.faults.take_cut(self.node_id):
            conn.writer.write(data[: len(data) // 2])
            await conn.writer.drain()
            return False
        conn.writer.write(data)
        await conn.writer.drain()
        return True
