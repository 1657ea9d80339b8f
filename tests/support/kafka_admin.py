"""The two admin requests a cluster fixture needs to move leadership on purpose.

* ElectLeaders (KIP-460): make each partition's preferred replica (the first
  of its replica list) its leader again;
* AlterPartitionReassignments (KIP-455): give a partition a new replica list;
  the controller adds the new replicas, waits until they caught up, then
  drops the old ones (and moves leadership if the leader was dropped).

Both are sent to any broker, which forwards them to the active controller
(KRaft). The producer never sends these, so they live here, beside the
fixtures, as Kafka's generated classes like the client's own messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aioproducer.embedded.broker_process import HOST
from aioproducer.protocol.apis import Api
from aioproducer.protocol.generated import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from aioproducer.protocol.generated.alter_partition_reassignments import (
    ReassignablePartition,
    ReassignableTopic,
)
from aioproducer.protocol.generated.elect_leaders import TopicPartitions

from .kafka_broker import probe

__all__ = [
    "ALTER_PARTITION_REASSIGNMENTS",
    "ELECTION_PREFERRED",
    "ELECT_LEADERS",
    "AdminRequestError",
    "alter_partition_reassignments",
    "elect_leaders",
]

ELECTION_PREFERRED = 0
# Kafka's codes that say "nothing to do", not a failure.
_ELECTION_NOT_NEEDED = 84

# The client never sends these, so their version ranges are the harness's own.
ELECT_LEADERS: Api[ElectLeadersRequest, ElectLeadersResponse] = Api(
    "ElectLeaders", ElectLeadersRequest, ElectLeadersResponse, 2, 2
)
ALTER_PARTITION_REASSIGNMENTS: Api[
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
] = Api(
    "AlterPartitionReassignments",
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    0,
    0,
)


class AdminRequestError(RuntimeError):
    """The broker refused an admin request, or did not answer it."""


def elect_leaders(
    port: int,
    topic: str,
    partitions: Iterable[int],
    timeout: float = 30.0,
    *,
    host: str = HOST,
    source: str | None = None,
) -> None:
    """Elect the preferred replica of each partition as its leader.

    A partition already led by its preferred replica counts as done.
    ``host`` and ``source`` are as :func:`~tests.support.kafka_broker.probe` takes them.
    """
    body = ElectLeadersRequest(
        election_type=ELECTION_PREFERRED,
        topic_partitions=[TopicPartitions(topic=topic, partitions=sorted(partitions))],
        timeout_ms=int(timeout * 1000),
    )
    response: ElectLeadersResponse = _request((host, port, source), ELECT_LEADERS, 2, body, timeout)
    problems = [
        f"{topic}-{p.partition_id}: {p.error_code} {p.error_message}"
        for t in response.replica_election_results
        for p in t.partition_result
        if p.error_code not in (0, _ELECTION_NOT_NEEDED)
    ]
    if response.error_code or problems:
        raise AdminRequestError(f"ElectLeaders: error {response.error_code} {problems}")


def alter_partition_reassignments(
    port: int,
    topic: str,
    replicas: Mapping[int, Sequence[int]],
    timeout: float = 30.0,
    *,
    host: str = HOST,
    source: str | None = None,
) -> None:
    """Start moving each partition of ``topic`` to its replica list in ``replicas``.

    Returns once the controller accepted the reassignment; it completes in
    the background (new replicas catch up first).
    """
    body = AlterPartitionReassignmentsRequest(
        timeout_ms=int(timeout * 1000),
        topics=[
            ReassignableTopic(
                name=topic,
                partitions=[
                    ReassignablePartition(partition_index=p, replicas=list(nodes))
                    for p, nodes in sorted(replicas.items())
                ],
            )
        ],
    )
    response: AlterPartitionReassignmentsResponse = _request(
        (host, port, source), ALTER_PARTITION_REASSIGNMENTS, 0, body, timeout
    )
    problems = [
        f"{t.name}-{p.partition_index}: {p.error_code} {p.error_message}"
        for t in response.responses
        for p in t.partitions
        if p.error_code
    ]
    if response.error_code or problems:
        raise AdminRequestError(
            f"AlterPartitionReassignments: error {response.error_code} "
            f"{response.error_message} {problems}"
        )


def _request(
    where: tuple[str, int, str | None], api: Api[Any, Any], version: int, body: Any, timeout: float
) -> Any:
    host, port, source = where
    response = probe(port, api, version, body, timeout=timeout + 5, host=host, source=source)
    if response is None:
        raise AdminRequestError(f"{api.name}: no answer from {host}:{port}")
    return response
