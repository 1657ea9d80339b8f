"""Connections to every broker: opened on demand, backed off, closed when idle.

:class:`BrokerConnections` keeps one :class:`BrokerConnection` per node and
knows where each node is (the bootstrap servers, then the brokers of the
latest :class:`ClusterSnapshot`). :class:`~aioproducer.net.client.KafkaClient`
holds one, as ``client.connections``, and owns the cluster metadata.

Ownership (each piece of state has one writer):

* this class writes every piece of connection state: the connections and the
  attempts under way, the backoff and failure counts, the TLS/SASL refusals,
  the listeners, the finalized features, the (resolved) bootstrap addresses;
* the client writes the metadata: the :class:`ClusterSnapshot` and whether to
  use the bootstrap servers (KIP-899). This class only reads them, through
  the ``cluster`` and ``use_bootstrap`` callables given to its constructor,
  and asks for a refresh through the ``request_update`` callable; what to
  refresh, and when, is the client's business.

Invariants:

* at most one connection attempt per node at a time; a failed attempt backs
  off exponentially, with jitter, from ``reconnect_backoff_ms`` to
  ``reconnect_backoff_max_ms``; a success clears the backoff;
* bootstrap servers get negative node ids, as in the Java client;
* every connection is secured the same way (TLS, then SASL); a TLS or SASL
  refusal is kept per node (:meth:`BrokerConnections.authentication_failure`),
  not retried as if it were a network hiccup (Java's ``AuthenticationException``);
* a connection that drops, or fails to open to a known broker, asks for a
  metadata refresh (the broker may have restarted or left);
* cluster-wide requests go to the least loaded node (Java's ``leastLoadedNode``),
  chosen by the pure rules of :mod:`.node_selection`;
* every attempt that ends, either way, calls the listeners;
* an address that cannot be reached is a warning at once, then at most once
  per ``UNREACHABLE_WARNING_INTERVAL`` (Java warns at every attempt).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .. import errors
from ..sasl.token_refresh import RefreshingTokenProvider
from ..telemetry.logs import ClientLogger, RateLimiter
from .bootstrap import format_address, parse_bootstrap, resolvable_bootstrap
from .cluster import ClusterSnapshot
from .connect import open_connection
from .connection import BrokerConnection, ThrottleStats
from .node_selection import node_preference, reconnect_delay
from .sasl_handshake import authenticate
from .security import Security

if TYPE_CHECKING:
    from ..telemetry.producer_metrics import ProducerMetrics

__all__ = ["BrokerConnections", "parse_bootstrap"]

log = logging.getLogger("aioproducer.net.client")
# A broker that cannot be reached is a warning at the first failed attempt,
# then at most once per this many seconds per address (the failures in
# between are counted): a wrong address says so within a second, and a broker
# down for an hour is not a line per reconnect attempt.
UNREACHABLE_WARNING_INTERVAL = 30.0


class BrokerConnections:
    """The connections of a client; :class:`~aioproducer.net.client.KafkaClient` holds one."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str | None,
        request_timeout_ms: int,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        connections_max_idle_ms: int,
        metrics: ProducerMetrics | None,
        security: Security | None,
        cluster: Callable[[], ClusterSnapshot],
        use_bootstrap: Callable[[], bool],
        request_update: Callable[[], None],
    ) -> None:
        # The metadata side: read, never written here.
        self._cluster = cluster
        self._use_bootstrap = use_bootstrap
        # A connection dropped, or failed to open: the broker may have moved.
        self._request_update = request_update
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self._log = ClientLogger(log, client_id or "aioproducer")
        self._metrics = metrics
        # Nodes whose connection was lost and not yet re-established: a flap
        # logs one warning when it is lost and one line when it is back.
        self._lost: set[int] = set()
        # Per (host, port): when a failure to reach it was last a warning.
        self._unreachable = RateLimiter(UNREACHABLE_WARNING_INTERVAL)
        self._request_timeout_ms = request_timeout_ms
        self._backoff_ms = (reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._max_idle = connections_max_idle_ms / 1000
        self._security = security or Security()
        self._auth_failures: dict[int, BaseException] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._listeners: list[Callable[[], None]] = []
        self._closed = False
        # The cluster's finalized feature levels with the highest epoch seen
        # in any ApiVersions answer (Java's ApiVersions.finalizedFeatures).
        self.finalized_features: dict[str, int] = {}
        self._features_epoch = -1

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when a connection attempt ends or metadata is refreshed."""
        self._listeners.append(callback)

    def notify(self) -> None:
        """Call the listeners (a connection attempt ended, or the metadata changed)."""
        for callback in self._listeners:
            callback()

    # -- connections -------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[-node_id - 1]
        broker = self._cluster().brokers.get(node_id)
        if broker is None:
            raise errors.KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return broker.host, broker.port

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The live, unthrottled connection to ``node_id``; starts one in the background if none.

        Never waits: the sender asks this each loop and skips nodes not ready.
        A connection attempt that ends, either way, calls the listeners.
        """
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            # KIP-219: send nothing to a broker that asked us to back off.
            return None if conn.throttled_until > time.monotonic() else conn
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
        return f"broker {node_id} ({format_address(host, port)})"

    def _connection_lost(self, node_id: int, conn: BrokerConnection) -> None:
        """Forget a connection that ended without us closing it; warn once per loss."""
        if self._conns.get(node_id) is conn:
            del self._conns[node_id]
        # A connection that dropped, even an idle one, may mean the broker
        # restarted or left: refresh metadata as the Java client does.
        self._request_update()
        if self._metrics is not None:
            self._metrics.connection_closed(time.monotonic())
        if node_id not in self._lost:
            self._lost.add(node_id)
            if node_id >= 0 and node_id in self._cluster().brokers:
                # This warning stands for the reconnect attempts that may fail next.
                self._unreachable.allow(self._address(node_id), time.monotonic())
            # Bootstrap addresses (negative ids) only stand in until metadata
            # names the brokers: losing one is no news.
            self._log.log(
                logging.WARNING if node_id >= 0 else logging.DEBUG,
                "lost the connection to %s: %s; reconnecting",
                self.describe_node(node_id),
                conn.closed_error,
                extra={"broker": node_id},
            )

    def not_ready_until(self, node_id: int) -> float:
        """When :meth:`ready_connection` may next say yes without an event (inf: on an event)."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn.throttled_until
        retry_at = self._retry_at.get(node_id, 0.0)
        if node_id not in self._connecting and retry_at > time.monotonic():
            return retry_at
        return float("inf")

    def throttle_stats(self) -> dict[int, ThrottleStats]:
        """Per live connection: the ``throttle_time_ms`` its broker reported (KIP-219)."""
        return {n: c.throttle_time_ms for n, c in self._conns.items() if not c.closed}

    def in_flight(self, node_id: int) -> int:
        """Requests awaiting a response on the connection to ``node_id``."""
        conn = self._conns.get(node_id)
        return 0 if conn is None or conn.closed else conn.in_flight

    def authentication_failure(self, node_id: int) -> BaseException | None:
        """The TLS/SASL error of the last connection attempt to ``node_id``, if any."""
        return self._auth_failures.get(node_id)

    def is_backing_off(self, node_id: int) -> bool:
        return self._retry_at.get(node_id, 0.0) > time.monotonic()

    def next_connect_time(self, node_id: int) -> float:
        return self._retry_at.get(node_id, 0.0)

    def latest_authentication_failure(self) -> BaseException | None:
        """The TLS/SASL refusal most recently recorded for any node, if any."""
        return next(reversed(self._auth_failures.values()), None)

    def forget_bootstrap_backoff(self) -> None:
        """Let the bootstrap servers be tried at once (a rebootstrap, KIP-899)."""
        for node in [n for n in self._retry_at if n < 0]:
            self._retry_at.pop(node)
            self._failures.pop(node, None)

    @property
    def request_timeout(self) -> float:
        """``request_timeout_ms``, in seconds."""
        return self._request_timeout_ms / 1000

    @property
    def max_idle(self) -> float:
        """``connections_max_idle_ms``, in seconds."""
        return self._max_idle

    @property
    def bootstrap_servers(self) -> str:
        """The bootstrap addresses, comma-separated, for error messages."""
        return ",".join(format_address(h, p) for h, p in self._bootstrap)

    async def resolve_bootstrap(self, timeout: float) -> None:
        """Keep the bootstrap servers whose names resolve; ConfigurationError if none does."""
        self._bootstrap = await resolvable_bootstrap(self._bootstrap, timeout, self._log)

    def connected_nodes(self) -> list[int]:
        """The nodes with a connection (open, or lost and not yet noticed), sorted."""
        return sorted(self._conns)

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
                    "connection to %s refused: %s",
                    self.describe_node(node_id),
                    exc,
                    extra={"broker": node_id},
                )
                self._auth_failures[node_id] = exc
            elif isinstance(exc, Exception) and not self._closed:  # not a cancellation
                self._warn_unreachable(node_id, exc)
            failures = self._failures.get(node_id, 0) + 1
            self._failures[node_id] = failures
            delay = reconnect_delay(failures, *self._backoff_ms, random.random())
            self._retry_at[node_id] = time.monotonic() + delay
            self._log.debug(
                "connecting to %s failed (%s); retry in %.3fs",
                self.describe_node(node_id),
                exc,
                delay,
                extra={"broker": node_id},
            )
            if node_id >= 0:
                self._request_update()
            raise
        finally:
            self._connecting.pop(node_id, None)
            self.notify()
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
        if conn.finalized_features_epoch > self._features_epoch:
            self._features_epoch = conn.finalized_features_epoch
            self.finalized_features = dict(conn.finalized_features)
        old = self._conns.get(node_id)
        if old is not None and not old.closed:
            await old.close()
        self._conns[node_id] = conn
        return conn

    def _warn_unreachable(self, node_id: int, exc: BaseException) -> None:
        """A failed connection attempt, as Java's "Connection to node -1 could not be
        established" but rate-limited per address (:data:`UNREACHABLE_WARNING_INTERVAL`)."""
        try:
            host, port = self._address(node_id)
        except errors.KafkaError:
            return  # a broker gone from the metadata: nothing to report
        suppressed = self._unreachable.allow((host, port), time.monotonic())
        if suppressed is None:
            return
        what = (
            f"bootstrap server {format_address(host, port)}"
            if node_id < 0
            else self.describe_node(node_id)
        )
        self._log.warning(
            "cannot connect to %s (%s): is a broker listening there? Retrying; this warning "
            "repeats at most every %.0f s%s",
            what,
            getattr(exc, "message", None) or exc,
            self._unreachable.interval,
            f" ({suppressed} more failed attempts since the last one)" if suppressed else "",
            extra={"broker": node_id},
        )

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
            raise errors.ProducerClosedError("its connections are closed")
        return await asyncio.wait_for(asyncio.shield(task), timeout)

    def _known_nodes(self) -> list[int]:
        """The nodes to pick from: the brokers metadata named, or the bootstrap servers."""
        if self._use_bootstrap() or not self._cluster().brokers:
            nodes = [-(i + 1) for i in range(len(self._bootstrap))]
        else:
            nodes = list(self._cluster().brokers)
        # A random start spreads cluster-wide requests over the brokers.
        offset = random.randrange(len(nodes))
        return nodes[offset:] + nodes[:offset]

    def preference(self) -> list[int]:
        """The known nodes, best first, for a cluster-wide request (see :mod:`.node_selection`)."""
        nodes = self._known_nodes()
        now = time.monotonic()
        live: dict[int, int] = {}
        for node in nodes:
            conn = self._conns.get(node)
            if (
                conn is not None
                and not conn.closed
                and conn.throttled_until <= now
                and not conn.has_overdue_request()
            ):
                live[node] = conn.in_flight
        can_connect = [n for n in nodes if n not in self._conns and not self.is_backing_off(n)]
        return node_preference(nodes, live, self._connecting, can_connect)

    def least_loaded_node(self) -> int | None:
        """Java's ``leastLoadedNode``: where a cluster-wide request should go now.

        A live connection with the fewest requests in flight (none throttled or
        with a request past its deadline), else a node being connected to, else
        one we may connect to now; None when every node is backing off.
        """
        order = self.preference()
        return order[0] if order else None

    def any_node(self) -> int:
        """:meth:`least_loaded_node`, or else the known node whose backoff ends first."""
        node = self.least_loaded_node()
        if node is not None:
            return node
        return min(self._known_nodes(), key=self.next_connect_time)

    def forget_moved_brokers(self, old: ClusterSnapshot, new: ClusterSnapshot) -> None:
        """A broker at a new address starts afresh: no backoff earned at the old one."""
        for node, broker in new.brokers.items():
            before = old.brokers.get(node)
            if before is not None and (before.host, before.port) != (broker.host, broker.port):
                self._retry_at.pop(node, None)
                self._failures.pop(node, None)

    async def close_bootstrap_connections(self) -> None:
        """Close the idle bootstrap connections: metadata named the real brokers."""
        # Once the real node ids are known, a bootstrap connection is a second
        # connection to some broker: it must not count as another node.
        for node_id in [n for n, c in self._conns.items() if n < 0 and c.in_flight == 0]:
            await self._conns.pop(node_id).close()

    async def close_idle_connections(self, now: float) -> None:
        """Forget lost connections; close those idle for ``connections_max_idle_ms``."""
        for node_id, conn in list(self._conns.items()):
            if conn.closed:
                self._connection_lost(node_id, conn)
            elif conn.in_flight == 0 and now - conn.last_used > self._max_idle:
                self._log.debug(
                    "closing the idle connection to %s",
                    self.describe_node(node_id),
                    extra={"broker": node_id},
                )
                del self._conns[node_id]
                await conn.close()

    async def close(self, tasks: Iterable[asyncio.Task[Any]] = ()) -> None:
        """Cancel ``tasks`` (the owner's, using these connections) and the connection
        attempts, wait for them, close every connection."""
        self._closed = True
        pending = list(tasks) + list(self._connecting.values())
        for task in pending:
            task.cancel()
        for task in pending:
            try:
                await task
            except BaseException:  # noqa: BLE001, S110 - cancelled or failed, either way done
                pass
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()
        sasl = self._security.sasl
        if sasl is not None and isinstance(sasl.token_provider, RefreshingTokenProvider):
            # Its background token refresh serves connections, and there are none left
            # (a later token() starts it again, for another producer sharing it).
            sasl.token_provider.close()
