"""Errors raised by aioproducer, with Kafka's protocol error codes kept as data.

Every error code a broker can return lives in one table, :data:`ERROR_TABLE`,
mirroring Java's ``org.apache.kafka.common.protocol.Errors``. Exception classes
for those codes are generated from the table at import time (the way asyncpg
generates its exceptions from PostgreSQL's SQLSTATE table) and registered by
code, so a decoder turns a code into an exception with :func:`error_for_code`
or :func:`raise_for_code`.

Two flags drive recovery and follow the Java class hierarchy:

* ``retriable``: the Java exception extends ``RetriableException``;
* ``invalid_metadata``: it extends ``InvalidMetadataException``, i.e. the client
  should refresh its metadata before retrying.

Errors that originate in the client (timeouts, lost connections, bad
configuration) share the :class:`KafkaError` root but carry no code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, NamedTuple

__all__ = [
    "ERROR_CODES",
    "ERROR_TABLE",
    "BrokerResponseError",
    "ConfigurationError",
    "ConnectionFailedError",
    "ConnectionLostError",
    "CorruptResponseError",
    "ErrorSpec",
    "IllegalStateError",
    "InvalidPartitionError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "ProducerClosedError",
    "SerializationError",
    "TransactionAbortedError",
    "error_for_code",
    "raise_for_code",
]  # the generated broker error classes are appended below


class KafkaError(Exception):
    """Root of every error raised by aioproducer."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False
    code: ClassVar[int | None] = None
    #: Kafka's constant name for ``code``, e.g. ``"NOT_LEADER_OR_FOLLOWER"``.
    error_name: ClassVar[str | None] = None
    #: Short fixed text; ``str()`` combines it with the per-instance message.
    description: ClassVar[str] = ""

    def __init__(self, message: str | None = None) -> None:
        # Keep ``args`` empty when there is no message so that the default
        # pickling (``cls(*args)``) rebuilds an equal exception.
        if message is None:
            super().__init__()
        else:
            super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        head = self.description
        if not head:
            # Plain Exception behaviour for subclasses that define no description.
            return self.message or ""
        if self.code is not None:
            tag = f"{self.error_name}, code {self.code}" if self.error_name else f"code {self.code}"
            head = f"{head} ({tag})"
        return f"{head}: {self.message}" if self.message else head

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class BrokerResponseError(KafkaError):
    """Base of the errors a broker reports through an error code."""

    description = "The broker returned an error"


# Client-side errors (no broker code).


class KafkaTimeoutError(KafkaError):
    """An operation did not finish in time (Java ``TimeoutException``)."""

    retriable = True
    description = "Timed out"


class ProducerClosedError(KafkaError):
    """The producer was used after (or while) being closed."""

    description = "The producer is closed"


class KafkaConnectionError(KafkaError):
    """A broker connection failed; retry after refreshing metadata.

    Java's ``NetworkClient`` treats a disconnect as a reason to refresh
    metadata, since the broker may have moved or lost leadership.
    """

    retriable = True
    invalid_metadata = True
    description = "Broker connection error"


class ConnectionLostError(KafkaConnectionError):
    """The connection dropped while requests were in flight.

    Those requests may or may not have been applied by the broker.
    """

    description = "Connection lost with requests in flight"


class ConnectionFailedError(KafkaConnectionError):
    """A connection to a broker could not be established."""

    description = "Could not connect to the broker"


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers could be reached."""

    description = "No bootstrap broker is reachable"


class ConfigurationError(KafkaError, ValueError):
    """A configuration value is missing, malformed or inconsistent."""

    description = "Invalid configuration"


class IllegalStateError(KafkaError):
    """The API was used in a state that does not allow it (e.g. commit without begin)."""

    description = "Operation not allowed in the current state"


class InvalidPartitionError(KafkaError, ValueError):
    """A partition given by the caller does not exist for the topic."""

    description = "Partition out of range"


class SerializationError(KafkaError):
    """A key, value or header could not be serialized."""

    description = "Serialization failed"


class CorruptResponseError(KafkaError):
    """Bytes received from a broker could not be decoded."""

    description = "Undecodable response from the broker"


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent."""

    description = "Transaction aborted"


# The protocol error table.


class ErrorSpec(NamedTuple):
    """One row of :data:`ERROR_TABLE`."""

    code: int
    name: str
    class_name: str
    retriable: bool
    invalid_metadata: bool
    description: str


# (code, CONSTANT_NAME, class name, retriable, invalid_metadata, description)
# Codes, names and flags follow Errors.java and the exception classes it maps
# to (Apache Kafka 4.4). Class names are the CamelCased constant + "Error"
# (a trailing _ERROR is not doubled), except where the Java client's
# exception name reads better: RecordTooLarge, InvalidTopic, CorruptRecord.
# fmt: off
_T, _F = True, False
_ROWS: tuple[tuple[int, str, str, bool, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerError", _F, _F,
     "The broker hit an unexpected error while handling the request"),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeError", _F, _F,
     "The requested offset is outside the range the broker holds"),
    (2, "CORRUPT_MESSAGE", "CorruptRecordError", _T, _F,
     "A record failed its CRC check, exceeded a size limit or is otherwise malformed"),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionError", _T, _T,
     "The broker does not host this topic-partition"),
    (4, "INVALID_FETCH_SIZE", "InvalidFetchSizeError", _F, _F,
     "The requested fetch size is invalid"),
    (5, "LEADER_NOT_AVAILABLE", "LeaderNotAvailableError", _T, _T,
     "The partition has no leader at the moment (election in progress)"),
    (6, "NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError", _T, _T,
     "The broker is not the leader, or not a replica, of this partition"),
    (7, "REQUEST_TIMED_OUT", "RequestTimedOutError", _T, _F,
     "The broker timed out while handling the request"),
    (8, "BROKER_NOT_AVAILABLE", "BrokerNotAvailableError", _F, _F,
     "The broker is not available"),
    (9, "REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableError", _T, _T,
     "The replica is not available for this partition"),
    (10, "MESSAGE_TOO_LARGE", "RecordTooLargeError", _F, _F,
     "The record is larger than the maximum size that will be accepted"),
    (11, "STALE_CONTROLLER_EPOCH", "StaleControllerEpochError", _F, _F,
     "The controller has moved to another broker"),
    (12, "OFFSET_METADATA_TOO_LARGE", "OffsetMetadataTooLargeError", _F, _F,
     "The metadata attached to the offset commit is too large"),
    (13, "NETWORK_EXCEPTION", "NetworkExceptionError", _T, _T,
     "The server closed the connection before sending a response"),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "CoordinatorLoadInProgressError", _T, _F,
     "The coordinator is still loading its state"),
    (15, "COORDINATOR_NOT_AVAILABLE", "CoordinatorNotAvailableError", _T, _F,
     "The coordinator is not available"),
    (16, "NOT_COORDINATOR", "NotCoordinatorError", _T, _F,
     "The broker is not the coordinator for this group or transactional id"),
    (17, "INVALID_TOPIC_EXCEPTION", "InvalidTopicError", _F, _F,
     "The topic is invalid for this operation (bad name or internal topic)"),
    (18, "RECORD_LIST_TOO_LARGE", "RecordListTooLargeError", _F, _F,
     "The record batch is larger than the topic's segment size"),
    (19, "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError", _T, _F,
     "Fewer in-sync replicas than min.insync.replicas; the records were rejected"),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendError", _T, _F,
     "The records were written, but to fewer in-sync replicas than required"),
    (21, "INVALID_REQUIRED_ACKS", "InvalidRequiredAcksError", _F, _F,
     "The acks value of the produce request is invalid"),
    (22, "ILLEGAL_GENERATION", "IllegalGenerationError", _F, _F,
     "The group generation id is not valid"),
    (23, "INCONSISTENT_GROUP_PROTOCOL", "InconsistentGroupProtocolError", _F, _F,
     "The member's protocols do not match those of the group"),
    (24, "INVALID_GROUP_ID", "InvalidGroupIdError", _F, _F,
     "The group id is invalid"),
    (25, "UNKNOWN_MEMBER_ID", "UnknownMemberIdError", _F, _F,
     "The coordinator does not know this member"),
    (26, "INVALID_SESSION_TIMEOUT", "InvalidSessionTimeoutError", _F, _F,
     "The session timeout is outside the range the broker allows"),
    (27, "REBALANCE_IN_PROGRESS", "RebalanceInProgressError", _F, _F,
     "The group is rebalancing, so the member must rejoin"),
    (28, "INVALID_COMMIT_OFFSET_SIZE", "InvalidCommitOffsetSizeError", _F, _F,
     "The offset commit data has an invalid size"),
    (29, "TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError", _F, _F,
     "Not authorized to access the topic"),
    (30, "GROUP_AUTHORIZATION_FAILED", "GroupAuthorizationFailedError", _F, _F,
     "Not authorized to access the group"),
    (31, "CLUSTER_AUTHORIZATION_FAILED", "ClusterAuthorizationFailedError", _F, _F,
     "Not authorized to perform this cluster operation"),
    (32, "INVALID_TIMESTAMP", "InvalidTimestampError", _F, _F,
     "The record timestamp is outside the accepted range"),
    (33, "UNSUPPORTED_SASL_MECHANISM", "UnsupportedSaslMechanismError", _F, _F,
     "The broker does not support the requested SASL mechanism"),
    (34, "ILLEGAL_SASL_STATE", "IllegalSaslStateError", _F, _F,
     "The request is not valid in the current SASL state"),
    (35, "UNSUPPORTED_VERSION", "UnsupportedVersionError", _F, _F,
     "The broker does not support this API version"),
    (36, "TOPIC_ALREADY_EXISTS", "TopicAlreadyExistsError", _F, _F,
     "A topic with this name already exists"),
    (37, "INVALID_PARTITIONS", "InvalidPartitionsError", _F, _F,
     "The number of partitions is invalid"),
    (38, "INVALID_REPLICATION_FACTOR", "InvalidReplicationFactorError", _F, _F,
     "The replication factor is invalid for this cluster"),
    (39, "INVALID_REPLICA_ASSIGNMENT", "InvalidReplicaAssignmentError", _F, _F,
     "The replica assignment is invalid"),
    (40, "INVALID_CONFIG", "InvalidConfigError", _F, _F,
     "The configuration is invalid"),
    (41, "NOT_CONTROLLER", "NotControllerError", _T, _F,
     "The broker is not the active controller"),
    (42, "INVALID_REQUEST", "InvalidRequestError", _F, _F,
     "The request is malformed or not valid for this broker (see the broker log)"),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "UnsupportedForMessageFormatError", _F, _F,
     "The topic's message format does not support this request"),
    (44, "POLICY_VIOLATION", "PolicyViolationError", _F, _F,
     "The request violates a policy configured on the broker"),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceNumberError", _F, _F,
     "The broker received an out-of-order sequence number"),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceNumberError", _F, _F,
     "The broker received a duplicate sequence number"),
    (47, "INVALID_PRODUCER_EPOCH", "InvalidProducerEpochError", _F, _F,
     "The producer epoch is older than the broker's"),
    (48, "INVALID_TXN_STATE", "InvalidTxnStateError", _F, _F,
     "The transactional operation is not valid in the current transaction state"),
    (49, "INVALID_PRODUCER_ID_MAPPING", "InvalidProducerIdMappingError", _F, _F,
     "The producer id is not the one assigned to this transactional id"),
    (50, "INVALID_TRANSACTION_TIMEOUT", "InvalidTransactionTimeoutError", _F, _F,
     "The transaction timeout exceeds the broker's transaction.max.timeout.ms"),
    (51, "CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsError", _T, _F,
     "Another operation on the same transaction is still in progress"),
    (52, "TRANSACTION_COORDINATOR_FENCED", "TransactionCoordinatorFencedError", _F, _F,
     "The transaction coordinator sending the marker is no longer current"),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "TransactionalIdAuthorizationFailedError", _F,
     _F, "Not authorized to use the transactional id"),
    (54, "SECURITY_DISABLED", "SecurityDisabledError", _F, _F,
     "Security features are disabled on the broker"),
    (55, "OPERATION_NOT_ATTEMPTED", "OperationNotAttemptedError", _F, _F,
     "The broker skipped this operation because another one in the batch failed"),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageError", _T, _T,
     "The broker hit a disk error while accessing the log"),
    (57, "LOG_DIR_NOT_FOUND", "LogDirNotFoundError", _F, _F,
     "The requested log directory is not configured on the broker"),
    (58, "SASL_AUTHENTICATION_FAILED", "SaslAuthenticationFailedError", _F, _F,
     "SASL authentication failed"),
    (59, "UNKNOWN_PRODUCER_ID", "UnknownProducerIdError", _F, _F,
     "The broker has no state for this producer id (its records may have expired)"),
    (60, "REASSIGNMENT_IN_PROGRESS", "ReassignmentInProgressError", _F, _F,
     "A partition reassignment is in progress"),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", "DelegationTokenAuthDisabledError", _F, _F,
     "Delegation tokens are not enabled"),
    (62, "DELEGATION_TOKEN_NOT_FOUND", "DelegationTokenNotFoundError", _F, _F,
     "The delegation token was not found"),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", "DelegationTokenOwnerMismatchError", _F, _F,
     "The principal is not the owner or a renewer of the token"),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "DelegationTokenRequestNotAllowedError", _F, _F,
     "Delegation token requests are not allowed on this kind of channel"),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "DelegationTokenAuthorizationFailedError", _F,
     _F, "Not authorized for this delegation token operation"),
    (66, "DELEGATION_TOKEN_EXPIRED", "DelegationTokenExpiredError", _F, _F,
     "The delegation token has expired"),
    (67, "INVALID_PRINCIPAL_TYPE", "InvalidPrincipalTypeError", _F, _F,
     "The principal type is not supported"),
    (68, "NON_EMPTY_GROUP", "NonEmptyGroupError", _F, _F,
     "The group still has members"),
    (69, "GROUP_ID_NOT_FOUND", "GroupIdNotFoundError", _F, _F,
     "The group does not exist"),
    (70, "FETCH_SESSION_ID_NOT_FOUND", "FetchSessionIdNotFoundError", _T, _F,
     "The fetch session id is unknown to the broker"),
    (71, "INVALID_FETCH_SESSION_EPOCH", "InvalidFetchSessionEpochError", _T, _F,
     "The fetch session epoch is invalid"),
    (72, "LISTENER_NOT_FOUND", "ListenerNotFoundError", _T, _T,
     "The leader has no listener matching the one that served the metadata"),
    (73, "TOPIC_DELETION_DISABLED", "TopicDeletionDisabledError", _F, _F,
     "Topic deletion is disabled"),
    (74, "FENCED_LEADER_EPOCH", "FencedLeaderEpochError", _T, _T,
     "The leader epoch in the request is older than the broker's"),
    (75, "UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochError", _T, _F,
     "The leader epoch in the request is newer than the broker's"),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeError", _F, _F,
     "The client does not support the compression type of the partition"),
    (77, "STALE_BROKER_EPOCH", "StaleBrokerEpochError", _F, _F,
     "The broker epoch is stale"),
    (78, "OFFSET_NOT_AVAILABLE", "OffsetNotAvailableError", _T, _F,
     "The new leader's high watermark has not caught up yet"),
    (79, "MEMBER_ID_REQUIRED", "MemberIdRequiredError", _F, _F,
     "The member must rejoin with the member id assigned by the coordinator"),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableError", _T, _T,
     "The preferred leader is not available"),
    (81, "GROUP_MAX_SIZE_REACHED", "GroupMaxSizeReachedError", _F, _F,
     "The group has reached its maximum size"),
    (82, "FENCED_INSTANCE_ID", "FencedInstanceIdError", _F, _F,
     "Another member with the same group.instance.id has replaced this one"),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableError", _T, _T,
     "No eligible leader is available for the partition"),
    (84, "ELECTION_NOT_NEEDED", "ElectionNotNeededError", _T, _T,
     "The partition does not need a leader election"),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", "NoReassignmentInProgressError", _F, _F,
     "No partition reassignment is in progress"),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", "GroupSubscribedToTopicError", _F, _F,
     "Offsets cannot be deleted for a topic the group is subscribed to"),
    (87, "INVALID_RECORD", "InvalidRecordError", _F, _F,
     "The broker rejected a record that failed its validation"),
    (88, "UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitError", _T, _F,
     "Pending transactional offsets must be resolved first"),
    (89, "THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededError", _T, _F,
     "The throttling quota has been exceeded"),
    (90, "PRODUCER_FENCED", "ProducerFencedError", _F, _F,
     "A newer producer with the same transactional id has fenced this one"),
    (91, "RESOURCE_NOT_FOUND", "ResourceNotFoundError", _F, _F,
     "The referenced resource does not exist"),
    (92, "DUPLICATE_RESOURCE", "DuplicateResourceError", _F, _F,
     "The request refers to the same resource twice"),
    (93, "UNACCEPTABLE_CREDENTIAL", "UnacceptableCredentialError", _F, _F,
     "The credential does not meet the acceptance criteria"),
    (94, "INCONSISTENT_VOTER_SET", "InconsistentVoterSetError", _F, _F,
     "The sender or receiver is not one of the expected voters"),
    (95, "INVALID_UPDATE_VERSION", "InvalidUpdateVersionError", _F, _F,
     "The update version is invalid"),
    (96, "FEATURE_UPDATE_FAILED", "FeatureUpdateFailedError", _F, _F,
     "The finalized features could not be updated"),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", "PrincipalDeserializationFailureError", _F, _F,
     "The principal of a forwarded request could not be deserialized"),
    (98, "SNAPSHOT_NOT_FOUND", "SnapshotNotFoundError", _F, _F,
     "The requested snapshot was not found"),
    (99, "POSITION_OUT_OF_RANGE", "PositionOutOfRangeError", _F, _F,
     "The requested position lies outside the snapshot"),
    (100, "UNKNOWN_TOPIC_ID", "UnknownTopicIdError", _T, _T,
     "The broker does not host this topic id"),
    (101, "DUPLICATE_BROKER_REGISTRATION", "DuplicateBrokerRegistrationError", _F, _F,
     "The broker id is already registered"),
    (102, "BROKER_ID_NOT_REGISTERED", "BrokerIdNotRegisteredError", _F, _F,
     "The broker id is not registered"),
    (103, "INCONSISTENT_TOPIC_ID", "InconsistentTopicIdError", _T, _T,
     "The topic id does not match the one in the broker's log"),
    (104, "INCONSISTENT_CLUSTER_ID", "InconsistentClusterIdError", _F, _F,
     "The cluster id does not match the server's"),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", "TransactionalIdNotFoundError", _F, _F,
     "The transactional id was not found"),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdError", _T, _F,
     "The fetch session used topic ids inconsistently"),
    (107, "INELIGIBLE_REPLICA", "IneligibleReplicaError", _F, _F,
     "The new ISR contains an ineligible replica"),
    (108, "NEW_LEADER_ELECTED", "NewLeaderElectedError", _F, _F,
     "The partition state was updated, but the leader has changed"),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", "OffsetMovedToTieredStorageError", _F, _F,
     "The requested offset has moved to tiered storage"),
    (110, "FENCED_MEMBER_EPOCH", "FencedMemberEpochError", _F, _F,
     "The member epoch is fenced; the member must rejoin"),
    (111, "UNRELEASED_INSTANCE_ID", "UnreleasedInstanceIdError", _F, _F,
     "The instance id is still held by another member"),
    (112, "UNSUPPORTED_ASSIGNOR", "UnsupportedAssignorError", _F, _F,
     "The group does not support this assignor or version"),
    (113, "STALE_MEMBER_EPOCH", "StaleMemberEpochError", _F, _F,
     "The member epoch is stale"),
    (114, "MISMATCHED_ENDPOINT_TYPE", "MismatchedEndpointTypeError", _F, _F,
     "The request reached an endpoint of the wrong type"),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", "UnsupportedEndpointTypeError", _F, _F,
     "This endpoint type is not supported"),
    (116, "UNKNOWN_CONTROLLER_ID", "UnknownControllerIdError", _F, _F,
     "The controller id is unknown"),
    (117, "UNKNOWN_SUBSCRIPTION_ID", "UnknownSubscriptionIdError", _F, _F,
     "The telemetry subscription id is unknown or outdated"),
    (118, "TELEMETRY_TOO_LARGE", "TelemetryTooLargeError", _F, _F,
     "The telemetry push is larger than the broker accepts"),
    (119, "INVALID_REGISTRATION", "InvalidRegistrationError", _F, _F,
     "The controller considers the broker registration invalid"),
    (120, "TRANSACTION_ABORTABLE", "TransactionAbortableError", _F, _F,
     "The transaction failed; abort it to keep using the transactional id"),
    (121, "INVALID_RECORD_STATE", "InvalidRecordStateError", _F, _F,
     "The record state does not allow the acknowledgement"),
    (122, "SHARE_SESSION_NOT_FOUND", "ShareSessionNotFoundError", _T, _F,
     "The share session was not found"),
    (123, "INVALID_SHARE_SESSION_EPOCH", "InvalidShareSessionEpochError", _T, _F,
     "The share session epoch is invalid"),
    (124, "FENCED_STATE_EPOCH", "FencedStateEpochError", _F, _F,
     "The share-group state epoch does not match"),
    (125, "INVALID_VOTER_KEY", "InvalidVoterKeyError", _F, _F,
     "The voter key does not match the receiving replica"),
    (126, "DUPLICATE_VOTER", "DuplicateVoterError", _F, _F,
     "The voter is already in the voter set"),
    (127, "VOTER_NOT_FOUND", "VoterNotFoundError", _F, _F,
     "The voter is not in the voter set"),
    (128, "INVALID_REGULAR_EXPRESSION", "InvalidRegularExpressionError", _F, _F,
     "The regular expression is invalid"),
    # KIP-1102: the broker tells the client its metadata is beyond repair.
    (129, "REBOOTSTRAP_REQUIRED", "RebootstrapRequiredError", _F, _F,
     "The client's metadata is stale; it must rebootstrap"),
    # KIP-1071 (streams groups).
    (130, "STREAMS_INVALID_TOPOLOGY", "StreamsInvalidTopologyError", _F, _F,
     "The streams topology is invalid"),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", "StreamsInvalidTopologyEpochError", _F, _F,
     "The streams topology epoch is invalid"),
    (132, "STREAMS_TOPOLOGY_FENCED", "StreamsTopologyFencedError", _F, _F,
     "The streams topology epoch is outdated"),
    (133, "SHARE_SESSION_LIMIT_REACHED", "ShareSessionLimitReachedError", _T, _F,
     "No more share sessions can be opened"),
    # Added in Kafka 4.4 (KIP-1331 and controller unregistration).
    (134, "GROUP_DELETION_FAILED", "GroupDeletionFailedError", _F, _F,
     "The group could not be deleted"),
    (135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
     "StreamsTopologyDescriptionUpdateFailedError", _F, _F,
     "The streams topology description could not be stored"),
    (136, "CONTROLLER_ID_NOT_REGISTERED", "ControllerIdNotRegisteredError", _F, _F,
     "The controller id is not registered"),
)
# fmt: on

#: Every known protocol error code, in code order (0/NONE is not an error).
ERROR_TABLE: tuple[ErrorSpec, ...] = tuple(ErrorSpec(*row) for row in _ROWS)
del _ROWS, _T, _F

_BY_CODE: dict[int, type[BrokerResponseError]] = {}
#: Read-only view of code -> class for every code in :data:`ERROR_TABLE`.
ERROR_CODES: Mapping[int, type[BrokerResponseError]] = MappingProxyType(_BY_CODE)


def _make_class(spec: ErrorSpec) -> type[BrokerResponseError]:
    namespace = {
        "__module__": __name__,
        "__qualname__": spec.class_name,
        "__doc__": f"{spec.description} ({spec.name}, code {spec.code}).",
        "code": spec.code,
        "error_name": spec.name,
        "retriable": spec.retriable,
        "invalid_metadata": spec.invalid_metadata,
        "description": spec.description,
    }
    return type(spec.class_name, (BrokerResponseError,), namespace)


def _register_table() -> None:
    module_globals = globals()
    for spec in ERROR_TABLE:
        if spec.code in _BY_CODE or spec.code == 0:
            raise RuntimeError(f"error code {spec.code} is listed twice or is NONE")
        if spec.class_name in module_globals:
            raise RuntimeError(f"class name {spec.class_name} clashes with an existing name")
        cls = _make_class(spec)
        _BY_CODE[spec.code] = cls
        module_globals[spec.class_name] = cls
        __all__.append(spec.class_name)


_register_table()

# Codes newer than this table get a class of their own, built once per code.
# They subclass UnknownServerError because Java's Errors.forCode falls back to
# UNKNOWN_SERVER_ERROR for codes it does not know, and they are not retriable.
_UNKNOWN_BY_CODE: dict[int, type[BrokerResponseError]] = {}
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1


def _restore_unknown(code: int, message: str | None) -> BrokerResponseError:
    """Unpickle an error for an unknown code (its class lives only in the cache)."""
    return error_for_code(code)(message)


def _reduce_unknown(self: BrokerResponseError) -> tuple[object, tuple[object, ...]]:
    return (_restore_unknown, (self.code, self.message))


def _unknown_error_class(code: int) -> type[BrokerResponseError]:
    if not _INT16_MIN <= code <= _INT16_MAX:
        raise ValueError(f"error code {code} is outside the int16 range")
    cls = _UNKNOWN_BY_CODE.get(code)
    if cls is None:
        name = f"UnknownBrokerErrorCode{code}" if code >= 0 else f"UnknownBrokerErrorCodeNeg{-code}"
        namespace = {
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": f"Error code {code}, unknown to this client.",
            "code": code,
            "error_name": None,
            "retriable": False,
            "invalid_metadata": False,
            "description": "The broker returned an error code unknown to this client",
            "__reduce__": _reduce_unknown,
        }
        cls = _UNKNOWN_BY_CODE.setdefault(code, type(name, (_BY_CODE[-1],), namespace))
    return cls


def error_for_code(code: int) -> type[BrokerResponseError]:
    """Return the exception class for a non-zero broker error code.

    Raises ValueError for 0 (``NONE`` means success) and for values outside
    the int16 range. Codes missing from :data:`ERROR_TABLE` map to a cached,
    non-retriable subclass of ``UnknownServerError`` that carries the code.
    """
    if code == 0:
        raise ValueError("error code 0 (NONE) means success, not an error")
    cls = _BY_CODE.get(code)
    return cls if cls is not None else _unknown_error_class(code)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for ``code`` with ``message``; do nothing for 0."""
    if code != 0:
        raise error_for_code(code)(message)


if TYPE_CHECKING:
    # Static declarations for type checkers, which cannot see the classes
    # generated above. The most used ones get a real class; the rest resolve
    # through the module ``__getattr__`` (never called at runtime, where every
    # name is a real global). tests/unit/test_errors.py keeps these in sync.
    # fmt: off
    class UnknownServerError(BrokerResponseError): ...
    class CorruptRecordError(BrokerResponseError): ...
    class UnknownTopicOrPartitionError(BrokerResponseError): ...
    class LeaderNotAvailableError(BrokerResponseError): ...
    class NotLeaderOrFollowerError(BrokerResponseError): ...
    class RequestTimedOutError(BrokerResponseError): ...
    class BrokerNotAvailableError(BrokerResponseError): ...
    class RecordTooLargeError(BrokerResponseError): ...
    class NetworkExceptionError(BrokerResponseError): ...
    class CoordinatorLoadInProgressError(BrokerResponseError): ...
    class CoordinatorNotAvailableError(BrokerResponseError): ...
    class NotCoordinatorError(BrokerResponseError): ...
    class InvalidTopicError(BrokerResponseError): ...
    class RecordListTooLargeError(BrokerResponseError): ...
    class NotEnoughReplicasError(BrokerResponseError): ...
    class NotEnoughReplicasAfterAppendError(BrokerResponseError): ...
    class InvalidRequiredAcksError(BrokerResponseError): ...
    class TopicAuthorizationFailedError(BrokerResponseError): ...
    class GroupAuthorizationFailedError(BrokerResponseError): ...
    class ClusterAuthorizationFailedError(BrokerResponseError): ...
    class InvalidTimestampError(BrokerResponseError): ...
    class UnsupportedVersionError(BrokerResponseError): ...
    class InvalidRequestError(BrokerResponseError): ...
    class UnsupportedForMessageFormatError(BrokerResponseError): ...
    class OutOfOrderSequenceNumberError(BrokerResponseError): ...
    class DuplicateSequenceNumberError(BrokerResponseError): ...
    class InvalidProducerEpochError(BrokerResponseError): ...
    class InvalidTxnStateError(BrokerResponseError): ...
    class InvalidProducerIdMappingError(BrokerResponseError): ...
    class InvalidTransactionTimeoutError(BrokerResponseError): ...
    class ConcurrentTransactionsError(BrokerResponseError): ...
    class TransactionCoordinatorFencedError(BrokerResponseError): ...
    class TransactionalIdAuthorizationFailedError(BrokerResponseError): ...
    class KafkaStorageError(BrokerResponseError): ...
    class SaslAuthenticationFailedError(BrokerResponseError): ...
    class UnknownProducerIdError(BrokerResponseError): ...
    class IllegalGenerationError(BrokerResponseError): ...
    class UnknownMemberIdError(BrokerResponseError): ...
    class FencedInstanceIdError(BrokerResponseError): ...
    class FencedLeaderEpochError(BrokerResponseError): ...
    class UnknownLeaderEpochError(BrokerResponseError): ...
    class UnsupportedCompressionTypeError(BrokerResponseError): ...
    class InvalidRecordError(BrokerResponseError): ...
    class ThrottlingQuotaExceededError(BrokerResponseError): ...
    class ProducerFencedError(BrokerResponseError): ...
    class UnknownTopicIdError(BrokerResponseError): ...
    class InconsistentTopicIdError(BrokerResponseError): ...
    class TransactionAbortableError(BrokerResponseError): ...
    class RebootstrapRequiredError(BrokerResponseError): ...
    # fmt: on

    def __getattr__(name: str) -> type[BrokerResponseError]: ...
