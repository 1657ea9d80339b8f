"""Connections to every broker, and the cluster metadata that maps partitions to them.

:class:`KafkaClient` keeps one :class:`BrokerConnection` per node, opens them on
demand with exponential, jittered reconnect backoff, and keeps a
:class:`ClusterSnapshot` fresh: on demand (a leader moved, a topic is unknown, a
connection dropped) and at least every ``metadata_max_age_ms``.

Invariants:

* at most one Metadata request is out at a time; every caller that wants fresh
  metadata while one is out or backing off shares the next one;
* after a refresh that failed or changed nothing, the next waits
  ``retry_backoff_ms``, growing exponentially to ``retry_backoff_max_ms``
  while that goes on (KIP-580);
* Metadata goes to the least loaded node (Java's ``leastLoadedNode``);
* bootstrap servers get negative node ids, as in the Java client, and are used
  only until the first Metadata response names the real brokers, or again
  when every known broker has been unreachable for a while (KIP-899).

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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import errors
from .cluster import ClusterSnapshot
from .connection import BrokerConnection, ThrottleStats, open_connection
from .logs import ClientLogger
from .node_selection import node_preference, reconnect_delay
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
# metadata_recovery_strategy values (KIP-899).
RECOVERY_STRATEGIES = ("rebootstrap", "none")


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
        retry_backoff_max_ms: int = 1000,
        allow_auto_create_topics: bool = True,
        metrics: ProducerMetrics | None = None,
        metadata_max_idle_ms: int = 300000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        forget_topics: Callable[[list[str]], Iterable[str]] | None = None,
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
        self._refresh_backoff_ms = (retry_backoff_ms, max(retry_backoff_ms, retry_backoff_max_ms))
        self._auto_create = allow_auto_create_topics
        self._topic_max_idle = metadata_max_idle_ms / 1000
        self._rebootstrap_enabled = metadata_recovery_strategy == "rebootstrap"
        self._rebootstrap_after = metadata_recovery_rebootstrap_trigger_ms / 1000
        # Asked which idle topics may be forgotten (none with pending records).
        self._forget_topics = forget_topics
        self._security = security or Security()
        self._auth_failures: dict[int, BaseException] = {}
        self.snapshot = ClusterSnapshot()
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        # Topics to ask metadata for -> when a record last started a batch there.
        self._topics: dict[str, float] = {}
        # Topics added since the last Metadata response: never idle (Java's newTopics).
        self._new_topics: set[str] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._update_wanted = False
        self._next_refresh = 0.0  # monotonic time before which no refresh starts
        self._refresh_attempts = 0  # refreshes in a row that failed or changed nothing
        self._failing_since: float | None = None  # first failed refresh since the last success
        self._use_bootstrap = True
        self._updated = asyncio.Event()
        self._waiter_error: BaseException | None = None
        self._last_refresh_error: BaseException | None = None
        self._listeners: list[Callable[[], None]] = []
        self._maintenance: asyncio.Task[None] | None = None
        self._closed = False
        #: Metadata requests sent, for tests and metrics.
        self.metadata_requests = 0

    def __repr__(self) -> str:
        return f"<KafkaClient brokers={sorted(self.snapshot.brokers)} connected={sorted(self._conns)}>"

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when a connection attempt ends or metadata is refreshed."""
        self._listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            callback()

    # -- connections -------------------------------------------------------

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id < 0:
            return self._bootstrap[-node_id - 1]
        broker = self.snapshot.brokers.get(node_id)
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
            self._notify()
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

    def _known_nodes(self) -> list[int]:
        """The nodes to pick from: the brokers metadata named, or the bootstrap servers."""
        if self._use_bootstrap or not self.snapshot.brokers:
            nodes = [-(i + 1) for i in range(len(self._bootstrap))]
        else:
            nodes = list(self.snapshot.brokers)
        # A random start spreads cluster-wide requests over the brokers.
        offset = random.randrange(len(nodes))
        return nodes[offset:] + nodes[:offset]

    def _preference(self) -> list[int]:
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
        order = self._preference()
        return order[0] if order else None

    def any_node(self) -> int:
        """:meth:`least_loaded_node`, or else the known node whose backoff ends first."""
        node = self.least_loaded_node()
        if node is not None:
            return node
        return min(self._known_nodes(), key=self.next_connect_time)

    # -- metadata ----------------------------------------------------------

    def add_topic(self, topic: str) -> None:
        if topic not in self._topics:
            self._topics[topic] = time.monotonic()
            self._new_topics.add(topic)
            self.request_update()

    def touch_topic(self, topic: str, now: float) -> None:
        """Note that ``topic`` is in use (it stays in refreshes for ``metadata_max_idle_ms``)."""
        self._topics[topic] = now

    @property
    def topics(self) -> list[str]:
        """Topics whose metadata is kept fresh."""
        return list(self._topics)

    def request_update(self) -> None:
        """Ask for a metadata refresh; cheap to call often (callers share one request)."""
        if self._closed:
            return
        self._update_wanted = True
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.get_running_loop().create_task(
                self._refresh_loop(), name="aioproducer-metadata"
            )

    async def _refresh_loop(self) -> None:
        while self._update_wanted and not self._closed:
            wait = self._next_refresh - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            # Requests made from here on want an answer newer than this one.
            self._update_wanted = False
            await self._refresh()

    async def _refresh(self) -> None:
        """One metadata round trip: the least loaded node first, then the others."""
        now = time.monotonic()
        failing_for = 0.0 if self._failing_since is None else now - self._failing_since
        if (
            self._rebootstrap_enabled
            and not self._use_bootstrap
            and failing_for >= self._rebootstrap_after
        ):
            # KIP-899: every known broker has been unreachable for a while; the
            # cluster may have moved. Start again from the bootstrap servers.
            self._log.warning(
                "no broker answered metadata for %.0f ms: rebootstrapping", failing_for * 1000
            )
            self._use_bootstrap = True
            for node in [n for n in self._retry_at if n < 0]:
                self._retry_at.pop(node)
                self._failures.pop(node, None)
        previous = self.snapshot
        try:
            response = await self._fetch_metadata()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to waiters, retried after a backoff
            if not isinstance(exc, errors.NoBrokersAvailableError) or not self._last_refresh_error:
                # (Every node backing off: keep the error that put them there.)
                self._last_refresh_error = exc
            if self._auth_failures:
                # Report the refusal rather than whichever error came last.
                self._last_refresh_error = next(reversed(self._auth_failures.values()))
            self._refresh_attempts += 1
            if self._failing_since is None:
                self._failing_since = now
        else:
            snapshot = ClusterSnapshot.from_response(response, time.monotonic(), previous)
            self._forget_moved_brokers(previous, snapshot)
            changed = snapshot.brokers != previous.brokers or snapshot.topics != previous.topics
            self._refresh_attempts = 0 if changed else self._refresh_attempts + 1
            self.snapshot = snapshot
            self._last_refresh_error = None
            self._failing_since = None
            if snapshot.brokers:
                self._use_bootstrap = False
                await self._close_bootstrap_connections()
        # A refresh that brought news may be followed at once (a leader moved:
        # its new leader may move again); one that failed or changed nothing
        # waits retry_backoff_ms, doubling up to retry_backoff_max_ms (KIP-580).
        self._next_refresh = time.monotonic() + reconnect_delay(
            self._refresh_attempts, *self._refresh_backoff_ms, random.random()
        )
        self._wake_waiters()
        self._notify()

    async def _fetch_metadata(self) -> Any:
        last: BaseException | None = None
        # Every node backing off: the one whose backoff ends first (connection() waits it out).
        for node_id in self._preference() or [self.any_node()]:
            try:
                conn = await self.connection(node_id, self._request_timeout_ms / 1000)
                conn.version_for(METADATA)  # fails early if no common version
                names = sorted(self._topics)
                topics = [{"name": t, "topic_id": None} for t in names]
                body = {"topics": topics, "allow_auto_topic_creation": self._auto_create}
                self.metadata_requests += 1
                self._log.debug(
                    "metadata request to broker %s for %d topic(s)", node_id, len(topics),
                    extra={"broker": node_id},
                )
                response = await conn.request(METADATA, body)
                self._new_topics.difference_update(names)
                return response
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try the next node
                last = exc
        raise last or errors.NoBrokersAvailableError("no broker to ask for metadata")

    def _forget_moved_brokers(self, old: ClusterSnapshot, new: ClusterSnapshot) -> None:
        """A broker at a new address starts afresh: no backoff earned at the old one."""
        for node, broker in new.brokers.items():
            before = old.brokers.get(node)
            if before is not None and (before.host, before.port) != (broker.host, broker.port):
                self._retry_at.pop(node, None)
                self._failures.pop(node, None)

    async def _close_bootstrap_connections(self) -> None:
        # Once the real node ids are known, a bootstrap connection is a second
        # connection to some broker: it must not count as another node.
        for node_id in [n for n, c in self._conns.items() if n < 0 and c.in_flight == 0]:
            await self._conns.pop(node_id).close()

    def _wake_waiters(self) -> None:
        self._updated.set()
        self._updated = asyncio.Event()

    def fail_metadata_waiters(self, exc: BaseException) -> None:
        """Wake everyone waiting in :meth:`partitions_for` with ``exc`` (the producer closes)."""
        self._waiter_error = exc
        self._wake_waiters()

    async def wait_for_update(self, timeout: float) -> None:
        """Request a refresh and wait for it (or ``timeout`` seconds)."""
        event = self._updated
        self.request_update()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        if self._waiter_error is not None:
            raise self._waiter_error

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

    async def partitions_for(self, topic: str, timeout: float, min_count: int = 1) -> int:
        """Number of partitions of ``topic``, fetching metadata for up to ``timeout`` seconds.

        With ``min_count``, waits until the topic has at least that many
        partitions (one was just added), and returns the count it has when
        ``timeout`` runs out; KafkaTimeoutError if the topic has none by then.
        """
        count = self.snapshot.partition_count(topic)
        if count is not None and count >= min_count and topic in self._topics:
            return count
        self.add_topic(topic)
        deadline = time.monotonic() + timeout
        while True:
            # A caller waiting keeps the topic in use (it is never idle meanwhile).
            self.add_topic(topic)
            self._topics[topic] = time.monotonic()
            info = self.snapshot.topics.get(topic)
            if info is not None:
                if info.partitions and len(info.partitions) >= min_count:
                    return len(info.partitions)
                if info.error_code and info.error_code not in _TRANSIENT_TOPIC_ERRORS:
                    errors.raise_for_code(info.error_code, f"topic {topic!r}")
            refused = self._last_refresh_error
            if refused is not None and errors.is_authentication_failure(refused):
                raise refused
            left = deadline - time.monotonic()
            if left <= 0:
                if info is not None and info.partitions:
                    return len(info.partitions)
                raise errors.KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms"
                )
            await self.wait_for_update(left)

    async def _maintain(self) -> None:
        """Refresh metadata by age, forget idle topics and close idle connections."""
        period = max(0.05, min(self._metadata_max_age, self._max_idle, self._topic_max_idle) / 2)
        while not self._closed:
            await asyncio.sleep(min(period, 1.0))
            now = time.monotonic()
            self._forget_idle_topics(now)
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

    def _forget_idle_topics(self, now: float) -> None:
        """Stop asking for topics unused for ``metadata_max_idle_ms`` (Java's metadata.max.idle.ms).

        Without this every refresh names every topic ever written, and with
        auto-creation on, a refresh re-creates a topic someone deleted.
        """
        idle = [
            t
            for t, used in self._topics.items()
            if now - used > self._topic_max_idle and t not in self._new_topics
        ]
        if not idle:
            return
        dropped = list(self._forget_topics(idle)) if self._forget_topics is not None else idle
        for topic in dropped:
            self._topics.pop(topic, None)
        self.snapshot.forget(dropped)
        if dropped:
            self._log.debug("forgot idle topics %s", dropped)

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
