"""The two admin requests a cluster fixture needs to move leadership on purpose.

* ElectLeaders (KIP-460): make each partition's preferred replica (the first
  of its replica list) its leader again;
* AlterPartitionReassignments (KIP-455): give a partition a new replica list;
  the controller adds the new replicas, waits until they caught up, then
  drops the old ones (and moves leadership if the leader was dropped).

Both are sent to any broker, which forwards them to the active controller
(KRaft). The producer never sends these, so they live here, beside the
fixtures, written in the same schema language as the client's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aioproducer.embedded.broker_process import HOST
from aioproducer.protocol.messages import Api
from aioproducer.protocol.schema import INT8, INT16, INT32, STRING, Array, Field, Struct

from .kafka_broker import probe

__all__ = [
    "ALTER_PARTITION_REASSIGNMENTS",
    "ELECTION_PREFERRED",
    "ELECT_LEADERS",
    "AdminRequestError",
    "alter_partition_reassignments",
    "elect_leaders",
]

F = Field
ELECTION_PREFERRED = 0
# Kafka's codes that say "nothing to do", not a failure.
_ELECTION_NOT_NEEDED = 84

ELECT_LEADERS = Api(
    key=43,
    name="ElectLeaders",
    min_version=2,
    max_version=2,
    flexible_from=2,
    request=Struct(
        F("election_type", INT8),
        F(
            "topic_partitions",
            Array(Struct(F("topic", STRING), F("partitions", Array(INT32)))),
            nullable="0+",
        ),
        F("timeout_ms", INT32),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F(
            "replica_election_results",
            Array(
                Struct(
                    F("topic", STRING),
                    F(
                        "partition_result",
                        Array(
                            Struct(
                                F("partition_id", INT32),
                                F("error_code", INT16),
                                F("error_message", STRING, nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    key=45,
    name="AlterPartitionReassignments",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request=Struct(
        F("timeout_ms", INT32),
        F(
            "topics",
            Array(
                Struct(
                    F("name", STRING),
                    F(
                        "partitions",
                        Array(
                            Struct(
                                F("partition_index", INT32),
                                F("replicas", Array(INT32), nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        F(
            "responses",
            Array(
                Struct(
                    F("name", STRING),
                    F(
                        "partitions",
                        Array(
                            Struct(
                                F("partition_index", INT32),
                                F("error_code", INT16),
                                F("error_message", STRING, nullable="0+", default=None),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
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
    body = {
        "election_type": ELECTION_PREFERRED,
        "topic_partitions": [{"topic": topic, "partitions": sorted(partitions)}],
        "timeout_ms": int(timeout * 1000),
    }
    response = _request((host, port, source), ELECT_LEADERS, 2, body, timeout)
    problems = [
        f"{topic}-{p['partition_id']}: {p['error_code']} {p['error_message']}"
        for t in response["replica_election_results"]
        for p in t["partition_result"]
        if p["error_code"] not in (0, _ELECTION_NOT_NEEDED)
    ]
    if response["error_code"] or problems:
        raise AdminRequestError(f"ElectLeaders: error {response['error_code']} {problems}")


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
    body = {
        "timeout_ms": int(timeout * 1000),
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "replicas": list(nodes)}
                    for p, nodes in sorted(replicas.items())
                ],
            }
        ],
    }
    response = _request((host, port, source), ALTER_PARTITION_REASSIGNMENTS, 0, body, timeout)
    problems = [
        f"{t['name']}-{p['partition_index']}: {p['error_code']} {p['error_message']}"
        for t in response["responses"]
        for p in t["partitions"]
        if p["error_code"]
    ]
    if response["error_code"] or problems:
        raise AdminRequestError(
            f"AlterPartitionReassignments: error {response['error_code']} "
            f"{response['error_message']} {problems}"
        )


def _request(
    where: tuple[str, int, str | None], api: Api, version: int, body: Mapping[str, Any], timeout: float
) -> Any:
    host, port, source = where
    response = probe(port, api, version, body, timeout=timeout + 5, host=host, source=source)
    if response is None:
        raise AdminRequestError(f"{api.name}: no answer from {host}:{port}")
    return response
