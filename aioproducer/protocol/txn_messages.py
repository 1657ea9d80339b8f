"""The transaction APIs (KIP-98), written down as data like ``messages.py``.

A transactional producer finds its transaction coordinator (FindCoordinator,
key type 1), gets a producer id and epoch for its ``transactional.id``
(InitProducerId, in ``messages.py``), registers every partition before its
first write in a transaction (AddPartitionsToTxn), optionally folds consumer
offsets into the transaction (AddOffsetsToTxn to the transaction coordinator,
then TxnOffsetCommit to the group coordinator) and ends it (EndTxn).

Field version ranges follow the JSON message definitions of Apache Kafka
(``clients/src/main/resources/common/message``) up to the newest version each
defines, so a decoder is right for any version; ``max_version`` is what this
client sends. KIP-890:

* part 1 bumps FindCoordinator to v5, AddOffsetsToTxn, EndTxn and
  TxnOffsetCommit to v4 only to announce that the client understands
  TRANSACTION_ABORTABLE (120), an error it answers by aborting. Same wire
  shape. AddOffsetsToTxn, EndTxn and TxnOffsetCommit claim it; FindCoordinator
  and InitProducerId stay below it.
* part 2 (EndTxn v5, TxnOffsetCommit v5) bumps the epoch on every transaction
  and registers the offsets partition implicitly: sent only under
  transactions v2 (``transaction_version.choose_version`` caps them at v4
  otherwise).

None of these messages defines tagged fields; the schema interpreter skips any
a broker sends anyway.
"""

from __future__ import annotations

from .messages import Api
from .schema import BOOL, INT8, INT16, INT32, INT64, STRING, Array, Field, Struct

__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "COORDINATOR_KEY_GROUP",
    "COORDINATOR_KEY_TRANSACTION",
    "END_TXN",
    "FIND_COORDINATOR",
    "TXN_APIS",
    "TXN_OFFSET_COMMIT",
]

F = Field

# FindCoordinator key_type values (v1+); 2 (share group, KIP-932, v6) is of no
# use to a producer.
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1

# v0 has no key_type, so it can only find group coordinators; a v0 request for
# a transactional id would silently ask for the wrong coordinator. Every broker
# with transactions (0.11+) speaks v1, and Kafka 4.0 removed v0 (KIP-896).
# v4 (KIP-699, Kafka 3.0) replaces the single key by a batch of keys, and the
# single answer by one entry per key.
FIND_COORDINATOR = Api(
    key=10,
    name="FindCoordinator",
    min_version=1,
    max_version=4,
    flexible_from=3,
    request=Struct(
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+", default=COORDINATOR_KEY_GROUP),
        F("coordinator_keys", Array(STRING), "4+"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3", default=None),
        F("node_id", INT32, "0-3", default=-1),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3", default=-1),
        F(
            "coordinators",
            Array(
                Struct(
                    F("key", STRING, "4+"),
                    F("node_id", INT32, "4+", default=-1),
                    F("host", STRING, "4+"),
                    F("port", INT32, "4+", default=-1),
                    F("error_code", INT16, "4+"),
                    F("error_message", STRING, "4+", nullable="4+", default=None),
                )
            ),
            "4+",
        ),
    ),
)

_TXN_TOPIC = Struct(F("name", STRING), F("partitions", Array(INT32)))
_TXN_TOPIC_RESULT = Struct(
    F("name", STRING),
    F(
        "results_by_partition",
        Array(Struct(F("partition_index", INT32), F("partition_error_code", INT16))),
    ),
)

# Versions 0-3 are the client's; v4+ (KIP-890 part 1) batch several
# transactions and are sent only broker to broker, to verify that a partition
# is in a transaction before a transactional Produce is appended. The v4+
# fields are declared so such frames decode, but a client never sends them.
ADD_PARTITIONS_TO_TXN = Api(
    key=24,
    name="AddPartitionsToTxn",
    min_version=0,
    max_version=3,
    flexible_from=3,
    request=Struct(
        F(
            "transactions",
            Array(
                Struct(
                    F("transactional_id", STRING, "4+"),
                    F("producer_id", INT64, "4+"),
                    F("producer_epoch", INT16, "4+"),
                    F("verify_only", BOOL, "4+"),
                    F("topics", Array(_TXN_TOPIC), "4+"),
                )
            ),
            "4+",
        ),
        F("transactional_id", STRING, "0-3"),
        F("producer_id", INT64, "0-3"),
        F("producer_epoch", INT16, "0-3"),
        F("topics", Array(_TXN_TOPIC), "0-3"),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "4+"),
        F(
            "results_by_transaction",
            Array(
                Struct(
                    F("transactional_id", STRING, "4+"),
                    F("topic_results", Array(_TXN_TOPIC_RESULT), "4+"),
                )
            ),
            "4+",
        ),
        F("results_by_topic", Array(_TXN_TOPIC_RESULT), "0-3"),
    ),
)

# Who is asking: every transactional request to the coordinator starts so.
_TXN_IDENTITY = (
    F("transactional_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
)

# Sent to the transaction coordinator; it adds the group's __consumer_offsets
# partition to the transaction, so the TxnOffsetCommit that follows commits
# or aborts with it.
ADD_OFFSETS_TO_TXN = Api(
    key=25,
    name="AddOffsetsToTxn",
    min_version=0,
    max_version=4,
    flexible_from=3,
    request=Struct(*_TXN_IDENTITY, F("group_id", STRING)),
    response=Struct(F("throttle_time_ms", INT32), F("error_code", INT16)),
)

END_TXN = Api(
    key=26,
    name="EndTxn",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request=Struct(*_TXN_IDENTITY, F("committed", BOOL)),
    response=Struct(
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        # v5 (KIP-890 part 2): the coordinator bumps the epoch at every commit
        # or abort and hands the new producer id and epoch back.
        F("producer_id", INT64, "5+", default=-1),
        F("producer_epoch", INT16, "5+", default=-1),
    ),
)

# Sent to the group coordinator. v3 (KIP-447) carries the consumer's group
# generation and member id, so the coordinator can fence a zombie whose group
# membership moved on; generation -1 with an empty member id skips that check.
TXN_OFFSET_COMMIT = Api(
    key=28,
    name="TxnOffsetCommit",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request=Struct(
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+"),
        F("group_instance_id", STRING, "3+", nullable="3+", default=None),
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
                                F("committed_offset", INT64),
                                F("committed_leader_epoch", INT32, "2+", default=-1),
                                F("committed_metadata", STRING, nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        F("throttle_time_ms", INT32),
        F(
            "topics",
            Array(
                Struct(
                    F("name", STRING),
                    F(
                        "partitions",
                        Array(Struct(F("partition_index", INT32), F("error_code", INT16))),
                    ),
                )
            ),
        ),
    ),
)

TXN_APIS: tuple[Api, ...] = (
    FIND_COORDINATOR,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
)
