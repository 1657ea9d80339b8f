"""The cluster metadata that maps partitions to brokers, kept fresh, over the connections.

:class:`KafkaClient` holds a :class:`~aioproducer.net.broker_connections.BrokerConnections`
(``client.connections``: one connection per node, opened on demand with jittered
reconnect backoff) and keeps a :class:`ClusterSnapshot` fresh over it: on demand (a leader moved, a topic is unknown,
a connection dropped) and at least every ``metadata_max_age_ms``. It also
forgets topics idle for ``metadata_max_idle_ms`` and closes idle connections.

Invariants:

* at most one Metadata request is out at a time; every caller that wants fresh
  metadata while one is out or backing off shares the next one;
* after a refresh that failed or changed nothing, the next waits
  ``retry_backoff_ms``, growing exponentially to ``retry_backoff_max_ms``
  while that goes on (KIP-580);
* Metadata goes to the least loaded node (Java's ``leastLoadedNode``);
* bootstrap servers are used only until the first Metadata response names the
  real brokers, or again when every known broker has been unreachable for a
  while (KIP-899) or a broker answers REBOOTSTRAP_REQUIRED (Metadata v13, KIP-1102);
* a Metadata answer with a top-level error (v13) fails that refresh and never
  replaces the snapshot;
* every wait for metadata is bounded by the caller's timeout, and ends at once
  with the producer's error when it closes (:meth:`KafkaClient.fail_metadata_waiters`);
* a TLS or SASL refusal makes ``bootstrap`` and ``partitions_for`` raise it at
  once instead of retrying until their timeouts.

Ownership: the client is the one writer of the metadata (``snapshot``, the
topics, the refresh loop and its backoff, the waiters, whether to use the
bootstrap servers); ``connections`` is the one writer of all connection state,
and reads the snapshot and the bootstrap flag through callables given to it.
Callers that need a connection go through ``client.connections``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from .. import errors
from ..protocol.apis import METADATA
from ..protocol.generated import MetadataRequest, MetadataResponse
from ..protocol.generated.metadata import MetadataRequestTopic
from ..telemetry.logs import ClientLogger
from .broker_connections import BrokerConnections, parse_bootstrap
from .cluster import BrokerInfo, ClusterSnapshot, TopicInfo
from .node_selection import reconnect_delay
from .security import Security

if TYPE_CHECKING:
    from ..telemetry.producer_metrics import ProducerMetrics

__all__ = ["KafkaClient", "parse_bootstrap", "reconnect_delay"]

# Errors a topic reports while it is being created or elected: wait, do not fail.
_TRANSIENT_TOPIC_ERRORS = {
    errors.UnknownTopicOrPartitionError.code,
    errors.LeaderNotAvailableError.code,
}
# metadata_recovery_strategy values (KIP-899).
RECOVERY_STRATEGIES = ("rebootstrap", "none")


def _not_in_metadata(
    topic: str, timeout: float, info: TopicInfo | None, *, answered: bool
) -> errors.KafkaTimeoutError:
    """The error of a wait for ``topic``'s metadata that ran out, saying what the cluster said.

    Java waits the same way (``waitOnMetadata``): a topic the cluster calls
    unknown may be on its way (auto-creation, or an admin creating it), so
    it is not final before ``max_block_ms``; but when the last answer (to a
    request sent during the wait) said so, the error says that, not only
    that nothing came. ``answered``: such an answer came.
    """
    waited = f"topic {topic!r} not present in metadata after {timeout * 1000:.0f} ms"
    code = info.error_code if info is not None and answered else 0
    if code == errors.UnknownTopicOrPartitionError.code:
        cause: errors.KafkaError = errors.UnknownTopicOrPartitionError(f"topic {topic!r}")
        why = (
            "the cluster's last answer says it does not know the topic: it does not exist and "
            "the brokers do not create topics on demand (auto.create.topics.enable=false), "
            "or it is still being created"
        )
    elif code == errors.LeaderNotAvailableError.code:
        cause = errors.LeaderNotAvailableError(f"topic {topic!r}")
        why = (
            "the cluster's last answer says the topic has no leader yet (being created, "
            "or its brokers are down)"
        )
    elif not answered:
        return errors.KafkaTimeoutError(
            f"{waited}: no metadata answer came from the cluster meanwhile "
            "(is a broker reachable at bootstrap_servers?)"
        )
    else:
        return errors.KafkaTimeoutError(waited)
    error = errors.KafkaTimeoutError(f"{waited}: {why}")
    error.__cause__ = cause
    return error


log = logging.getLogger("aioproducer.net.client")


class KafkaClient:
    """The cluster metadata, kept fresh over :attr:`connections`."""

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
        # The latest metadata: where the brokers are (replaced, never mutated
        # but for forgotten topics, by this class alone).
        self.snapshot = ClusterSnapshot()
        # Until the first Metadata response names the brokers (or again, KIP-899).
        self._use_bootstrap = True
        self._closed = False
        self._log = ClientLogger(log, client_id or "aioproducer")
        #: The broker connections: the one owner of every connection's state.
        self.connections = BrokerConnections(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            connections_max_idle_ms=connections_max_idle_ms,
            metrics=metrics,
            security=security,
            cluster=lambda: self.snapshot,
            use_bootstrap=lambda: self._use_bootstrap,
            request_update=self.request_update,
        )
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._retry_backoff = retry_backoff_ms / 1000
        self._refresh_backoff_ms = (retry_backoff_ms, max(retry_backoff_ms, retry_backoff_max_ms))
        self._auto_create = allow_auto_create_topics
        #: Take the new leaders that produce refusals name (KIP-951). Off only
        #: to measure what the hints save (``benchmarks/failover.py``).
        self.use_leader_hints = True
        self._topic_max_idle = metadata_max_idle_ms / 1000
        self._rebootstrap_enabled = metadata_recovery_strategy == "rebootstrap"
        self._rebootstrap_after = metadata_recovery_rebootstrap_trigger_ms / 1000
        # Asked which idle topics may be forgotten (none with pending records).
        self._forget_topics = forget_topics
        # Topics to ask metadata for -> when a record last started a batch there.
        self._topics: dict[str, float] = {}
        # Topics added since the last Metadata response: never idle (Java's newTopics).
        self._new_topics: set[str] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        self._update_wanted = False
        self._next_refresh = 0.0  # monotonic time before which no refresh starts
        self._refresh_attempts = 0  # refreshes in a row that failed or changed nothing
        self._failing_since: float | None = None  # first failed refresh since the last success
        # When the request of the latest Metadata answer was started (monotonic).
        self._answer_asked_at = 0.0
        self._updated = asyncio.Event()
        self._waiter_error: BaseException | None = None
        self._last_refresh_error: BaseException | None = None
        self._maintenance: asyncio.Task[None] | None = None
        #: Metadata requests sent, for tests and metrics.
        self.metadata_requests = 0

    def __repr__(self) -> str:
        brokers = sorted(self.snapshot.brokers)
        return f"<KafkaClient brokers={brokers} connected={self.connections.connected_nodes()}>"

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

    def apply_leader_hints(
        self,
        leaders: Mapping[tuple[str, int], tuple[int, int]],
        brokers: Iterable[BrokerInfo] = (),
    ) -> set[tuple[str, int]]:
        """Take new partition leaders a broker named in a refusal (KIP-951).

        The batches of those partitions can go to the new leader at once
        instead of after a metadata round trip. Returns the partitions whose
        leader changed.
        """
        if not self.use_leader_hints:
            return set()
        before = self.snapshot
        after = before.with_leaders(leaders, brokers)
        if after is before:
            return set()
        self.snapshot = after
        self.connections.notify()
        moved = {tp for tp in leaders if before.leader_for(*tp) != after.leader_for(*tp)}
        for topic, partition in sorted(moved):
            self._log.debug(
                "%s-%d: new leader %s (epoch %s) named by a produce answer",
                topic,
                partition,
                leaders[(topic, partition)][0],
                leaders[(topic, partition)][1],
                extra={"partition": f"{topic}-{partition}"},
            )
        return moved

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
            self._rebootstrap()
        previous = self.snapshot
        try:
            response = await self._fetch_metadata()
            self._answer_asked_at = now
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to waiters, retried after a backoff
            if not isinstance(exc, errors.NoBrokersAvailableError) or not self._last_refresh_error:
                # (Every node backing off: keep the error that put them there.)
                self._last_refresh_error = exc
            refused = self.connections.latest_authentication_failure()
            if refused is not None:
                # Report the refusal rather than whichever error came last.
                self._last_refresh_error = refused
            self._refresh_attempts += 1
            if self._failing_since is None:
                self._failing_since = now
            if self._rebootstrap_enabled and isinstance(exc, errors.RebootstrapRequiredError):
                # KIP-1102: the broker says what this client knows is stale. Ask the
                # bootstrap servers next (after the backoff, so that a cluster that
                # keeps answering so is not asked in a busy loop), as Java's
                # NetworkClient does on this answer.
                self._log.warning("a broker answered REBOOTSTRAP_REQUIRED: rebootstrapping")
                self._rebootstrap()
                self._update_wanted = True
        else:
            snapshot = ClusterSnapshot.from_response(response, time.monotonic(), previous)
            self.connections.forget_moved_brokers(previous, snapshot)
            changed = snapshot.brokers != previous.brokers or snapshot.topics != previous.topics
            self._refresh_attempts = 0 if changed else self._refresh_attempts + 1
            self.snapshot = snapshot
            self._last_refresh_error = None
            self._failing_since = None
            if snapshot.brokers:
                self._use_bootstrap = False
                await self.connections.close_bootstrap_connections()
        # A refresh that brought news may be followed at once (a leader moved:
        # its new leader may move again); one that failed or changed nothing
        # waits retry_backoff_ms, doubling up to retry_backoff_max_ms (KIP-580).
        self._next_refresh = time.monotonic() + reconnect_delay(
            self._refresh_attempts, *self._refresh_backoff_ms, random.random()
        )
        self._wake_waiters()
        self.connections.notify()

    async def _fetch_metadata(self) -> MetadataResponse:
        last: BaseException | None = None
        # Every node backing off: the one whose backoff ends first (connection() waits it out).
        connections = self.connections
        for node_id in connections.preference() or [connections.any_node()]:
            try:
                conn = await connections.connection(node_id, connections.request_timeout)
                version = conn.version_for(METADATA)  # fails early if no common version
                names = sorted(self._topics)
                topics = [MetadataRequestTopic(name=t) for t in names]
                # Below v4 brokers decide by their own auto.create.topics.enable.
                body = MetadataRequest(
                    topics=topics, allow_auto_topic_creation=self._auto_create or version < 4
                )
                self.metadata_requests += 1
                self._log.debug(
                    "metadata request to broker %s for %d topic(s)",
                    node_id,
                    len(topics),
                    extra={"broker": node_id},
                )
                response = await conn.request(METADATA, body, version=version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try the next node
                last = exc
                continue
            if response.error_code:
                # Metadata v13 (KIP-1102): the broker refused the whole request. The
                # refresh fails and is retried after the backoff (REBOOTSTRAP_REQUIRED
                # rebootstraps first, see _refresh), as in Java's NetworkClient.
                raise errors.error_for_code(response.error_code)(
                    f"broker {node_id} answered metadata with a top-level error"
                )
            self._new_topics.difference_update(names)
            return response
        raise last or errors.NoBrokersAvailableError("no broker to ask for metadata")

    def _rebootstrap(self) -> None:
        """Ask the bootstrap servers for the next metadata, at once (KIP-899, KIP-1102)."""
        self._use_bootstrap = True
        self.connections.forget_bootstrap_backoff()

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
        # Not wait_for: on Python 3.11 it returns normally when the event is
        # set in the same loop pass as a cancellation of the caller, which is
        # then lost (gh-86296), and start() would wait out max_block_ms.
        # asyncio.wait never swallows a cancellation.
        waiter = asyncio.get_running_loop().create_task(event.wait())
        try:
            await asyncio.wait((waiter,), timeout=timeout)
        finally:
            waiter.cancel()
        if self._waiter_error is not None:
            raise self._waiter_error

    async def bootstrap(self, timeout: float) -> None:
        """First metadata fetch; NoBrokersAvailableError if none answers in ``timeout``.

        ConfigurationError at once if no bootstrap server name resolves.
        """
        deadline = time.monotonic() + timeout
        await self.connections.resolve_bootstrap(timeout)
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
                servers = self.connections.bootstrap_servers
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

    async def partitions_for(
        self,
        topic: str,
        timeout: float,
        min_count: int = 1,
        on_wait: Callable[[TopicInfo | None, float], float] | None = None,
    ) -> int:
        """Number of partitions of ``topic``, fetching metadata for up to ``timeout`` seconds.

        With ``min_count`` (a partition beyond those known: added since the
        last refresh?), returns once the topic has that many partitions, or
        with the count of the first answer to a request sent after the call
        began (the partition does not exist), or of the last answer when
        ``timeout`` runs out; KafkaTimeoutError if the topic has none by then.
        ``on_wait(info, seconds waited)`` is called before each wait and
        returns how long to wait at most before it is called again.
        """
        count = self.snapshot.partition_count(topic)
        if count is not None and count >= min_count and topic in self._topics:
            return count
        self.add_topic(topic)
        began = time.monotonic()
        deadline = began + timeout
        # A topic error is raised only from metadata fetched during this call,
        # as Java's waitOnMetadata does: an error remembered from an earlier
        # answer may be over (an ACL granted since: TOPIC_AUTHORIZATION_FAILED).
        stale = self.snapshot
        while True:
            # A caller waiting keeps the topic in use (it is never idle meanwhile).
            self.add_topic(topic)
            self._topics[topic] = time.monotonic()
            info = self.snapshot.topics.get(topic)
            if info is not None:
                if info.partitions and (
                    len(info.partitions) >= min_count or self._answer_asked_at >= began
                ):
                    return len(info.partitions)
                if (
                    info.error_code
                    and info.error_code not in _TRANSIENT_TOPIC_ERRORS
                    and self.snapshot is not stale
                ):
                    errors.raise_for_code(info.error_code, f"topic {topic!r}")
            refused = self._last_refresh_error
            if refused is not None and errors.is_authentication_failure(refused):
                raise refused
            left = deadline - time.monotonic()
            if left <= 0:
                if info is not None and info.partitions:
                    return len(info.partitions)
                if info is not None and info.error_code not in (0, *_TRANSIENT_TOPIC_ERRORS):
                    errors.raise_for_code(info.error_code, f"topic {topic!r}")
                raise _not_in_metadata(
                    topic, timeout, info, answered=self._answer_asked_at >= began
                )
            if on_wait is not None:
                left = min(left, on_wait(info, time.monotonic() - began))
            await self.wait_for_update(left)

    async def _maintain(self) -> None:
        """Refresh metadata by age, forget idle topics and close idle connections."""
        period = max(
            0.05, min(self._metadata_max_age, self.connections.max_idle, self._topic_max_idle) / 2
        )
        while not self._closed:
            await asyncio.sleep(min(period, 1.0))
            now = time.monotonic()
            self._forget_idle_topics(now)
            if now - self.snapshot.updated_at >= self._metadata_max_age:
                self.request_update()
            await self.connections.close_idle_connections(now)

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
        """Stop refreshing, then close every connection."""
        self._closed = True
        await self.connections.close(
            t for t in (self._refresh_task, self._maintenance) if t is not None
        )
