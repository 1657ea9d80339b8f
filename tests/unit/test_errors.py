"""Tests for aioproducer.errors: the protocol error table and the client errors."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

from aioproducer import errors
from aioproducer.errors import (
    ERROR_CODES,
    ERROR_TABLE,
    BrokerResponseError,
    ConfigurationError,
    ConnectionFailedError,
    ConnectionLostError,
    CorruptResponseError,
    IllegalStateError,
    InvalidPartitionError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    ProducerClosedError,
    SerializationError,
    error_for_code,
    raise_for_code,
)

# Checked by hand against Errors.java and the exception hierarchy under
# clients/src/main/java/org/apache/kafka/common/errors (RetriableException,
# InvalidMetadataException), plus the 4.x javadoc for codes 129-136.
# (code, CONSTANT_NAME, class name, retriable, invalid_metadata)
SAMPLE = [
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerError", False, False),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeError", False, False),
    (2, "CORRUPT_MESSAGE", "CorruptRecordError", True, False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionError", True, True),
    (5, "LEADER_NOT_AVAILABLE", "LeaderNotAvailableError", True, True),
    (6, "NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError", True, True),
    (7, "REQUEST_TIMED_OUT", "RequestTimedOutError", True, False),
    (8, "BROKER_NOT_AVAILABLE", "BrokerNotAvailableError", False, False),
    (9, "REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableError", True, True),
    (10, "MESSAGE_TOO_LARGE", "RecordTooLargeError", False, False),
    (13, "NETWORK_EXCEPTION", "NetworkExceptionError", True, True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "CoordinatorLoadInProgressError", True, False),
    (15, "COORDINATOR_NOT_AVAILABLE", "CoordinatorNotAvailableError", True, False),
    (16, "NOT_COORDINATOR", "NotCoordinatorError", True, False),
    (17, "INVALID_TOPIC_EXCEPTION", "InvalidTopicError", False, False),
    (18, "RECORD_LIST_TOO_LARGE", "RecordListTooLargeError", False, False),
    (19, "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError", True, False),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendError", True, False),
    (29, "TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError", False, False),
    (35, "UNSUPPORTED_VERSION", "UnsupportedVersionError", False, False),
    (41, "NOT_CONTROLLER", "NotControllerError", True, False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceNumberError", False, False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceNumberError", False, False),
    (47, "INVALID_PRODUCER_EPOCH", "InvalidProducerEpochError", False, False),
    (48, "INVALID_TXN_STATE", "InvalidTxnStateError", False, False),
    (49, "INVALID_PRODUCER_ID_MAPPING", "InvalidProducerIdMappingError", False, False),
    (51, "CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsError", True, False),
    (
        53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "TransactionalIdAuthorizationFailedError",
        False,
        False,
    ),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageError", True, True),
    (59, "UNKNOWN_PRODUCER_ID", "UnknownProducerIdError", False, False),
    (72, "LISTENER_NOT_FOUND", "ListenerNotFoundError", True, True),
    (74, "FENCED_LEADER_EPOCH", "FencedLeaderEpochError", True, True),
    # Java: "Clients need not refresh metadata before retrying".
    (75, "UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochError", True, False),
    (78, "OFFSET_NOT_AVAILABLE", "OffsetNotAvailableError", True, False),
    (84, "ELECTION_NOT_NEEDED", "ElectionNotNeededError", True, True),
    (87, "INVALID_RECORD", "InvalidRecordError", False, False),
    (88, "UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitError", True, False),
    (89, "THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededError", True, False),
    (90, "PRODUCER_FENCED", "ProducerFencedError", False, False),
    (100, "UNKNOWN_TOPIC_ID", "UnknownTopicIdError", True, True),
    (103, "INCONSISTENT_TOPIC_ID", "InconsistentTopicIdError", True, True),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdError", True, False),
    (120, "TRANSACTION_ABORTABLE", "TransactionAbortableError", False, False),
    (122, "SHARE_SESSION_NOT_FOUND", "ShareSessionNotFoundError", True, False),
    (128, "INVALID_REGULAR_EXPRESSION", "InvalidRegularExpressionError", False, False),
    (129, "REBOOTSTRAP_REQUIRED", "RebootstrapRequiredError", False, False),
    (133, "SHARE_SESSION_LIMIT_REACHED", "ShareSessionLimitReachedError", True, False),
    (136, "CONTROLLER_ID_NOT_REGISTERED", "ControllerIdNotRegisteredError", False, False),
]

# Complete sets: the Java classes under RetriableException / InvalidMetadataException.
RETRIABLE_CODES = {
    2,
    3,
    5,
    6,
    7,
    9,
    13,
    14,
    15,
    16,
    19,
    20,
    41,
    51,
    56,
    70,
    71,
    72,
    74,
    75,
    78,
    80,
    83,
    84,
    88,
    89,
    100,
    103,
    106,
    122,
    123,
    133,
}
INVALID_METADATA_CODES = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}

# Names chosen on purpose instead of the CamelCased constant.
NAME_OVERRIDES = {
    "MESSAGE_TOO_LARGE": "RecordTooLargeError",
    "INVALID_TOPIC_EXCEPTION": "InvalidTopicError",
    "CORRUPT_MESSAGE": "CorruptRecordError",
    "SASL_AUTHENTICATION_FAILED": "SaslAuthenticationError",
}


@pytest.mark.parametrize(("code", "name", "class_name", "retriable", "invalid_metadata"), SAMPLE)
def test_sample_codes(
    code: int, name: str, class_name: str, retriable: bool, invalid_metadata: bool
) -> None:
    cls = error_for_code(code)
    assert cls.__name__ == class_name
    assert getattr(errors, class_name) is cls
    assert cls.code == code
    assert cls.error_name == name
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata
    assert issubclass(cls, BrokerResponseError)


def test_table_covers_every_code_from_minus_one_to_136() -> None:
    codes = [spec.code for spec in ERROR_TABLE]
    assert codes == sorted(codes)
    assert set(codes) == set(range(-1, 137)) - {0}
    assert len(ERROR_TABLE) == 137
    assert dict(ERROR_CODES) == {
        spec.code: getattr(errors, spec.class_name) for spec in ERROR_TABLE
    }


def test_codes_constants_and_class_names_are_unique() -> None:
    for field in ("code", "name", "class_name"):
        values = [getattr(spec, field) for spec in ERROR_TABLE]
        assert len(values) == len(set(values)), field
    client_side = {n for n in errors.__all__ if n not in {s.class_name for s in ERROR_TABLE}}
    assert not client_side & {spec.class_name for spec in ERROR_TABLE}


def test_flags_match_java_hierarchy() -> None:
    assert {s.code for s in ERROR_TABLE if s.retriable} == RETRIABLE_CODES
    assert {s.code for s in ERROR_TABLE if s.invalid_metadata} == INVALID_METADATA_CODES
    # InvalidMetadataException extends RetriableException.
    assert INVALID_METADATA_CODES <= RETRIABLE_CODES


def test_class_names_follow_the_naming_rule() -> None:
    for spec in ERROR_TABLE:
        expected = NAME_OVERRIDES.get(spec.name)
        if expected is None:
            stem = spec.name.removesuffix("_ERROR")
            expected = "".join(part.capitalize() for part in stem.split("_")) + "Error"
        assert spec.class_name == expected, spec
        assert spec.class_name.isidentifier()


def test_descriptions_are_short_sentences_without_final_period() -> None:
    for spec in ERROR_TABLE:
        assert spec.description and len(spec.description) <= 90, spec
        assert spec.description[0].isupper() and not spec.description.endswith("."), spec


def test_every_table_class_is_exported() -> None:
    exported = set(errors.__all__)
    assert len(exported) == len(errors.__all__)
    for spec in ERROR_TABLE:
        assert spec.class_name in exported
    for name in errors.__all__:
        assert hasattr(errors, name), name
    namespace: dict[str, object] = {}
    exec("from aioproducer.errors import *", namespace)  # noqa: S102 - star-import check
    assert {spec.class_name for spec in ERROR_TABLE} <= namespace.keys()


def test_direct_imports() -> None:
    from aioproducer.errors import (
        InvalidProducerEpochError,
        InvalidTopicError,
        NotLeaderOrFollowerError,
        ProducerFencedError,
        RecordTooLargeError,
        UnsupportedVersionError,
    )

    assert NotLeaderOrFollowerError.code == 6
    assert RecordTooLargeError.code == 10
    assert InvalidTopicError.code == 17
    assert UnsupportedVersionError.code == 35
    assert InvalidProducerEpochError.code == 47
    assert ProducerFencedError.code == 90


def test_static_declarations_match_the_table() -> None:
    """The TYPE_CHECKING stubs must name real table classes."""
    tree = ast.parse(Path(errors.__file__).read_text())
    stubs: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            stubs += [n.name for n in node.body if isinstance(n, ast.ClassDef)]
    assert len(stubs) > 20
    table_names = {spec.class_name for spec in ERROR_TABLE}
    assert set(stubs) <= table_names
    assert len(stubs) == len(set(stubs))


def test_generated_classes_are_module_members() -> None:
    cls = errors.NotLeaderOrFollowerError
    assert cls.__module__ == "aioproducer.errors"
    assert cls.__qualname__ == "NotLeaderOrFollowerError"
    assert "NOT_LEADER_OR_FOLLOWER" in (cls.__doc__ or "")


# ---------------------------------------------------------------- lookups


def test_error_for_code_zero_is_rejected() -> None:
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)


@pytest.mark.parametrize("code", [137, 500, 32767, -2, -32768])
def test_unknown_codes(code: int) -> None:
    cls = error_for_code(code)
    assert cls is error_for_code(code)  # cached
    assert cls.code == code
    assert cls.retriable is False
    assert cls.invalid_metadata is False
    assert issubclass(cls, BrokerResponseError)
    # Java falls back to UNKNOWN_SERVER_ERROR for codes it does not know.
    assert issubclass(cls, errors.UnknownServerError)
    assert cls is not errors.UnknownServerError
    assert re.fullmatch(r"UnknownBrokerErrorCode(Neg)?\d+", cls.__name__)
    assert cls.__name__.isidentifier()
    assert code not in ERROR_CODES
    assert not hasattr(errors, cls.__name__)
    err = cls("boom")
    assert str(code) in str(err) and "boom" in str(err)


def test_unknown_code_names() -> None:
    assert error_for_code(200).__name__ == "UnknownBrokerErrorCode200"
    assert error_for_code(-7).__name__ == "UnknownBrokerErrorCodeNeg7"


@pytest.mark.parametrize("code", [32768, -32769, 10**6])
def test_codes_outside_int16_are_rejected(code: int) -> None:
    with pytest.raises(ValueError, match="int16"):
        error_for_code(code)


def test_raise_for_code() -> None:
    raise_for_code(0)
    raise_for_code(0, "ignored")
    with pytest.raises(errors.NotLeaderOrFollowerError) as info:
        raise_for_code(6, "topic-0 moved")
    assert info.value.message == "topic-0 moved"
    assert info.value.code == 6
    with pytest.raises(errors.UnknownServerError) as unknown:
        raise_for_code(999)
    assert unknown.value.code == 999
    assert unknown.value.message is None


# ---------------------------------------------------------------- instances


def test_flags_readable_on_instances() -> None:
    err = errors.NotLeaderOrFollowerError("x")
    assert err.retriable and err.invalid_metadata and err.code == 6
    assert KafkaError().retriable is False and KafkaError().code is None


def test_str_contains_description_name_code_and_message() -> None:
    text = str(errors.NotLeaderOrFollowerError("partition t-3"))
    assert "not the leader" in text
    assert "NOT_LEADER_OR_FOLLOWER" in text
    assert "6" in text
    assert text.endswith(": partition t-3")
    bare = str(errors.UnsupportedVersionError())
    assert "API version" in bare and "UNSUPPORTED_VERSION" in bare and "35" in bare
    assert not bare.endswith(":")


def test_str_of_client_errors() -> None:
    assert str(ConfigurationError("linger_ms must be >= 0")) == (
        "Invalid configuration: linger_ms must be >= 0"
    )
    assert str(ProducerClosedError()) == "The producer is closed"
    # A message that states the description already is not prefixed with it again.
    assert str(ProducerClosedError("the producer is closed")) == "the producer is closed"
    assert str(KafkaError()) == ""
    assert str(KafkaError("plain")) == "plain"
    assert str(KafkaTimeoutError()) == "Timed out"


def test_repr_and_args() -> None:
    err = errors.RecordTooLargeError("record of 2 MB")
    assert repr(err) == "RecordTooLargeError('record of 2 MB')"
    assert err.args == ("record of 2 MB",)
    assert errors.RecordTooLargeError().args == ()


def test_client_side_use_of_broker_classes() -> None:
    """RecordTooLargeError / InvalidTopicError are also raised by the client itself."""
    with pytest.raises(errors.RecordTooLargeError, match="max.request.size"):
        raise errors.RecordTooLargeError("record exceeds max.request.size")
    with pytest.raises(errors.InvalidTopicError, match="bad name"):
        raise errors.InvalidTopicError("bad name")


@pytest.mark.parametrize(
    "err",
    [
        errors.NotLeaderOrFollowerError("m"),
        errors.UnsupportedVersionError(),
        ConfigurationError("bad"),
        ConnectionLostError("gone"),
        KafkaTimeoutError(),
    ],
)
def test_pickle_round_trip(err: KafkaError) -> None:
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is type(err)
    assert clone.message == err.message
    assert str(clone) == str(err)


def test_pickle_unknown_code() -> None:
    err = error_for_code(777)("later")
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is type(err)
    assert clone.code == 777 and clone.message == "later"


# ---------------------------------------------------------------- hierarchy


def test_client_side_errors_have_no_code() -> None:
    for cls in (
        KafkaTimeoutError,
        ProducerClosedError,
        KafkaConnectionError,
        ConnectionLostError,
        ConnectionFailedError,
        NoBrokersAvailableError,
        ConfigurationError,
        IllegalStateError,
        InvalidPartitionError,
        SerializationError,
        CorruptResponseError,
    ):
        assert issubclass(cls, KafkaError)
        assert not issubclass(cls, BrokerResponseError)
        assert cls.code is None
        assert cls.description


def test_client_side_flags() -> None:
    assert KafkaTimeoutError.retriable and not KafkaTimeoutError.invalid_metadata
    for cls in (
        KafkaConnectionError,
        ConnectionLostError,
        ConnectionFailedError,
        NoBrokersAvailableError,
    ):
        assert cls.retriable and cls.invalid_metadata
    plain: type[KafkaError]
    for plain in (
        ProducerClosedError,
        ConfigurationError,
        IllegalStateError,
        InvalidPartitionError,
        SerializationError,
        CorruptResponseError,
    ):
        assert not plain.retriable and not plain.invalid_metadata


def test_isinstance_relations() -> None:
    assert isinstance(ConfigurationError("x"), ValueError)
    assert isinstance(InvalidPartitionError("x"), ValueError)
    assert not isinstance(IllegalStateError("x"), ValueError)
    assert isinstance(ConnectionLostError(), KafkaConnectionError)
    assert isinstance(ConnectionFailedError(), KafkaConnectionError)
    assert isinstance(NoBrokersAvailableError(), KafkaConnectionError)
    assert isinstance(errors.NotLeaderOrFollowerError(), KafkaError)
    assert errors.UnsupportedVersionError is error_for_code(35)
    # Broker request timeouts and client timeouts are distinct on purpose.
    assert not issubclass(errors.RequestTimedOutError, KafkaTimeoutError)
    # ValueError is caught by a plain ``except ValueError`` too.
    with pytest.raises(ValueError):
        raise ConfigurationError("bad acks")
    with pytest.raises(KafkaError):
        raise error_for_code(47)("old epoch")
