"""One TCP connection to one broker.

A :class:`BrokerConnection` owns a StreamWriter, a single reader task and the
map of in-flight requests (correlation id -> Future). Every way the connection
can end (EOF, socket error, undecodable bytes, a request timing out, close())
goes through :meth:`_fail_all`, so each pending future resolves exactly once.
OSError and IncompleteReadError are translated into ``ConnectionLostError`` /
``ConnectionFailedError`` here and nowhere else.

The TLS handshake (asyncio's ``ssl=``, SNI and hostname check against the
broker's host) and ApiVersions run in :func:`.connect.open_connection`;
SASL runs after it in :mod:`aioproducer.net.sasl_handshake`. TLS failures
become :class:`~aioproducer.errors.SslError`, which names what did not verify.

Re-authentication (KIP-368) is lazy, as in Java's client: once the session
is due for renewal (:meth:`BrokerConnection.reauthenticate_after`), the next
request to be sent starts it, so an idle connection does nothing. While it
runs, :meth:`hold_writes` keeps new requests in a queue, in order, until
:meth:`resume_writes` writes them together; only ``urgent`` requests (the
SASL exchange itself) are written meanwhile. So there is at most one
re-authentication per batch of requests, whatever the session lifetime.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .. import errors
from ..protocol.apis import Api
from ..protocol.framing import (
    FrameDecoder,
    decode_response,
    encode_request_chunks,
    read_correlation_id,
)
from ..protocol.generated._wire import MessageError
from ..telemetry.logs import ClientLogger

__all__ = ["READ_CHUNK", "BrokerConnection", "ThrottleStats", "ssl_reason"]

log = logging.getLogger("aioproducer.net.connection")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

READ_CHUNK = 256 * 1024
# Pending writes above this make writers wait for the socket to drain.
_WRITE_HIGH_WATER = 4 * 1024 * 1024
# The selector transport's writelines() of CPython 3.12.0-3.12.8 and 3.13.0-3.13.1
# never paused its protocol (gh-127655), so drain() would not wait: there a
# frame is joined and written instead.
_WRITELINES_PAUSES = not (
    (3, 12) <= sys.version_info[:3] < (3, 12, 9) or (3, 13) <= sys.version_info[:3] < (3, 13, 2)
)


def write_frame(writer: asyncio.StreamWriter, chunks: list[Any]) -> None:
    """Write a frame's buffers in order, seen by the transport's flow control."""
    if _WRITELINES_PAUSES:
        writer.writelines(chunks)
    else:
        writer.write(b"".join(chunks))


class TrafficRecorder(Protocol):
    """Where a connection reports its requests and responses (the producer's metrics)."""

    def request_sent(self, size: int, now: float) -> None: ...

    def response_received(self, size: int, now: float) -> None: ...


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[Any]
    api: Api[Any, Any]
    version: int
    deadline: float
    # Re-authentication traffic does not make an idle connection look used.
    urgent: bool = False


class ThrottleStats:
    """``throttle_time_ms`` the broker reported on one connection: last, max, average."""

    __slots__ = ("count", "last", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.last = 0
        self.max = 0
        self.total = 0

    def record(self, ms: int) -> None:
        self.count += 1
        self.last = ms
        self.max = max(self.max, ms)
        self.total += ms

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return f"<ThrottleStats last={self.last} avg={self.avg:.1f} max={self.max} ms>"


class BrokerConnection:
    """A live connection with negotiated API versions. Create with :func:`open_connection`."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str | None,
        request_timeout_ms: int,
        traffic: TrafficRecorder | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.api_versions: dict[int, int] = {}
        # Cluster-wide feature levels this broker reported (KIP-584), with
        # their epoch (-1: unknown, e.g. an ApiVersions answer below v3).
        self.finalized_features: dict[str, int] = {}
        self.finalized_features_epoch = -1
        self._reader = reader
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, _Pending] = {}
        # Correlation ids of recent requests sent expecting no response (acks=0
        # Produce). Some brokers (Tansu) answer them anyway; such an answer is
        # dropped instead of being taken for a stream out of step.
        self._unanswered: collections.deque[int] = collections.deque(maxlen=256)
        self._next_correlation_id = 0
        self._closed_error: BaseException | None = None
        self._decoder = FrameDecoder()
        self._drain_lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._traffic = traffic
        self._log = ClientLogger(log, client_id or "aioproducer")
        # Frames held back while the connection re-authenticates, and their ids.
        self._held: list[Any] | None = None  # the held frames' buffers, in order
        self._held_ids: set[int] = set()
        self._quiet: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # KIP-368: from when (loop time) a request to be sent first renews the
        # session, and the coroutine function that does it.
        self._reauth_at = math.inf
        self._reauthenticate: Callable[[], Awaitable[None]] | None = None
        self.last_used = time.monotonic()
        # KIP-219: the broker answers at once with throttle_time_ms and then
        # stops reading from us for that long; we send nothing until then.
        self.throttled_until = 0.0  # time.monotonic()
        self.throttle_time_ms = ThrottleStats()
        self._read_task = self._loop.create_task(self._read_loop())

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._pending)} in flight"
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    @property
    def closed_error(self) -> BaseException | None:
        """Why the connection ended (None while it is open)."""
        return self._closed_error

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def has_overdue_request(self) -> bool:
        """Is a request past its deadline still unanswered (the connection is about to fail)?"""
        now = self._loop.time()
        return any(p.deadline <= now for p in self._pending.values())

    def version_for(self, api: Api[Any, Any]) -> int:
        """The negotiated version of ``api``, or UnsupportedVersionError."""
        version = self.api_versions.get(api.key)
        if version is None:
            raise errors.UnsupportedVersionError(
                f"broker {self.node_id} at {self.host}:{self.port} supports no version of "
                f"{api.name} that this client implements (v{api.min_version}-{api.max_version})"
            )
        return version

    def _correlation_id(self) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id = (cid + 1) & 0x7FFFFFFF
        return cid

    async def request(
        self,
        api: Api[Req, Resp],
        body: Req,
        *,
        version: int | None = None,
        timeout: float | None = None,
        urgent: bool = False,
    ) -> Resp:
        """Send one request and wait for its response (bounded by the request timeout)."""
        fut = self.send(api, body, version=version, timeout=timeout, urgent=urgent)
        await self.drain()
        response = await fut
        assert response is not None  # expect_response: the response, or an exception
        return response

    def send(
        self,
        api: Api[Req, Resp],
        body: Req,
        *,
        version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
        urgent: bool = False,
    ) -> asyncio.Future[Resp | None]:
        """Write a request now; return the future of its response.

        ``body`` is an instance of ``api.request``; it is encoded at once (a
        value that does not fit raises :class:`MessageError` here, nothing is
        written). With ``expect_response=False`` (Produce with acks=0, which the
        broker never answers) the future resolves to None at once. Callers
        should ``await drain()`` afterwards to respect backpressure. While
        writes are held, the frame waits its turn unless ``urgent``.
        """
        fut: asyncio.Future[Resp | None] = self._loop.create_future()
        if self._closed_error is not None:
            fut.set_exception(self._closed_error)
            return fut
        if version is None:
            version = self.version_for(api)
        cid = self._correlation_id()
        # The frame's record batches go to the transport by reference: one copy
        # (a join on Python 3.11; sendmsg straight from them on 3.12+).
        frame = encode_request_chunks(api, version, cid, self.client_id, body)
        if (
            self._reauthenticate is not None
            and not urgent
            and self._held is None
            and self._loop.time() >= self._reauth_at
        ):
            self._begin_reauthentication()
        if self._held is not None and not urgent:
            self._held.extend(frame)
            self._held_ids.add(cid)
        else:
            write_frame(self._writer, frame)
        if not urgent:
            self.last_used = time.monotonic()
        if self._traffic is not None:
            self._traffic.request_sent(sum(map(len, frame)), time.monotonic())
        if not expect_response:
            self._unanswered.append(cid)
            fut.set_result(None)
            return fut
        deadline = self._loop.time() + (self.request_timeout if timeout is None else timeout)
        self._pending[cid] = _Pending(fut, api, version, deadline, urgent)
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._check_timeouts)
        return fut

    # -- re-authentication support (KIP-368) ---------------------------------

    def reauthenticate_after(self, delay: float, run: Callable[[], Awaitable[None]]) -> None:
        """Renew the session with ``run()`` before the first request sent ``delay`` s from now or later.

        Java's client does the same (``KafkaChannel.maybeBeginClientReauthentication``
        when a send is ready): no timer, so an idle connection never
        re-authenticates, and however short the broker's session lifetime,
        one re-authentication covers every request queued while it ran.
        ``run`` is called with writes held; they resume when it returns.
        """
        self._reauth_at = self._loop.time() + max(0.0, delay)
        self._reauthenticate = run

    def _begin_reauthentication(self) -> None:
        run, self._reauthenticate = self._reauthenticate, None
        self._reauth_at = math.inf
        assert run is not None
        self.hold_writes()
        task = self._loop.create_task(
            self._run_reauthentication(run), name=f"aioproducer-reauth-{self.node_id}"
        )
        self.attach(task)

    async def _run_reauthentication(self, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        finally:
            self.resume_writes()

    def hold_writes(self) -> None:
        """Queue new requests instead of writing them, until :meth:`resume_writes`."""
        if self._held is None:
            self._held = []
            self._quiet = asyncio.Event()
            self._check_quiet()

    async def wait_quiet(self, timeout: float) -> None:
        """Wait (holding writes) until every written request has its response."""
        assert self._quiet is not None, "hold_writes() first"
        await asyncio.wait_for(self._quiet.wait(), timeout)

    def resume_writes(self) -> None:
        """Write the held requests, in the order they were sent, and stop holding."""
        held, self._held, self._quiet = self._held, None, None
        self._held_ids.clear()
        if held and self._closed_error is None:
            write_frame(self._writer, held)
            self.last_used = time.monotonic()

    def _check_quiet(self) -> None:
        if self._quiet is not None and self._pending.keys() <= self._held_ids:
            self._quiet.set()

    def attach(self, task: asyncio.Task[Any]) -> None:
        """Tie a background task (re-authentication) to this connection's life."""
        if self._closed_error is not None:
            task.cancel()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def abort(self, exc: BaseException) -> None:
        """End the connection with ``exc``: every in-flight and held request fails with it."""
        self._fail_all(exc)

    def write_backlogged(self) -> bool:
        """Whether the socket's write buffer is above its high-water mark: see :meth:`drain`."""
        return self._writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER

    async def drain(self) -> None:
        """Wait while the socket's write buffer is above its high-water mark."""
        if not self.write_backlogged():
            return
        async with self._drain_lock:
            try:
                await asyncio.wait_for(self._writer.drain(), self.request_timeout)
            except asyncio.TimeoutError:
                self._fail_all(
                    errors.RequestTimedOutError(
                        self._describe(
                            f"socket not writable for {self.request_timeout * 1000:.0f} ms"
                        )
                    )
                )
            except (OSError, ConnectionError) as exc:
                self._fail_all(errors.ConnectionLostError(self._describe(f"write failed: {exc}")))

    def _check_timeouts(self) -> None:
        """Expire requests past their deadline by closing the connection.

        As in the Java client, a request that times out closes the connection:
        its response may still arrive later, and the correlation ids after it
        cannot be trusted to line up with what the caller expects.
        """
        self._timer = None
        if not self._pending:
            return
        now = self._loop.time()
        earliest = min(p.deadline for p in self._pending.values())
        if earliest <= now:
            self._fail_all(
                errors.RequestTimedOutError(
                    self._describe(f"no response within {self.request_timeout * 1000:.0f} ms")
                )
            )
        else:
            self._timer = self._loop.call_at(earliest, self._check_timeouts)

    async def _read_loop(self) -> None:
        reader = self._reader
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    raise errors.ConnectionLostError(self._describe("closed by the broker"))
                for frame in self._decoder.feed(data):
                    self._dispatch(frame)
        except errors.KafkaError as exc:
            self._fail_all(exc)
        except ssl.SSLError as exc:
            # E.g. the broker's "certificate required" alert, which TLS 1.3
            # delivers after the handshake, with the first read.
            self._fail_all(errors.SslError(self._describe(f"TLS failure: {ssl_reason(exc)}")))
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
            self._fail_all(errors.ConnectionLostError(self._describe(f"read failed: {exc}")))
        except ValueError as exc:  # a frame size no broker would send
            self._fail_all(errors.CorruptResponseError(self._describe(str(exc))))
        except asyncio.CancelledError:
            self._fail_all(errors.ConnectionLostError(self._describe("connection closed")))
            raise

    def _dispatch(self, frame: bytes) -> None:
        cid = read_correlation_id(frame)
        pending = self._pending.pop(cid, None)
        if pending is None and cid in self._unanswered:
            self._log.debug(
                "%s",
                self._describe(f"dropped a response to request {cid}, sent acks=0"),
                extra={"broker": self.node_id},
            )
            return
        if pending is None:
            # A response to nothing we sent: the stream is out of step.
            raise errors.CorruptResponseError(self._describe(f"unexpected correlation id {cid}"))
        if not pending.urgent:
            self.last_used = time.monotonic()
        if self._quiet is not None:
            self._check_quiet()
        if self._traffic is not None:
            self._traffic.response_received(len(frame) + 4, time.monotonic())  # + the size prefix
        try:
            message = decode_response(pending.api, pending.version, frame)
        except (MessageError, ValueError) as exc:
            if not pending.future.done():
                pending.future.set_exception(
                    errors.CorruptResponseError(
                        self._describe(f"undecodable {pending.api.name} v{pending.version}: {exc}")
                    )
                )
            return
        # SaslHandshake and SaslAuthenticate responses have no throttle time.
        throttle_ms: int = getattr(message, "throttle_time_ms", 0)
        if throttle_ms > 0:
            self.throttle_time_ms.record(throttle_ms)
            self.throttled_until = max(self.throttled_until, time.monotonic() + throttle_ms / 1000)
        if not pending.future.done():
            pending.future.set_result(message)

    def _describe(self, what: str) -> str:
        return f"broker {self.node_id} at {self.host}:{self.port}: {what}"

    def _fail_all(self, exc: BaseException) -> None:
        """Close the connection and fail every in-flight request with ``exc``."""
        if self._closed_error is None:
            self._closed_error = exc
            # abort(), not close(): a graceful close waits for buffered data to
            # drain, which never happens when the broker stopped reading.
            self._writer.transport.abort()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._read_task.done() and asyncio.current_task() is not self._read_task:
                self._read_task.cancel()
            for task in list(self._tasks):
                if task is not asyncio.current_task():
                    task.cancel()
            self._held = None
            self._held_ids.clear()
        pending, self._pending = self._pending, {}
        for item in pending.values():
            if not item.future.done():
                item.future.set_exception(exc)

    async def close(self) -> None:
        """Close the socket; in-flight requests fail with ConnectionLostError."""
        self._fail_all(errors.ConnectionLostError(self._describe("connection closed")))
        try:
            await asyncio.wait_for(self._read_task, 1.0)
        except BaseException:  # noqa: BLE001, S110 - the task is done either way
            pass
        try:
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        except BaseException:  # noqa: BLE001, S110 - closing: nothing left to tell
            pass


def ssl_reason(exc: ssl.SSLError) -> str:
    """A short reason for a TLS error (OpenSSL's reason code, e.g. the peer's alert)."""
    reason: str | None = getattr(exc, "reason", None)
    if reason:
        return reason.replace("_", " ").lower()
    return str(exc)
