"""Connections to every broker, and the cluster metadata that maps partitions to them.

:class:`KafkaClient` keeps one :class:`BrokerConnection` per node, opens them on
demand with exponential, jittered reconnect backoff, and keeps a
:class:`ClusterSnapshot` fresh: on demand (a leader moved, a topic is unknown, a
connection dropped) and at least every ``metadata_max_age_ms``.
Bootstrap servers get negative node ids, as in the Java client, until the
first Metadata response names the real brokers.

Every connection is secured the same way (:class:`~aioproducer.security.Security`:
TLS, then SASL). A TLS or SASL refusal is not a network hiccup: it is kept per
node (:meth:`KafkaClient.authentication_failure`) so that ``bootstrap`` raises it
at once and the sender fails that node's records with it, instead of both
retrying until their timeouts (Java's ``AuthenticationException``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import errors
from .cluster import ClusterSnapshot
from .connection import BrokerConnection, open_connection
from .logs import ClientLogger
from .protocol.messages import METADATA
from .sasl.handshake import authenticate
from .security import Security

if TYPE_CHECKING:
    from .producer_metrics import ProducerMetrics

__all__ = ["KafkaClient", "parse_bootstrap", "reconnect_delay"]

log = logging.getLogger("aioproducer.client")

# Errors a topic reports while it is being created or elected: wait, do not fail.
_TRANSIENT_TOPIC_ERRORS = {
    errors.UnknownTopicOrPartitionError.code,
    errors.LeaderNotAvailableError.code,
}


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """Parse ``"h1:9092,h2:9092"`` or a list of ``host:port`` (IPv6 as ``[::1]:9092``)."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise errors.ConfigurationError(
                f"bootstrap server {item!r} is not of the form host:port"
            )
        result.append((host.strip("[]"), int(port)))
    if not result:
        raise errors.ConfigurationError("bootstrap_servers names no server")
    return result


def reconnect_delay(failures: int, base_ms: int, max_ms: int, rand: float) -> float:
    """Seconds to wait after ``failures`` consecutive failed connects (KIP-144).

    Exponential from ``base_ms`` up to ``max_ms`` with +/-20% jitter so that
    many clients do not reconnect in lockstep; ``rand`` is uniform in [0, 1).
    """
    if failures <= 0:
        return 0.0
    exp = min(max_ms, base_ms * (2 ** min(failures - 1, 30)))
    return exp * (0.8 + 0.4 * rand) / 1000


class KafkaClient:
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str | None,
        request_timeout_ms: int,
        metadata_max_age_ms: int,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        connections_max_idle_ms: int = 540000,
        retry_backoff_ms: int = 100,
        allow_auto_create_topics: bool = True,
        metrics: ProducerMetrics | None = None,
        security: Security | None = None,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self._log = ClientLogger(log, client_id or "aioproducer")
        self._metrics = metrics
        # Nodes whose connection was lost and not yet re-established: a flap
        # logs one warning when it is lost and one line when it is back.
        self._lost: set[int] = set()
        self._request_timeout_ms = request_timeout_ms
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._backoff_ms = (reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._max_idle = connections_max_idle_ms / 1000
        self._retry_backoff = retry_backoff_ms / 1000
        self._auto_create = allow_auto_create_topics
        self._security = security or Security()
        self._auth_failures: dict[int, BaseException] = {}
        self.snapshot = ClusterSnapshot()
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._topics: set[str] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._updated = asyncio.Event()
        self._last_refresh_error: BaseException | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<KafkaClient brokers={sorted(self.snapshot.brokers)} connected={sorted(self._conns)}>"

    # -- connections -------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[-node_id - 1]
        broker = self.snapshot.brokers.get(node_id)
        if broker is None:
            raise errors.KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return broker.host, broker.port

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The live connection to ``node_id``, starting one in the background if none.

        Never waits: the sender asks this each loop and skips nodes not ready.
        """
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if conn is not None:
            self._connection_lost(node_id, conn)
        self._start_connect(node_id)
        return None

    @property
    def connection_count(self) -> int:
        """Open broker connections (Java's connection-count)."""
        return sum(1 for c in self._conns.values() if not c.closed)

    def describe_node(self, node_id: int) -> str:
        """``broker <id> (<host>:<port>)`` for log lines."""
        try:
            host, port = self._address(node_id)
        except errors.KafkaError:
            return f"broker {node_id}"
        return f"broker {node_id} ({host}:{port})"

    def _connection_lost(self, node_id: int, conn: BrokerConnection) -> None:
        """Forget a connection that ended without us closing it; warn once per loss."""
        if self._conns.get(node_id) is conn:
            del self._conns[node_id]
        # A connection that dropped, even an idle one, may mean the broker
        # restarted or left: refresh metadata as the Java client does.
        self.request_update()
        if self._metrics is not None:
            self._metrics.connection_closed(time.monotonic())
        if node_id not in self._lost:
            self._lost.add(node_id)
            # Bootstrap addresses (negative ids) only stand in until metadata
            # names the brokers: losing one is no news.
            self._log.log(
                logging.WARNING if node_id >= 0 else logging.DEBUG,
                "lost the connection to %s: %s; reconnecting",
                self.describe_node(node_id), conn.closed_error,
                extra={"broker": node_id},
            )

    def authentication_failure(self, node_id: int) -> BaseException | None:
        """The TLS/SASL error of the last connection attempt to ``node_id``, if any."""
        return self._auth_failures.get(node_id)

    def is_backing_off(self, node_id: int) -> bool:
        return self._retry_at.get(node_id, 0.0) > time.monotonic()

    def next_connect_time(self, node_id: int) -> float:
        return self._retry_at.get(node_id, 0.0)

    def _start_connect(self, node_id: int) -> asyncio.Task[BrokerConnection] | None:
        task = self._connecting.get(node_id)
        if task is not None or self._closed or self.is_backing_off(node_id):
            return task
        task = asyncio.get_running_loop().create_task(self._connect(node_id))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
        self._connecting[node_id] = task
        return task

    async def _connect(self, node_id: int) -> BrokerConnection:
        try:
            host, port = self._address(node_id)
            timeout = self._request_timeout_ms / 1000
            conn = await open_connection(
                node_id,
                host,
                port,
                client_id=self.client_id,
                request_timeout_ms=self._request_timeout_ms,
                connect_timeout=timeout,
                ssl_context=self._security.ssl_context,
                traffic=None if self._metrics is None else self._metrics.node_traffic(node_id),
            )
            if self._security.sasl is not None:
                try:
                    await authenticate(conn, self._security.sasl, timeout)
                except BaseException:
                    await conn.close()
                    raise
        except BaseException as exc:
            if errors.is_authentication_failure(exc):
                self._log.error(
                    "connection to %s refused: %s", self.describe_node(node_id), exc,
                    extra={"broker": node_id},
                )
                self._auth_failures[node_id] = exc
            failures = self._failures.get(node_id, 0) + 1
            self._failures[node_id] = failures
            delay = reconnect_delay(failures, *self._backoff_ms, random.random())
            self._retry_at[node_id] = time.monotonic() + delay
            self._log.debug(
                "connecting to %s failed (%s); retry in %.3fs",
                self.describe_node(node_id), exc, delay, extra={"broker": node_id},
            )
            if node_id >= 0:
                self.request_update()
            raise
        finally:
            self._connecting.pop(node_id, None)
        self._failures.pop(node_id, None)
        self._retry_at.pop(node_id, None)
        self._auth_failures.pop(node_id, None)
        if self._metrics is not None:
            self._metrics.connection_created(time.monotonic())
        if node_id in self._lost:
            self._lost.discard(node_id)
            self._log.info(
                "reconnected to %s", self.describe_node(node_id), extra={"broker": node_id}
            )
        old = self._conns.get(node_id)
        if old is not None and not old.closed:
            await old.close()
        self._conns[node_id] = conn
        return conn

    async def connection(self, node_id: int, timeout: float) -> BrokerConnection:
        """A live connection to ``node_id``, connecting (once) if needed."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if conn is not None:
            self._connection_lost(node_id, conn)
        wait = self._retry_at.get(node_id, 0.0) - time.monotonic()
        if wait > 0:
            if wait >= timeout:
                raise errors.ConnectionFailedError(f"node {node_id}: backing off after failures")
            await asyncio.sleep(wait)
        task = self._start_connect(node_id)
        if task is None:
            raise errors.ProducerClosedError("the client is closed")
        return await asyncio.wait_for(asyncio.shield(task), timeout)

    def any_node(self) -> int:
        """A node to send a cluster-wide request to: connected first, else any known."""
        for node_id in self._metadata_candidates():
            if not self.is_backing_off(node_id) or node_id in self._conns:
                return node_id
        return self._metadata_candidates()[0]

    # -- metadata ----------------------------------------------------------

    def add_topic(self, topic: str) -> None:
        if topic not in self._topics:
            self._topics.add(topic)
            self.request_update()

    def request_update(self) -> None:
        """Ask for a metadata refresh soon; cheap to call often (one runs at a time)."""
        if self._closed:
            return
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.get_running_loop().create_task(self._refresh())

    def _metadata_candidates(self) -> list[int]:
        """Nodes to ask for metadata: connected first, then known brokers, then bootstrap."""
        live = [n for n, c in self._conns.items() if not c.closed]
        random.shuffle(live)
        known = [n for n in self.snapshot.brokers if n not in live]
        random.shuffle(known)
        boot = [-(i + 1) for i in range(len(self._bootstrap))]
        return live + known + boot

    async def _refresh(self) -> None:
        """One metadata round trip, trying each candidate node until one answers."""
        last: BaseException | None = None
        for node_id in self._metadata_candidates():
            if self.is_backing_off(node_id) and node_id not in self._conns:
                continue
            try:
                conn = await self.connection(node_id, self._request_timeout_ms / 1000)
                conn.version_for(METADATA)  # fails early if no common version
                topics = [{"name": t, "topic_id": None} for t in sorted(self._topics)]
                body = {"topics": topics, "allow_auto_topic_creation": self._auto_create}
                response = await conn.request(METADATA, body)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try the next node
                last = exc
                continue
            self.snapshot = ClusterSnapshot.from_response(response, time.monotonic(), self.snapshot)
            self._last_refresh_error = None
            self._wake_waiters()
            return
        # Every node backing off: keep the error that put them there.
        self._last_refresh_error = (
            last or self._last_refresh_error or errors.NoBrokersAvailableError("no broker to ask")
        )
        if self._auth_failures:
            # Report the refusal rather than whichever error came last.
            self._last_refresh_error = next(reversed(self._auth_failures.values()))
        self._wake_waiters()
        # Nothing answered: let the backoff of the nodes pace the next attempt.
        await asyncio.sleep(self._retry_backoff)

    def _wake_waiters(self) -> None:
        self._updated.set()
        self._updated = asyncio.Event()

    async def wait_for_update(self, timeout: float) -> None:
        """Request a refresh and wait for it (or ``timeout`` seconds)."""
        event = self._updated
        self.request_update()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def bootstrap(self, timeout: float) -> None:
        """First metadata fetch; NoBrokersAvailableError if none answers in ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            await self.wait_for_update(max(0.0, deadline - time.monotonic()))
            if self.snapshot.updated_at:
                break
            if self._last_refresh_error is not None and errors.is_authentication_failure(
                self._last_refresh_error
            ):
                # Retrying with the same settings meets the same refusal.
                raise self._last_refresh_error
            if time.monotonic() >= deadline:
                servers = ",".join(f"{h}:{p}" for h, p in self._bootstrap)
                raise errors.NoBrokersAvailableError(
                    f"no bootstrap server of {servers} answered within {timeout * 1000:.0f} ms"
                    + (f": {self._last_refresh_error}" if self._last_refresh_error else "")
                )
            await asyncio.sleep(min(self._retry_backoff, max(0.0, deadline - time.monotonic())))
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain())

    async def probe(self, timeout: float) -> int:
        """One fresh metadata round trip within ``timeout`` seconds; the broker count.

        Raises KafkaTimeoutError if no broker answered in time (a stalled
        broker), or the last connection error if every candidate failed.
        """
        before = self.snapshot.updated_at
        await self.wait_for_update(timeout)
        if self.snapshot.updated_at != before:
            return len(self.snapshot.brokers)
        if self._last_refresh_error is not None:
            raise errors.NoBrokersAvailableError(
                f"no broker answered a metadata request: {self._last_refresh_error}"
            )
        raise errors.KafkaTimeoutError(
            f"no broker answered a metadata request within {timeout * 1000:.0f} ms"
        )

    async def partitions_for(self, topic: str, timeout: float) -> int:
        """Number of partitions of ``topic``, fetching metadata for up to ``timeout`` seconds."""
        count = self.snapshot.partition_count(topic)
        if count is not None and topic in self._topics:
            return count
        self.add_topic(topic)
        deadline = time.monotonic() + timeout
        while True:
            info = self.snapshot.topics.get(topic)
            if info is not None:
                if info.partitions:
                    return len(info.partitions)
                if info.error_code and info.error_code not in _TRANSIENT_TOPIC_ERRORS:
                    errors.raise_for_code(info.error_code, f"topic {topic!r}")
            refused = self._last_refresh_error
            if refused is not None and errors.is_authentication_failure(refused):
                raise refused
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms"
                )
            await self.wait_for_update(min(left, max(self._retry_backoff, 0.05)))

    async def _maintain(self) -> None:
        """Refresh metadata by age and close idle connections."""
        period = max(0.05, min(self._metadata_max_age, self._max_idle) / 2)
        while not self._closed:
            await asyncio.sleep(min(period, 1.0))
            now = time.monotonic()
            if now - self.snapshot.updated_at >= self._metadata_max_age:
                self.request_update()
            for node_id, conn in list(self._conns.items()):
                if conn.closed:
                    self._connection_lost(node_id, conn)
                elif conn.in_flight == 0 and now - conn.last_used > self._max_idle:
                    self._log.debug(
                        "closing the idle connection to %s", self.describe_node(node_id),
                        extra={"broker": node_id},
                    )
                    del self._conns[node_id]
                    await conn.close()

    async def close(self) -> None:
        self._closed = True
        tasks: list[asyncio.Task[Any]] = [
            t for t in (self._refresh_task, self._maintenance) if t is not None
        ]
        tasks += list(self._connecting.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except BaseException:  # noqa: BLE001 - cancelled or failed, either way done
                pass
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()
