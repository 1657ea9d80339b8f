"""What handlers and broker servers see of the mock cluster: topics and a cluster view.

The handlers and the broker servers need the cluster's state but not its
lifecycle; :class:`ClusterView` names exactly what they use, so the arrows run
one way: ``cluster`` -> ``server`` -> ``handlers`` -> ``state``, and
:class:`~aioproducer.testing.mock.cluster.MockCluster` satisfies the view.
"""

from __future__ import annotations

import dataclasses
import re
import ssl
import uuid
from collections.abc import Mapping
from typing import Protocol

from .faults import FaultPlan
from .log import PartitionLog
from .sasl import SaslServerConfig
from .sasl_session import SaslStats
from .txn import TransactionCoordinator

__all__ = ["ClusterView", "Listener", "PartitionState", "TopicState", "valid_topic_name"]

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def valid_topic_name(name: str | None) -> bool:
    """Kafka's Topic.validate: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
    return name is not None and name not in (".", "..") and _LEGAL_TOPIC.fullmatch(name) is not None


@dataclasses.dataclass
class PartitionState:
    """One partition: its leader, the leader's epoch (KIP-101) and its log."""

    index: int
    leader: int
    replicas: list[int]
    log: PartitionLog
    leader_epoch: int = 0


@dataclasses.dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]

    def __repr__(self) -> str:
        return f"TopicState({self.name!r}, partitions={len(self.partitions)})"


class Listener(Protocol):
    """A broker's listening socket, as metadata advertises it."""

    @property
    def port(self) -> int: ...


class ClusterView(Protocol):
    """The cluster state that request handlers and broker servers read and change."""

    host: str
    cluster_id: str
    auto_create_topics: bool
    topic_states: dict[str, TopicState]
    coordinator: TransactionCoordinator
    faults: FaultPlan
    duplicate_error_code: int
    max_message_bytes: int | None
    leader_hints: bool
    handler_errors: list[BaseException]
    ssl_context: ssl.SSLContext | None
    sasl_config: SaslServerConfig | None
    sasl_stats: SaslStats
    transaction_version: int

    @property
    def servers(self) -> Mapping[int, Listener]: ...

    @property
    def broker_ids(self) -> list[int]: ...

    def ensure_topic(self, name: str) -> TopicState: ...

    def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicState | None: ...

    def has_partition(self, topic: str, partition: int) -> bool: ...

    def coordinator_for(self, key: str) -> int: ...

    def count_request(self, broker: int, api_key: int) -> None: ...
