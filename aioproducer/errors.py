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

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, NamedTuple

__all__ = [
    "ERROR_CODES",
    "ERROR_TABLE",
    "BrokerResponseError",
    "CallCancelledError",
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
    "ProducerLoopError",
    "SerializationError",
    "SslError",
    "TransactionAbortedError",
    "TransactionNotCompletedError",
    "error_for_code",
    "is_authentication_failure",
    "missing_extra",
    "raise_for_code",
]  # the generated broker error classes are appended below


class KafkaError(Exception):
    """Root of every error raised by aioproducer.

    An error that fails a record's future (a delivery error) says whether the
    record may be in the log anyway: ``may_have_been_written`` is False when it
    certainly is not (it failed before its request left, or the broker refused
    that very request), True when it may be (its request timed out in flight or
    its connection dropped after sending; or it was written in a transaction
    that is then aborted, so no ``read_committed`` consumer sees it). A caller
    may retry a record with False without risking a duplicate. Errors raised by
    a call rather than set on a record's future leave it None.
    """

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False
    code: ClassVar[int | None] = None
    #: Kafka's constant name for ``code``, e.g. ``"NOT_LEADER_OR_FOLLOWER"``.
    error_name: ClassVar[str | None] = None
    #: Short fixed text; ``str()`` combines it with the per-instance message.
    description: ClassVar[str] = ""
    #: On a delivery error: whether the broker may hold the record (see above).
    may_have_been_written: bool | None = None

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
            if self.message and head.lower() in self.message.lower():
                return f"{self.message} ({tag})"
            head = f"{head} ({tag})"
        elif self.message and head.lower() in self.message.lower():
            return self.message  # it says the description already: not twice
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


class TransactionNotCompletedError(IllegalStateError):
    """A transaction could not be committed or aborted as asked.

    From ``complete_transaction``: the prepared transaction is gone (a newer
    producer with the same ``transactional_id`` fenced it, aborting it; the
    coordinator aborted it after ``transaction_timeout_ms``; or it already
    ended the other way). From ``close()``: no coordinator answered in time, so
    the transaction is left to the coordinator's timeout. Not retriable.
    """

    description = "The transaction was not completed"


class ProducerLoopError(IllegalStateError, RuntimeError):
    """The producer was used from an event loop other than the one that started it.

    A producer's connections, tasks and futures belong to one event loop.
    Raised before anything is buffered: the call had no effect, and retrying
    it on the same loop fails the same way (not retriable). Also a
    ``RuntimeError``, as asyncio's own "attached to a different loop" error is.
    """

    description = "The producer belongs to another event loop"


class InvalidPartitionError(KafkaError, ValueError):
    """A partition given by the caller does not exist for the topic."""

    description = "Partition out of range"


class SerializationError(KafkaError):
    """A key, value or header could not be serialized."""

    description = "Serialization failed"


class CorruptResponseError(KafkaError):
    """Bytes received from a broker could not be decoded."""

    description = "Undecodable response from the broker"


class SslError(KafkaError):
    """The TLS handshake with a broker failed: its certificate did not verify
    (unknown CA, hostname mismatch, expired) or it refused ours.

    Not retriable: like Java's ``SslAuthenticationException``, trying again
    with the same settings meets the same certificate.
    """

    description = "TLS handshake failed"


class TransactionAbortedError(KafkaError):
    """The record's transaction failed or was aborted: no ``read_committed`` reader sees it.

    Before the record was sent (``may_have_been_written`` False), or after: its
    acknowledgement came once the transaction had failed or was being aborted,
    and the abort marker voids it (True).
    """

    description = "Transaction aborted"


class CallCancelledError(KafkaError):
    """The call was cancelled before the record was buffered (a record of a bulk call).

    The record was not sent: sending it again makes no duplicate.
    """

    description = "The call was cancelled before the record was buffered"
    may_have_been_written = False


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
# exception name reads better: RecordTooLarge, InvalidTopic, CorruptRecord,
# SaslAuthentication (Java's SaslAuthenticationException).
from .protocol.error_codes import ROWS as _ROWS

#: Every known protocol error code, in code order (0/NONE is not an error).
ERROR_TABLE: tuple[ErrorSpec, ...] = tuple(ErrorSpec(*row) for row in _ROWS)
del _ROWS

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


# UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED.
_AUTHENTICATION_CODES = frozenset({33, 34, 58})


def is_authentication_failure(exc: BaseException) -> bool:
    """True for the errors that end a connection attempt for good (Java's
    ``AuthenticationException``): a TLS or SASL failure, an unsupported mechanism.

    Retrying with the same settings meets the same refusal, so the client
    reports them at once instead of backing off until a timeout.
    """
    return isinstance(exc, SslError) or getattr(exc, "code", None) in _AUTHENTICATION_CODES


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
    class SaslAuthenticationError(BrokerResponseError): ...
    class UnsupportedSaslMechanismError(BrokerResponseError): ...
    class IllegalSaslStateError(BrokerResponseError): ...
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


def delivery_error(exc: BaseException, may_have_been_written: bool) -> BaseException:
    """``exc`` as the error of records that may (or certainly do not) sit in the log.

    One error object may fail many batches (an abort, a forced close): a batch
    whose answer differs from the one already set gets a copy of its own.
    """
    known = getattr(exc, "may_have_been_written", None)
    if known is not None and known != may_have_been_written:
        try:
            twin = copy.copy(exc)
        except Exception:  # noqa: BLE001 - an exception that cannot be copied: a plain one says it
            twin = KafkaError(str(exc))
        twin.__cause__ = exc.__cause__  # not part of what copy carries over
        exc = twin
    try:
        # setattr: BaseException declares no such attribute, yet any instance takes one.
        setattr(exc, "may_have_been_written", may_have_been_written)  # noqa: B010
    except AttributeError:  # an exception type with __slots__: wrapped instead
        wrapped = KafkaError(str(exc))
        wrapped.may_have_been_written = may_have_been_written
        wrapped.__cause__ = exc
        exc = wrapped
    return exc


def missing_extra(module: str, package: str, extra: str) -> ImportError:
    """The error a module behind an optional extra raises when its dependency is absent.

    The exporters (``aioproducer.telemetry``) and the web integrations
    (``aioproducer.integrations``) raise it at import, naming what to install.
    """
    return ImportError(
        f"{module} needs the {package!r} package: pip install 'aioproducer[{extra}]'"
    )
