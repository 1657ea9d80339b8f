"""KafkaCluster's nodes form one replicated quorum, on loopback or in namespaces: checked on
their configuration alone."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from tests.support.kafka_cluster import KafkaCluster
from tests.support.netns import NamespaceNetwork, NamespaceUnavailable


def test_three_nodes_share_one_quorum_and_replicate_three_times(tmp_path: Path) -> None:
    cluster = KafkaCluster(workdir=tmp_path, properties={"num.partitions": "6"})
    try:
        props = {node: b.server_properties() for node, b in cluster.brokers.items()}
        assert sorted(props) == [1, 2, 3]
        voters = {p["controller.quorum.voters"] for p in props.values()}
        assert len(voters) == 1
        entries = next(iter(voters)).split(",")
        assert [e.split("@")[0] for e in entries] == ["1", "2", "3"]
        assert len({e.split(":")[-1] for e in entries}) == 3  # one controller port each
        assert {b.cluster_id for b in cluster.brokers.values()} == {cluster.cluster_id}
        for node, p in props.items():
            assert p["node.id"] == str(node)
            assert p["process.roles"] == "broker,controller"
            assert p["default.replication.factor"] == "3"
            assert p["offsets.topic.replication.factor"] == "3"
            assert p["transaction.state.log.replication.factor"] == "3"
            assert p["transaction.state.log.min.isr"] == "2"
            assert p["min.insync.replicas"] == "2"
            assert p["unclean.leader.election.enable"] == "false"
            assert p["num.partitions"] == "6"  # overridden
            assert p["log.dirs"].startswith(str(tmp_path / f"node-{node}"))
        assert len(set(cluster.bootstrap_servers.split(","))) == 3
        assert cluster.live_nodes() == []
        with pytest.raises(KeyError, match="no node 4"):
            cluster.broker(4)
    finally:
        cluster.cleanup()


def test_a_cluster_needs_a_node() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        KafkaCluster(0)


def _network(nodes: list[int]) -> NamespaceNetwork:
    try:
        return NamespaceNetwork(nodes)  # names and addresses only: nothing is created
    except NamespaceUnavailable as exc:
        pytest.skip(str(exc))


def test_nodes_in_namespaces_listen_and_vote_on_their_own_addresses(tmp_path: Path) -> None:
    net = _network([1, 2, 3])
    cluster = KafkaCluster(workdir=tmp_path, network=net)
    try:
        voters = set()
        for node, b in cluster.brokers.items():
            p = b.server_properties()
            broker, controller = net.broker_address(node), net.controller_address(node)
            assert p["listeners"] == f"PLAINTEXT://{broker}:9092,CONTROLLER://{controller}:9093"
            assert p["advertised.listeners"] == f"PLAINTEXT://{broker}:9092"
            assert b.launcher == ["ip", "netns", "exec", net.namespace(node)]
            assert b.probe_source == net.harness_address
            voters.add(p["controller.quorum.voters"])
        assert voters == {",".join(f"{n}@{net.controller_address(n)}:9093" for n in (1, 2, 3))}
        assert cluster.bootstrap_servers == ",".join(
            f"{net.broker_address(n)}:9092" for n in (1, 2, 3)
        )
    finally:
        cluster.cleanup()
    with pytest.raises(ValueError, match=r"not 1\.\.3"):
        KafkaCluster(workdir=tmp_path, network=_network([1, 2]))


def test_namespace_names_fit_interface_names_and_addresses_differ() -> None:
    net = _network([1, 2, 3])
    names = [net.bridge] + [f(n) for n in net.nodes for f in (net._host_link, net._node_link)]
    assert all(len(name) <= 15 for name in names), names  # IFNAMSIZ - 1
    assert len(set(names)) == len(names)
    addresses = [net.client_address, net.harness_address]
    addresses += [f(n) for n in net.nodes for f in (net.broker_address, net.controller_address)]
    assert len(set(addresses)) == len(addresses)
    assert all(ipaddress.ip_address(a) in net.subnet for a in addresses)
    assert int(net.tag[3:9], 16) == os.getpid() % 0x1000000  # leftovers are found by pid


def test_a_node_loses_the_quorum_when_it_reaches_no_majority_of_controllers() -> None:
    net = _network([1, 2, 3])
    # What cut_controllers(1) blackholes, both ways (no routes are made here).
    net._cuts = {
        (1, net.controller_address(2)),
        (1, net.controller_address(3)),
        (2, net.controller_address(1)),
        (3, net.controller_address(1)),
    }
    assert [net.quorum_lost(n) for n in (1, 2, 3)] == [True, False, False]
    net._cuts = {(1, net.controller_address(2))}
    assert not net.quorum_lost(1)  # itself and node 3: a majority
