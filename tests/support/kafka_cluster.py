"""A replicated Apache Kafka cluster of three KRaft nodes on loopback ports (or namespaces).

Each node is a :class:`~tests.support.kafka_broker.KafkaBroker` running
as a combined broker and controller; the three share a cluster id and
``controller.quorum.voters``, so any one of them may be lost (killed, stopped,
paused) while the other two keep a controller majority. Topics are replicated
three times with ``min.insync.replicas=2`` and no unclean leader election:
what ``acks=all`` acknowledged survives the loss of any single node.

Example::

    with KafkaCluster() as cluster:
        leader = cluster.leader("orders", 0)
        cluster.kill(leader)
        cluster.wait_for_leader("orders", 0, not_in={leader})
        cluster.start(leader)
        cluster.wait_for_isr("orders", 3)

With ``network=`` (a :class:`~tests.support.netns.NamespaceNetwork`)
each node runs in its own network namespace on addresses of its own, so that a
test can cut links between nodes, or between a node and its clients, while
the cluster's own probes (bound to the harness address) still see every node.

Every method blocks (it sleeps while it polls); from a coroutine, call it
through ``asyncio.to_thread``. Every wait is bounded and raises
:class:`TimeoutError` naming what it waited for.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from aioproducer.embedded.broker_process import HOST, free_port
from aioproducer.protocol.apis import (
    COORDINATOR_KEY_GROUP,
    COORDINATOR_KEY_TRANSACTION,
    FIND_COORDINATOR,
)
from aioproducer.protocol.generated import FindCoordinatorRequest

from .kafka_admin import alter_partition_reassignments, elect_leaders
from .kafka_broker import KafkaBroker, _random_cluster_id, probe_metadata
from .netns import NamespaceNetwork

__all__ = ["CLUSTER_PROPERTIES", "KafkaCluster"]

T = TypeVar("T")

#: Broker settings of every node (``properties=`` adds to or overrides them).
CLUSTER_PROPERTIES: dict[str, str] = {
    "default.replication.factor": "3",
    "num.partitions": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # A node that stops heartbeating (killed, paused) is fenced by the
    # controller after the session timeout: its leaderships move and it
    # leaves every ISR. Kafka's 9 s default would make each failover test
    # wait that long; heartbeats must still fit several times in it on a
    # busy two-core machine, hence not less.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "5000",
    # A follower that stopped fetching leaves the ISR after this (default 30 s).
    "replica.lag.time.max.ms": "8000",
    # Leadership moves only when a test moves it (or a node is lost): the
    # periodic preferred-leader election would move it behind a test's back.
    "auto.leader.rebalance.enable": "false",
    # Three JVMs share two cores: fewer threads each.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "background.threads": "2",
}


class KafkaCluster:
    """Three (or ``size``) Apache Kafka nodes forming one KRaft cluster.

    Args:
        size: number of nodes; each is broker and controller (an odd number
            keeps a majority when one is lost).
        workdir: parent directory of the nodes' ``node-<id>`` directories; a
            fresh temporary one when ``None`` (removed by :meth:`cleanup`).
        properties: extra ``server.properties`` entries for every node.
        heap: each JVM's maximum heap.
        startup_timeout: seconds a node has from its launch to serve clients.
        stop_timeout: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        network: run node ``n`` in ``network``'s namespace of node ``n``, on its
            addresses (created here if not yet; the caller deletes it after
            :meth:`stop`). Its node ids must be ``1..size``.
        features: feature levels every node's storage is formatted with
            (``kafka-storage format --feature``), e.g.
            ``{"transaction.version": 1, "eligible.leader.replicas.version": 0}``;
            Kafka's defaults for its release otherwise.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        workdir: str | os.PathLike[str] | None = None,
        properties: Mapping[str, str] | None = None,
        heap: str = "384m",
        startup_timeout: float = 180.0,
        stop_timeout: float = 30.0,
        libs: str | os.PathLike[str] | None = None,
        network: NamespaceNetwork | None = None,
        features: Mapping[str, int] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one node, not {size}")
        if network is not None and network.nodes != list(range(1, size + 1)):
            raise ValueError(f"the network's nodes {network.nodes} are not 1..{size}")
        self.network = network
        self._owns_workdir = workdir is None
        self.workdir = Path(
            tempfile.mkdtemp(prefix="kafka-cluster-") if workdir is None else workdir
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _random_cluster_id()
        placement = {node_id: self._placement(node_id) for node_id in range(1, size + 1)}
        voters = ",".join(
            f"{n}@{where['controller_host']}:{where['controller_port']}"
            for n, where in placement.items()
        )
        props = {**CLUSTER_PROPERTIES, **(properties or {})}
        self.brokers: dict[int, KafkaBroker] = {
            node_id: KafkaBroker(
                node_id,
                workdir=self.workdir / f"node-{node_id}",
                properties=props,
                cluster_id=self.cluster_id,
                voters=voters,
                heap=heap,
                startup_timeout=startup_timeout,
                stop_timeout=stop_timeout,
                libs=libs,
                features=features,
                **where,
            )
            for node_id, where in placement.items()
        }
        #: Seconds the last whole-cluster :meth:`start` took (format, launch, all serving).
        self.startup_seconds: float | None = None

    def _placement(self, node: int) -> dict[str, Any]:
        """Where node ``node`` listens: loopback ports, or its namespace's addresses."""
        net = self.network
        if net is None:
            return {"port": free_port(), "controller_port": free_port(), "controller_host": HOST}
        # Every node has addresses of its own: the same well-known ports serve.
        return {
            "port": 9092,
            "controller_port": 9093,
            "host": net.broker_address(node),
            "controller_host": net.controller_address(node),
            "launcher": net.exec_prefix(node),
            "probe_source": net.harness_address,
        }

    # -- addresses ----------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every node's ``HOST:PORT``, comma-separated (valid across restarts)."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.brokers)

    def broker(self, node: int) -> KafkaBroker:
        """The :class:`KafkaBroker` of node ``node``."""
        try:
            return self.brokers[node]
        except KeyError:
            raise KeyError(f"no node {node}; the cluster has {self.node_ids}") from None

    def live_nodes(self) -> list[int]:
        """Nodes whose process runs and is not paused."""
        return [n for n, b in sorted(self.brokers.items()) if b.is_running and not b.is_paused]

    # -- lifecycle ------------------------------------------------------------------

    def start(self, node: int | None = None) -> KafkaCluster:
        """Start one stopped node, or (``node=None``) every node, and wait until they serve.

        The whole cluster formats its storage in parallel, launches every
        process, then waits for each: a node answers Metadata only once a
        controller majority runs.
        """
        if node is not None:
            self.broker(node).start()
            return self
        started = time.monotonic()
        if self.network is not None:
            self.network.create()
        brokers = [b for b in self.brokers.values() if not b.is_running]
        _parallel(lambda b: b.format_storage(), brokers)
        try:
            for b in brokers:
                b.launch()  # on this thread: the child's death signal follows it
            _parallel(lambda b: b.wait_ready(), brokers)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self, node: int | None = None) -> None:
        """SIGTERM node ``node`` (a controlled shutdown: its leaderships move first).

        With ``node=None`` every node is killed instead: a cluster being
        thrown away needs no controlled shutdown, and its last node would wait
        for a controller majority that is already gone.
        """
        if node is not None:
            self.broker(node).stop()
            return
        for b in self.brokers.values():
            if b.is_paused:
                b.resume()
            b.kill()

    def kill(self, node: int) -> None:
        """SIGKILL node ``node``: it dies at once, its leaderships move after it is fenced."""
        self.broker(node).kill()

    def pause(self, node: int) -> None:
        """SIGSTOP node ``node``: its connections stay open, nothing is answered."""
        self.broker(node).pause()

    def resume(self, node: int) -> None:
        """SIGCONT node ``node``."""
        self.broker(node).resume()

    def restart(self, node: int) -> None:
        """Stop node ``node`` gracefully if it runs, then start it; same ports and data."""
        self.broker(node).restart()

    def cleanup(self) -> None:
        """Kill every node still running and remove a workdir this cluster made."""
        for b in self.brokers.values():
            b.kill()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<KafkaCluster {self.bootstrap_servers} live={self.live_nodes()}>"

    # -- what the cluster says --------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """A decoded Metadata v4 answer from a live node, or None if none answers.

        A node cut off from a controller majority (see :attr:`network`) is
        asked last: it still answers, with what it knew before the cut.
        """
        names = None if topics is None else list(topics)
        live = self.live_nodes()
        stale = [n for n in live if self.network is not None and self.network.quorum_lost(n)]
        for node in [n for n in live if n not in stale] + stale:
            b = self.brokers[node]
            body = probe_metadata(b.port, 2.0, names, host=b.host, source=b.probe_source)
            if body is not None:
                return body
        return None

    def partitions(self, topic: str) -> dict[int, Any]:
        """``{partition: metadata}`` of ``topic`` (``leader_id``, ``isr_nodes``, ...); {} if unknown."""
        body = self.metadata([topic])
        if body is None:
            return {}
        for t in body.topics:
            if t.name == topic and t.error_code == 0:
                return {p.partition_index: p for p in t.partitions}
        return {}

    def leader(self, topic: str, partition: int) -> int:
        """The leader of ``topic``-``partition`` as a live node sees it; -1 if none or unknown."""
        p = self.partitions(topic).get(partition)
        return -1 if p is None else int(p.leader_id)

    def leaders(self, topic: str) -> dict[int, int]:
        """``{partition: leader}`` of ``topic`` (-1 for a leaderless partition)."""
        return {n: int(p.leader_id) for n, p in self.partitions(topic).items()}

    def isr(self, topic: str, partition: int) -> list[int]:
        """The in-sync replicas of ``topic``-``partition``; [] if unknown."""
        p = self.partitions(topic).get(partition)
        return [] if p is None else sorted(p.isr_nodes)

    def coordinator(
        self,
        key: str,
        *,
        transactional: bool = True,
        not_in: Collection[int] = (),
        timeout: float = 60.0,
    ) -> int:
        """The node coordinating transactional id ``key`` (or consumer group ``key``).

        Waits while the coordinator is not available (its internal topic is
        created on the first request, then loaded), or is one of ``not_in``
        (a node just lost, still named until its leaderships move).
        """
        key_type = COORDINATOR_KEY_TRANSACTION if transactional else COORDINATOR_KEY_GROUP

        def check() -> int | None:
            for node in self.live_nodes():
                body = self.brokers[node].request(
                    FIND_COORDINATOR, 1, FindCoordinatorRequest(key=key, key_type=key_type)
                )
                if body is not None and body.error_code == 0 and body.node_id >= 0:
                    node_id = int(body.node_id)
                    return None if node_id in not_in else node_id
            return None

        return _wait(check, timeout, f"coordinator of {key!r}")

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The replica list of ``topic``-``partition`` in order (the first is preferred)."""
        p = self.partitions(topic).get(partition)
        return [] if p is None else list(p.replica_nodes)

    # -- moving leadership on purpose ---------------------------------------------------

    def elect_preferred_leaders(self, topic: str, partitions: Iterable[int] | None = None) -> None:
        """Make each partition's first replica its leader again (ElectLeaders, KIP-460)."""
        names = sorted(self.partitions(topic)) if partitions is None else list(partitions)
        b = self._admin_broker()
        elect_leaders(b.port, topic, names, host=b.host, source=b.probe_source)

    def reassign(self, topic: str, replicas: Mapping[int, Sequence[int]]) -> None:
        """Start moving partitions to new replica lists (AlterPartitionReassignments, KIP-455).

        Returns once the controller accepted; see :meth:`wait_for_replicas`.
        """
        b = self._admin_broker()
        alter_partition_reassignments(b.port, topic, replicas, host=b.host, source=b.probe_source)

    def _admin_broker(self) -> KafkaBroker:
        live = self.live_nodes()
        if not live:
            raise RuntimeError("no live node to send an admin request to")
        return self.brokers[live[0]]

    # -- waiting for the cluster -------------------------------------------------------

    def wait_for_nodes(self, nodes: Iterable[int] | None = None, *, timeout: float = 60.0) -> None:
        """Wait until Metadata lists every node (or those named): registered and unfenced.

        A node the controller fenced (it stopped heartbeating, e.g. it was
        cut off) is left out of Metadata until it heartbeats again; a topic
        created meanwhile could not be placed on it.
        """
        wanted = set(self.node_ids if nodes is None else nodes)

        def check() -> bool | None:
            body = self.metadata([])
            listed = set() if body is None else {b.node_id for b in body.brokers}
            return True if wanted <= listed else None

        _wait(check, timeout, f"Metadata listing nodes {sorted(wanted)}")

    def wait_for_replicas(
        self, topic: str, partition: int, replicas: Sequence[int], *, timeout: float = 90.0
    ) -> None:
        """Wait until the partition has exactly ``replicas``, in order, all in sync."""

        def check() -> bool | None:
            p = self.partitions(topic).get(partition)
            if p is None or list(p.replica_nodes) != list(replicas):
                return None
            return True if sorted(p.isr_nodes) == sorted(replicas) else None

        _wait(check, timeout, f"{topic}-{partition} on replicas {list(replicas)}, all in sync")

    def wait_for_leader(
        self, topic: str, partition: int, *, not_in: Collection[int] = (), timeout: float = 60.0
    ) -> int:
        """Wait until a live node outside ``not_in`` leads the partition; return it."""

        def check() -> int | None:
            leader = self.leader(topic, partition)
            live = self.live_nodes()
            return leader if leader in live and leader not in not_in else None

        return _wait(check, timeout, f"a leader of {topic}-{partition} outside {set(not_in)}")

    def wait_for_isr(
        self,
        topic: str,
        size: int,
        *,
        partitions: Iterable[int] | None = None,
        timeout: float = 90.0,
    ) -> dict[int, list[int]]:
        """Wait until every partition (or those named) has exactly ``size`` in-sync replicas.

        Returns ``{partition: isr}``. ``size`` equal to the replication factor
        means every replica caught up (after a node came back); less means the
        lost ones were taken out.
        """
        wanted = None if partitions is None else set(partitions)

        def check() -> dict[int, list[int]] | None:
            parts = self.partitions(topic)
            chosen = {n: p for n, p in parts.items() if wanted is None or n in wanted}
            if not chosen or (wanted is not None and set(chosen) != wanted):
                return None
            isr = {n: sorted(p.isr_nodes) for n, p in chosen.items()}
            return isr if all(len(nodes) == size for nodes in isr.values()) else None

        return _wait(check, timeout, f"every partition of {topic} with an ISR of {size}")


def _wait(check: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout} s")
        time.sleep(0.1)


def _parallel(action: Callable[[KafkaBroker], object], brokers: list[KafkaBroker]) -> None:
    """Run ``action`` on every broker in its own thread; re-raise the first failure."""
    failures: list[BaseException] = []

    def run(b: KafkaBroker) -> None:
        try:
            action(b)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(b,), daemon=True) for b in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
