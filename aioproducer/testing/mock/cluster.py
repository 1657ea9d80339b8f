"""MockCluster: an in-process Kafka cluster on loopback sockets, with scripted faults.

Example::

    async with MockCluster(brokers=3) as cluster:
        cluster.create_topic("orders", partitions=6)
        async with Producer(cluster.bootstrap_servers) as producer:
            await producer.send("orders", b"v", key=b"k")
        assert [r.value for r in cluster.records("orders")] == [b"v"]

Every broker is an ``asyncio.start_server`` speaking the real protocol through
``aioproducer.protocol``'s codecs, so any client (librdkafka, aiokafka, the
Java client) can be pointed at it. State is kept in memory and shared by all
brokers; there is no replication, so ``move_leader`` takes effect at once.
The cluster must be used from the event loop that started it.
"""

from __future__ import annotations

import collections
import ssl
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType

from ...net.bootstrap import format_address
from .faults import FaultPlan, InterceptHandler
from .log import MockRecord, PartitionLog
from .sasl import OAuthValidator, sasl_server_config
from .sasl_session import SaslStats
from .server import BrokerServer
from .state import PartitionState, TopicState, valid_topic_name
from .txn import TransactionCoordinator

__all__ = ["MockCluster", "PartitionState", "TopicState"]

# Replicas listed in metadata per partition (the leader first); nothing is
# replicated, but clients expect a plausible replica set.
_REPLICATION = 3


class MockCluster:
    """An in-memory Kafka cluster of ``brokers`` brokers on ``host``.

    ``base_port`` 0 picks free ports; otherwise broker ``i`` listens on
    ``base_port + i``.

    Security, as a broker listener configures it:

    * ``ssl_context``: a server-side context; every listener speaks TLS (and
      asks for client certificates when the context requires them: mTLS);
    * ``sasl_mechanisms``: every connection must authenticate with one of
      them (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``)
      before any request but ApiVersions; ``users`` maps user names to
      passwords (PLAIN and SCRAM); ``oauth_validator(token) -> claims`` checks
      OAUTHBEARER tokens and raises to refuse one (default: Kafka's unsecured
      JWT validator, see :func:`~aioproducer.testing.mock.sasl.validate_unsecured_jwt`);
    * ``sasl_session_lifetime_ms``: sessions end after this long (KIP-368,
      Kafka's ``connections.max.reauth.ms``); clients must re-authenticate;
    * ``scram_iterations``: the iteration count SCRAM credentials use and the
      server-first message offers (default 4096, as ``kafka-configs.sh``).

    ``transaction_version`` 2 finalizes that feature (KIP-890 part 2): the
    brokers advertise Produce v12, EndTxn v5 and TxnOffsetCommit v5, add
    partitions to transactions implicitly and bump the epoch at every EndTxn.
    The default, 1, is the v1 protocol, with no feature advertised.
    """

    def __init__(
        self,
        brokers: int = 3,
        default_partitions: int = 4,
        auto_create_topics: bool = True,
        host: str = "127.0.0.1",
        *,
        base_port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        sasl_mechanisms: Sequence[str] | None = None,
        users: Mapping[str, str] | None = None,
        oauth_validator: OAuthValidator | None = None,
        sasl_session_lifetime_ms: int | None = None,
        scram_iterations: int | None = None,
        transaction_version: int = 1,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if default_partitions < 1:
            raise ValueError("default_partitions must be at least 1")
        self.host = host
        self.default_partitions = default_partitions
        self.auto_create_topics = auto_create_topics
        self.cluster_id = f"mock-{uuid.uuid4().hex[:16]}"
        self.servers: dict[int, BrokerServer] = {}
        # Extra listeners for broker 0 (see add_bootstrap_listener).
        self._aliases: list[BrokerServer] = []
        self._brokers = brokers
        self._base_port = base_port
        self.topic_states: dict[str, TopicState] = {}
        self._topic_ids: dict[uuid.UUID, TopicState] = {}
        self._next_leader = 0
        self.coordinator = TransactionCoordinator(self._write_markers)
        self.faults = FaultPlan()
        self._requests: collections.Counter[tuple[int, int]] = collections.Counter()
        #: Error code answered for a retried batch already written: 0 (NONE,
        #: what Kafka does) or DUPLICATE_SEQUENCE_NUMBER (46, older brokers).
        self.duplicate_error_code = 0
        #: Largest record batch a partition accepts, in bytes (Kafka's
        #: ``max.message.bytes``); a larger one is answered MESSAGE_TOO_LARGE.
        #: None: no limit.
        self.max_message_bytes: int | None = None
        #: Whether a Produce v10+ refused with NOT_LEADER_OR_FOLLOWER names the
        #: partition's current leader and its address (KIP-951, Kafka 3.7+);
        #: False answers as older brokers do, leaving the client to ask Metadata.
        self.leader_hints = True
        #: Exceptions raised by handlers or intercepts (each answered UNKNOWN_SERVER_ERROR).
        self.handler_errors: list[BaseException] = []
        self.ssl_context = ssl_context
        self.sasl_config = sasl_server_config(
            sasl_mechanisms, users, oauth_validator, sasl_session_lifetime_ms, scram_iterations
        )
        self.sasl_stats = SaslStats()
        if transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, not {transaction_version!r}")
        self.transaction_version = transaction_version
        self._started = False

    def __repr__(self) -> str:
        state = "running" if self._started else "stopped"
        security = ", tls" if self.ssl_context is not None else ""
        if self.sasl_config is not None:
            security += f", sasl={self.sasl_config.mechanisms}"
        return (
            f"MockCluster({state}{security}, brokers={self._brokers}, "
            f"topics={len(self.topic_states)}, "
            f"bootstrap={self.bootstrap_servers if self._started else None!r})"
        )

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> MockCluster:
        """Start listening on every broker."""
        if self._started:
            return self
        try:
            for node in range(self._brokers):
                port = self._base_port + node if self._base_port else 0
                server = BrokerServer(self, node, self.host, port)
                await server.start()
                self.servers[node] = server
        except BaseException:
            await self.stop()
            raise
        self._started = True
        return self

    async def stop(self) -> None:
        """Close every listener and connection."""
        for server in [*self.servers.values(), *self._aliases]:
            server.resume()
            await server.stop()
        self._aliases.clear()
        self._started = False

    async def __aenter__(self) -> MockCluster:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def bootstrap_servers(self) -> str:
        """The ``host:port,...`` list to give a Producer (RuntimeError before ``start()``)."""
        if not self.servers:
            raise RuntimeError("the cluster is not started")
        return ",".join(format_address(self.host, s.port) for _, s in sorted(self.servers.items()))

    @property
    def broker_ids(self) -> list[int]:
        """The node ids of the brokers: ``0`` to ``brokers - 1``."""
        return list(range(self._brokers))

    # -- topics ----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None) -> None:
        """Create ``name``; partition leaders go round-robin over the brokers."""
        if not valid_topic_name(name):
            raise ValueError(f"invalid topic name {name!r}")
        if name in self.topic_states:
            raise ValueError(f"topic {name!r} already exists")
        count = self.default_partitions if partitions is None else partitions
        if count < 1:
            raise ValueError("a topic needs at least one partition")
        parts = []
        for index in range(count):
            leader = self._next_leader % self._brokers
            self._next_leader += 1
            replicas = [
                (leader + i) % self._brokers for i in range(min(_REPLICATION, self._brokers))
            ]
            parts.append(PartitionState(index, leader, replicas, PartitionLog(name, index)))
        topic = TopicState(name, uuid.uuid4(), parts)
        self.topic_states[name] = topic
        self._topic_ids[topic.topic_id] = topic

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and its records (KeyError if it does not exist)."""
        topic = self.topic_states.pop(name)
        self._topic_ids.pop(topic.topic_id, None)

    def add_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (CreatePartitions); leaders round-robin."""
        topic = self.topic_states[name]
        if count <= len(topic.partitions):
            raise ValueError(f"topic {name!r} already has {len(topic.partitions)} partitions")
        for index in range(len(topic.partitions), count):
            leader = self._next_leader % self._brokers
            self._next_leader += 1
            replicas = [
                (leader + i) % self._brokers for i in range(min(_REPLICATION, self._brokers))
            ]
            topic.partitions.append(
                PartitionState(index, leader, replicas, PartitionLog(name, index))
            )

    def ensure_topic(self, name: str) -> TopicState:
        """The topic ``name``, auto-created with the default partition count if missing."""
        if name not in self.topic_states:
            self.create_topic(name)
        return self.topic_states[name]

    def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicState | None:
        """The topic with this id (KIP-516 topic ids), or None."""
        return self._topic_ids.get(topic_id) if topic_id is not None else None

    def has_partition(self, topic: str, partition: int) -> bool:
        """Whether ``topic`` exists and has ``partition``."""
        state = self.topic_states.get(topic)
        return state is not None and 0 <= partition < len(state.partitions)

    def _partition(self, topic: str, partition: int) -> PartitionState:
        state = self.topic_states.get(topic)
        if state is None:
            raise KeyError(f"unknown topic {topic!r}")
        if not 0 <= partition < len(state.partitions):
            raise KeyError(f"topic {topic!r} has no partition {partition}")
        return state.partitions[partition]

    def partitions(self, topic: str) -> list[int]:
        """The partition indices of ``topic`` (KeyError if it does not exist)."""
        if topic not in self.topic_states:
            raise KeyError(f"unknown topic {topic!r}")
        return [p.index for p in self.topic_states[topic].partitions]

    def leader(self, topic: str, partition: int) -> int:
        """The broker that leads the partition now, -1 for none (see ``move_leader``)."""
        return self._partition(topic, partition).leader

    def records(self, topic: str, *, include_uncommitted: bool = False) -> list[MockRecord]:
        """Records of ``topic`` ordered by (partition, offset).

        By default: every non-transactional record and the committed
        transactional ones; ``include_uncommitted`` adds open and aborted ones.
        Raises KeyError for a topic that does not exist.
        """
        if topic not in self.topic_states:
            raise KeyError(f"unknown topic {topic!r}")
        out: list[MockRecord] = []
        for part in self.topic_states[topic].partitions:
            out.extend(part.log.records(include_uncommitted=include_uncommitted))
        return out

    def coordinator_for(self, key: str) -> int:
        """The broker that coordinates a group or transactional id (stable per key)."""
        return zlib.crc32(key.encode("utf-8")) % self._brokers

    def _write_markers(
        self, producer_id: int, partitions: Iterable[tuple[str, int]], commit: bool
    ) -> None:
        for topic, index in partitions:
            if self.has_partition(topic, index):
                self.topic_states[topic].partitions[index].log.write_marker(producer_id, commit)

    # -- addresses ---------------------------------------------------------------

    async def add_bootstrap_listener(self) -> str:
        """Serve broker 0 on one more port, never advertised in metadata; returns ``host:port``.

        Plays the part of a stable bootstrap address (a DNS alias or a load
        balancer) in front of brokers whose own addresses change.
        """
        server = BrokerServer(self, 0, self.host, 0)
        await server.start()
        self._aliases.append(server)
        return format_address(self.host, server.port)

    @property
    def bootstrap_listener_connections(self) -> int:
        """Connections accepted so far by the listeners of :meth:`add_bootstrap_listener`."""
        return sum(server.accepted for server in self._aliases)

    async def move_brokers(self) -> None:
        """Restart every broker on a new port; its old address refuses connections."""
        for node, old in sorted(self.servers.items()):
            await old.stop()
            server = BrokerServer(self, node, self.host, 0)
            await server.start()
            self.servers[node] = server

    # -- request accounting ----------------------------------------------------

    def count_request(self, broker: int, api_key: int) -> None:
        """Count one request received by ``broker`` (the brokers call it; see ``request_count``)."""
        self._requests[(broker, api_key)] += 1

    def request_count(self, api_key: int | None = None, broker: int | None = None) -> int:
        """Requests received so far, optionally only of one API key and/or broker."""
        return sum(
            n
            for (node, key), n in self._requests.items()
            if (api_key is None or key == api_key) and (broker is None or node == broker)
        )

    @property
    def sasl_authentications(self) -> int:
        """SASL authentications completed so far (re-authentications included)."""
        return self.sasl_stats.authentications

    @property
    def sasl_reauthentications(self) -> int:
        """Re-authentications (KIP-368) completed so far, part of :attr:`sasl_authentications`."""
        return self.sasl_stats.reauthentications

    @property
    def sasl_failures(self) -> int:
        """SASL authentications refused so far (bad credentials, unsupported mechanism)."""
        return sum(self.sasl_stats.failed.values())

    def sasl_authentications_by_mechanism(self) -> dict[str, int]:
        """Completed authentications per mechanism."""
        return dict(self.sasl_stats.completed)

    # -- fault injection ---------------------------------------------------------

    def _targets(self, broker: int | None) -> list[BrokerServer]:
        if broker is None:
            return [s for _, s in sorted(self.servers.items())]
        if broker not in self.servers:
            raise KeyError(f"no broker {broker}")
        return [self.servers[broker]]

    def fail_produce(
        self,
        topic: str,
        partition: int,
        error_code: int,
        count: int = 1,
        *,
        after_append: bool = False,
    ) -> None:
        """The next ``count`` Produce requests touching the partition answer ``error_code`` for it.

        Nothing is written for that partition, unless ``after_append``: then the
        batch goes through every check and is written, and only the answer is
        the error, as with NOT_ENOUGH_REPLICAS_AFTER_APPEND or a REQUEST_TIMED_OUT
        after the leader appended. Other partitions of the request are handled
        normally.
        """
        self.faults.add_produce_failure(topic, partition, error_code, count, after_append)

    def move_leader(self, topic: str, partition: int, to_broker: int | None = None) -> int:
        """Move the partition's leadership (to the next broker if None, broker 0 from no
        leader); returns the new leader.

        The old leader answers NOT_LEADER_OR_FOLLOWER for it from now on and
        metadata shows the new leader with a bumped leader epoch.
        """
        part = self._partition(topic, partition)
        target = (part.leader + 1) % self._brokers if to_broker is None else to_broker
        if target not in self.broker_ids:
            raise KeyError(f"no broker {target}")
        part.leader = target
        part.leader_epoch += 1
        part.replicas = [target] + [b for b in part.replicas if b != target]
        return target

    def take_leader_offline(self, topic: str, partition: int) -> None:
        """The partition loses its leader, as when its last in-sync replica fails.

        Metadata shows leader -1 with LEADER_NOT_AVAILABLE and a bumped leader
        epoch, every broker answers NOT_LEADER_OR_FOLLOWER for it, and produce
        answers name no leader (KIP-951). :meth:`move_leader` elects one again;
        :meth:`clear_faults` does not (this is the partition's state, not a fault).
        """
        part = self._partition(topic, partition)
        part.leader = -1
        part.leader_epoch += 1

    def drop_connections(
        self, broker: int | None = None, *, after_requests: int = 0, mid_response: bool = False
    ) -> None:
        """Break client connections of one broker (None: every broker).

        * ``after_requests=0``: close every open connection now;
        * ``after_requests=N``: each connection open now is closed when it
          receives its Nth further request, which is not answered;
        * ``mid_response=True``: instead, the broker's next response (its Nth
          when ``after_requests=N``) is cut after half its bytes and that
          connection closed.
        """
        for server in self._targets(broker):
            if mid_response:
                self.faults.cut_after[server.node_id] = max(after_requests - 1, 0)
            else:
                server.drop(after_requests)

    def delay_responses(
        self,
        seconds: float,
        *,
        broker: int | None = None,
        api_key: int | None = None,
        count: int | None = None,
    ) -> None:
        """Delay matching responses by ``seconds`` (``count`` None: until cleared)."""
        self.faults.add_delay(seconds, broker, api_key, count)

    def stall_broker(self, broker: int) -> None:
        """The broker keeps accepting connections but reads and answers nothing."""
        self._targets(broker)[0].stall()

    def resume_broker(self, broker: int) -> None:
        """Undo ``stall_broker``: the broker reads and answers again, in order."""
        self._targets(broker)[0].resume()

    def throttle(self, broker: int, ms: int) -> None:
        """Throttle ``broker`` as KIP-219 does (0 clears).

        Each response carries ``throttle_time_ms=ms`` and is sent at once; then
        the broker reads nothing more from that connection for ``ms``.
        """
        self._targets(broker)
        if ms > 0:
            self.faults.throttle_ms[broker] = ms
        else:
            self.faults.throttle_ms.pop(broker, None)

    def fail_api(
        self, api_key: int, error_code: int, count: int = 1, *, broker: int | None = None
    ) -> None:
        """The next ``count`` requests of ``api_key`` answer ``error_code``, unprocessed."""
        self.faults.add_api_failure(api_key, error_code, count, broker)

    def intercept(self, api_key: int, handler: InterceptHandler | None) -> None:
        """Answer ``api_key`` requests with ``handler(request, ctx)`` (None result: default).

        ``request`` is the decoded generated request (e.g. ``ProduceRequest``);
        the handler returns an instance of the API's generated response class
        (e.g. ``InitProducerIdResponse(error_code=15)``), encoded at the
        request's version, or None to let the mock answer. Any other value
        fails the request with UNKNOWN_SERVER_ERROR and is kept in
        ``handler_errors``. The handler may be a coroutine function. Passing
        None removes it.
        """
        if handler is None:
            self.faults.intercepts.pop(api_key, None)
        else:
            self.faults.intercepts[api_key] = handler

    def clear_faults(self) -> None:
        """Remove every scripted fault and resume stalled brokers."""
        self.faults.clear()
        for server in self.servers.values():
            server.resume()
            for conn in server.connections:
                conn.drop_after = None
