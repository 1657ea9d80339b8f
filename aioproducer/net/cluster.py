"""A snapshot of cluster metadata: brokers, topics, partitions and their leaders.

Pure data, built from Metadata responses; no I/O and no clock of its own (the
caller passes ``now``). :class:`~aioproducer.net.client.KafkaClient` owns the
current snapshot and replaces it on each refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from ..protocol.generated import MetadataResponse

__all__ = ["BrokerInfo", "ClusterSnapshot", "PartitionInfo", "TopicInfo"]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 while the partition has no leader
    leader_epoch: int = -1
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    partitions: tuple[PartitionInfo, ...]
    # Partitions with a live leader, for the sticky partitioner (KIP-480).
    available: tuple[int, ...] = ()
    # (topic, partition) keys, made once: the producer uses them for every record.
    tps: tuple[tuple[str, int], ...] = ()
    # The topic's id (Metadata v10+), None when the broker does not say.
    topic_id: UUID | None = None


@dataclass(slots=True)
class ClusterSnapshot:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    updated_at: float = 0.0  # monotonic seconds; 0 means never

    @classmethod
    def from_response(
        cls, response: MetadataResponse, now: float, previous: ClusterSnapshot | None = None
    ) -> ClusterSnapshot:
        """Build a snapshot from a decoded Metadata response.

        Topics the response does not mention keep their previous entry, so a
        refresh for one topic does not forget the others. A partition whose
        known leader epoch is newer than the answer's keeps its known leader
        (KIP-320): a broker whose metadata lags must not move a leader back,
        e.g. one learnt from a Produce refusal (KIP-951). Only within the same
        topic id: a topic deleted and created again starts its epochs anew.
        """
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics = dict(previous.topics) if previous is not None else {}
        for t in response.topics:
            if t.name is None:
                continue
            parts = tuple(
                sorted(
                    (
                        PartitionInfo(
                            t.name, p.partition_index, p.leader_id, p.leader_epoch, p.error_code
                        )
                        for p in t.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            # The zero UUID is Java's ``Uuid.ZERO_UUID``: no id (below v10, or not told).
            topic_id = t.topic_id if t.topic_id.int else None
            known = topics.get(t.name)
            if known is not None and topic_id is not None and known.topic_id == topic_id:
                parts = tuple(_newest(known, p) for p in parts)
            available = tuple(p.partition for p in parts if p.leader >= 0 and p.leader in brokers)
            tps = tuple((t.name, p.partition) for p in parts)
            topics[t.name] = TopicInfo(t.name, t.error_code, parts, available, tps, topic_id)
        return cls(
            brokers=brokers,
            topics=topics,
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            updated_at=now,
        )

    def with_leaders(
        self,
        leaders: Mapping[tuple[str, int], tuple[int, int]],
        brokers: Iterable[BrokerInfo] = (),
    ) -> ClusterSnapshot:
        """This snapshot with the partitions' ``(leader, leader_epoch)`` from hints (KIP-951).

        A hint applies only when its epoch is newer than the known one (an
        older answer must not undo a newer refresh) and its leader has an
        address: among the known brokers or ``brokers``. Returns ``self``
        when no hint applies.
        """
        known = dict(self.brokers)
        for broker in brokers:
            known.setdefault(broker.node_id, broker)
        changed: dict[str, dict[int, PartitionInfo]] = {}
        for (topic, partition), (leader, epoch) in leaders.items():
            info = self.topics.get(topic)
            if info is None or not 0 <= partition < len(info.partitions) or leader not in known:
                continue
            current = info.partitions[partition]
            if epoch <= current.leader_epoch or leader == current.leader:
                continue
            changed.setdefault(topic, {})[partition] = PartitionInfo(
                topic, partition, leader, epoch
            )
        if not changed:
            return self
        topics = dict(self.topics)
        for topic, updates in changed.items():
            info = topics[topic]
            parts = tuple(updates.get(p.partition, p) for p in info.partitions)
            available = tuple(p.partition for p in parts if p.leader >= 0 and p.leader in known)
            topics[topic] = TopicInfo(
                topic, info.error_code, parts, available, info.tps, info.topic_id
            )
        return ClusterSnapshot(
            brokers=known,
            topics=topics,
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            updated_at=self.updated_at,
        )

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None when unknown or leaderless."""
        info = self.topics.get(topic)
        if info is None or partition >= len(info.partitions):
            return None
        leader = info.partitions[partition].leader
        if leader < 0 or leader not in self.brokers:
            return None
        return leader

    def partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        if info is None or not info.partitions:
            return None
        return len(info.partitions)

    def forget(self, topics: Iterable[str]) -> None:
        for name in topics:
            self.topics.pop(name, None)


def _newest(known: TopicInfo, answered: PartitionInfo) -> PartitionInfo:
    """The answered partition, unless the known one has a newer leader epoch."""
    if answered.partition >= len(known.partitions):
        return answered
    before = known.partitions[answered.partition]
    if answered.leader_epoch >= 0 and before.leader_epoch > answered.leader_epoch:
        return before
    return answered
