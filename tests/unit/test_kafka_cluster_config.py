"""KafkaCluster's nodes form one replicated quorum: checked on their configuration alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from aioproducer.testing.kafka_cluster import KafkaCluster


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
