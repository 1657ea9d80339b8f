"""A replicated three-node Apache Kafka cluster for failover tests.

* ``kafka_cluster`` (session): a :class:`~tests.support.kafka_cluster.KafkaCluster`
  started once (formatting and starting three JVMs takes a while) with Kafka's
  default features (transaction.version 2, eligible leader replicas on); its
  files live under the session's temporary directory.
* ``kafka_cluster_tv1`` (session, started on first use, stopped after the
  last test that runs on it): a second cluster formatted with
  ``transaction.version=1`` and eligible leader replicas off (KIP-966), for
  what must hold on both transaction protocols (KIP-890) and without ELR.
* ``cluster`` (function): the default cluster, or the one a test names with
  ``@pytest.mark.parametrize("cluster", CLUSTERS, indirect=True)`` (``"tv2"``,
  ``"tv1"``, see ``settings.py``); healed after each test (every node started and resumed, serving
  again), with every node's log tail attached to the report of a failed test.
* ``cluster_topic`` (function): ``cluster_topic(partitions=3, config=None) -> str``
  creates a uniquely named topic replicated on all three nodes.

Every test here is marked ``integration`` and ``slow``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cluster.settings import CLUSTERS, TV1_FEATURES
from tests.conftest import _kafka_libs_or_skip, _show_log_on_failure
from tests.support.kafka_cluster import KafkaCluster

_HERE = Path(__file__).parent


#: Node id of the last test to run on ``kafka_cluster_tv1``: it stops that
#: cluster in its teardown, so that three idle JVMs do not share the machine
#: with the tests that follow.
_LAST_TV1_TEST: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # The items as they will run: selected, deselected and reordered already.
    users = [
        item.nodeid
        for item in session.items
        if getattr(getattr(item, "callspec", None), "params", {}).get("cluster") == "tv1"
    ]
    _LAST_TV1_TEST[:] = users[-1:]


def _run_cluster(
    tmp_path_factory: pytest.TempPathFactory, name: str, features: dict[str, int] | None = None
) -> Iterator[KafkaCluster]:
    _kafka_libs_or_skip()
    cluster = KafkaCluster(workdir=tmp_path_factory.mktemp(name), features=features)
    cluster.start()
    print(f"\n{name}: 3 nodes serving after {cluster.startup_seconds:.1f} s")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three Apache Kafka nodes, replication factor 3, min.insync.replicas=2."""
    yield from _run_cluster(tmp_path_factory, "kafka-cluster")


@pytest.fixture(scope="session")
def kafka_cluster_tv1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Like ``kafka_cluster``, formatted with :data:`TV1_FEATURES`."""
    yield from _run_cluster(tmp_path_factory, "kafka-cluster-tv1", TV1_FEATURES)


def heal(cluster: KafkaCluster) -> None:
    """Resume paused nodes and start stopped ones; return when all serve."""
    for node, broker in cluster.brokers.items():
        if broker.is_paused:
            broker.resume()
    down = [node for node, broker in cluster.brokers.items() if not broker.is_running]
    for node in down:
        cluster.start(node)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """A session's cluster (see :data:`CLUSTERS`), every node serving; healed again after the test."""
    which = getattr(request, "param", "tv2")
    if which not in CLUSTERS:
        raise ValueError(f"no cluster {which!r}; choose from {CLUSTERS}")
    kafka_cluster: KafkaCluster = request.getfixturevalue(
        "kafka_cluster" if which == "tv2" else "kafka_cluster_tv1"
    )
    for node, broker in kafka_cluster.brokers.items():
        _show_log_on_failure(request, f"Kafka node {node}", broker)
    heal(kafka_cluster)
    try:
        yield kafka_cluster
    finally:
        if which == "tv1" and _LAST_TV1_TEST == [request.node.nodeid]:
            kafka_cluster.stop()  # no test needs it any more
        else:
            heal(kafka_cluster)


@pytest.fixture
def cluster_topic(request: pytest.FixtureRequest, cluster: KafkaCluster) -> Callable[..., str]:
    """Create a uniquely named topic on the cluster, replicated three times."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-") or "t"

    def make(partitions: int = 3, *, config: dict[str, str] | None = None) -> str:
        from tests.support.verify import create_topic

        name = f"{base}-{uuid.uuid4().hex[:8]}"
        create_topic(
            cluster.bootstrap_servers, name, partitions, replication_factor=3, config=config
        )
        # Created means led; wait until every replica is in sync too, so that a
        # test's first failover starts from a fully replicated topic.
        cluster.wait_for_isr(name, 3)
        return name

    return make
