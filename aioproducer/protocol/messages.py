"""The requests and responses the producer speaks, written down as data.

Each :class:`Api` names its key, the version range this client implements, the
first flexible version (KIP-482) and the request/response schemas. Field
version ranges follow the JSON message definitions of Apache Kafka
(``clients/src/main/resources/common/message``). Versions are negotiated per
broker from its ApiVersions answer (:func:`negotiate_version`). The transaction
APIs are in ``txn_messages.py``; ``apis.py`` registers every API by key.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schema import BOOL, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Field, Struct

__all__ = [
    "API_VERSIONS",
    "INIT_PRODUCER_ID",
    "METADATA",
    "PRODUCE",
    "Api",
    "negotiate_version",
]

F = Field


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int
    request: Struct
    response: Struct

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses always use header v0, even in flexible versions,
        # so that a client can read one before knowing what the broker speaks.
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, v{self.min_version}-{self.max_version})"


API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    min_version=0,
    max_version=3,
    flexible_from=3,
    request=Struct(
        F("client_software_name", STRING, "3+", default="aioproducer"),
        F("client_software_version", STRING, "3+", default="0"),
    ),
    response=Struct(
        F("error_code", INT16),
        F(
            "api_keys",
            Array(
                Struct(
                    F("api_key", INT16),
                    F("min_version", INT16),
                    F("max_version", INT16),
                )
            ),
        ),
        F("throttle_time_ms", INT32, "1+"),
        # KIP-584 feature levels; the producer reads the cluster's finalized
        # ``transaction.version`` (KIP-890: 2 means transactions v2).
        F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        F(
            "finalized_features",
            Array(
                Struct(
                    F("name", STRING),
                    F("max_version_level", INT16),
                    F("min_version_level", INT16),
                )
            ),
            "3+",
            default=None,
            tag=2,
        ),
    ),
)

METADATA = Api(
    key=3,
    name="Metadata",
    min_version=1,
    max_version=12,
    flexible_from=9,
    request=Struct(
        F(
            "topics",
            Array(Struct(F("topic_id", UUID, "10+"), F("name", STRING, nullable="10+"))),
            nullable="1+",
        ),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "3+"),
        F(
            "brokers",
            Array(
                Struct(
                    F("node_id", INT32),
                    F("host", STRING),
                    F("port", INT32),
                    F("rack", STRING, "1+", nullable="1+"),
                )
            ),
        ),
        F("cluster_id", STRING, "2+", nullable="2+"),
        F("controller_id", INT32, "1+", default=-1),
        F(
            "topics",
            Array(
                Struct(
                    F("error_code", INT16),
                    F("name", STRING, nullable="12+"),
                    F("topic_id", UUID, "10+"),
                    F("is_internal", BOOL, "1+"),
                    F(
                        "partitions",
                        Array(
                            Struct(
                                F("error_code", INT16),
                                F("partition_index", INT32),
                                F("leader_id", INT32),
                                F("leader_epoch", INT32, "7+", default=-1),
                                F("replica_nodes", Array(INT32)),
                                F("isr_nodes", Array(INT32)),
                                F("offline_replicas", Array(INT32), "5+"),
                            )
                        ),
                    ),
                    F("topic_authorized_operations", INT32, "8+", default=-(1 << 31)),
                )
            ),
        ),
        F("cluster_authorized_operations", INT32, "8-10", default=-(1 << 31)),
    ),
)

# Produce v3 is the first version carrying record batch v2 (magic 2, KIP-98).
# v10 adds tagged fields (KIP-951): a partition refused with NOT_LEADER_OR_FOLLOWER
# names its current leader and epoch, and the response the addresses of those
# leaders, so the batch goes there without a metadata round trip. v11 tells the
# broker the client handles TRANSACTION_ABORTABLE (KIP-890 part 1); v12 makes
# the leader add the partition to the transaction (part 2), so a transactional
# producer sends it only under transactions v2
# (``transaction_version.choose_version``). v13 names topics by id (KIP-516).
PRODUCE = Api(
    key=0,
    name="Produce",
    min_version=3,
    max_version=12,
    flexible_from=9,
    request=Struct(
        F("transactional_id", STRING, "3+", nullable="3+", default=None),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F(
            "topic_data",
            Array(
                Struct(
                    F("name", STRING),
                    F(
                        "partition_data",
                        Array(Struct(F("index", INT32), F("records", RECORDS, nullable="0+"))),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        F(
            "responses",
            Array(
                Struct(
                    F("name", STRING),
                    F(
                        "partition_responses",
                        Array(
                            Struct(
                                F("index", INT32),
                                F("error_code", INT16),
                                F("base_offset", INT64),
                                F("log_append_time_ms", INT64, "2+", default=-1),
                                F("log_start_offset", INT64, "5+", default=-1),
                                F(
                                    "record_errors",
                                    Array(
                                        Struct(
                                            F("batch_index", INT32),
                                            F("batch_index_error_message", STRING, nullable="0+"),
                                        )
                                    ),
                                    "8+",
                                ),
                                F("error_message", STRING, "8+", nullable="0+", default=None),
                                F(
                                    "current_leader",
                                    Struct(
                                        F("leader_id", INT32, default=-1),
                                        F("leader_epoch", INT32, default=-1),
                                    ),
                                    "10+",
                                    tag=0,
                                    default=None,
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
        F("throttle_time_ms", INT32, "1+"),
        F(
            "node_endpoints",
            Array(
                Struct(
                    F("node_id", INT32),
                    F("host", STRING),
                    F("port", INT32),
                    F("rack", STRING, nullable="0+", default=None),
                )
            ),
            "10+",
            tag=0,
        ),
    ),
)

INIT_PRODUCER_ID = Api(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=4,
    flexible_from=2,
    request=Struct(
        F("transactional_id", STRING, nullable="0+", default=None),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16, default=-1),
    ),
)


def negotiate_version(api: Api, broker_min: int, broker_max: int) -> int | None:
    """The highest version both sides implement, or None when the ranges miss."""
    high = min(api.max_version, broker_max)
    if high < max(api.min_version, broker_min):
        return None
    return high

