"""Whether a failed produce attempt is retried: a pure function of its inputs.

The sender hands every batch outcome to :func:`classify`; the answer says what
to do (complete, retry after a backoff, or fail) and whether the metadata is
stale. Nothing here touches a clock, a future or a socket, so the whole policy
is covered by a table-driven test.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import errors

if TYPE_CHECKING:
    from .batch import ProducerBatch

__all__ = [
    "Action",
    "Outcome",
    "RetryConfig",
    "Written",
    "classify",
    "expired_in_flight",
    "expiry_error",
    "retry_backoff",
    "written_after",
]


class Action(enum.Enum):
    COMPLETE = "complete"
    RETRY = "retry"
    FAIL = "fail"
    SPLIT = "split"  # refused as too large: retry its records in smaller batches (KIP-126)


class Written(enum.Enum):
    """What a Produce answer says about whether the leader appended the batch."""

    MAYBE = "maybe"  # the leader may hold it: its sequence may have landed
    NO = "no"  # refused before the append; an earlier attempt may still have landed
    REFUSED_SEQUENCE = "refused sequence"  # the broker checked this very stamping: not held

    @property
    def maybe_written(self) -> bool | None:
        """What :meth:`ProducerBatch.answered` records: True when the broker may hold
        the batch, False when it checked this very stamping and refused it (KIP-360),
        None when the answer says neither."""
        if self is Written.MAYBE:
            return True
        return False if self is Written.REFUSED_SEQUENCE else None


# Answers the leader can give *after* appending the batch (Kafka's
# ReplicaManager.appendRecords, then DelayedProduce for acks=all): the batch may
# be in the log although the request failed, so its sequence may have landed.
_MAYBE_WRITTEN: dict[int | None, str] = {
    errors.RequestTimedOutError.code: "appended; acks=all timed out waiting for the replicas",
    errors.NetworkExceptionError.code: "the broker may have handled it before the connection broke",
    errors.NotEnoughReplicasAfterAppendError.code: "appended; the ISR shrank before it was replicated",
    errors.NotLeaderOrFollowerError.code: (
        "appended, then leadership moved before acks=all completed (DelayedProduce)"
    ),
    errors.KafkaStorageError.code: "the log directory failed, possibly after the append",
    errors.UnknownServerError.code: "an unexpected failure anywhere in the append path",
}
# Answers given by checks made before anything is appended.
_NOT_WRITTEN: dict[int | None, str] = {
    errors.NotEnoughReplicasError.code: "min.insync.replicas is checked before the append",
    errors.CorruptRecordError.code: "validated before the append",
    errors.RecordTooLargeError.code: "validated before the append",
    errors.RecordListTooLargeError.code: "validated before the append",
    errors.InvalidRecordError.code: "validated before the append",
    errors.InvalidTimestampError.code: "validated before the append",
    errors.InvalidRequiredAcksError.code: "validated before the append",
    errors.UnknownTopicOrPartitionError.code: "the replica is looked up before the append",
    errors.InvalidProducerEpochError.code: "the producer state is checked before the append",
    errors.TopicAuthorizationFailedError.code: "authorization comes first",
    errors.ClusterAuthorizationFailedError.code: "authorization comes first",
    errors.TransactionalIdAuthorizationFailedError.code: "authorization comes first",
    errors.UnsupportedVersionError.code: "the request was not handled",
    errors.UnsupportedForMessageFormatError.code: "validated before the append",
    errors.PolicyViolationError.code: "validated before the append",
    errors.InvalidTxnStateError.code: "the transaction is checked before the append",
}
# The broker compared this batch's sequence with its producer state and
# refused it: nothing written under this stamping (KIP-360).
_SEQUENCE_REFUSED = frozenset(
    {errors.OutOfOrderSequenceNumberError.code, errors.UnknownProducerIdError.code}
)


def written_after(code: int | None) -> Written:
    """Whether the batch may be in the log after an attempt answered ``code``.

    ``None`` stands for no answer at all (connection lost, request timed out on
    the client): the broker may have appended it. An unlisted code counts as
    MAYBE, the safe side: an idempotent producer then never renumbers the batch.
    """
    if code in _SEQUENCE_REFUSED:
        return Written.REFUSED_SEQUENCE
    if code in _NOT_WRITTEN:
        return Written.NO
    return Written.MAYBE


@dataclass(frozen=True, slots=True)
class RetryConfig:
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    error: BaseException | None = None
    refresh_metadata: bool = False
    backoff: float = 0.0  # seconds, for RETRY
    # The sequence state can no longer be trusted: get a new epoch first (KIP-360).
    bump_epoch: bool = False


def retry_backoff(attempts: int, base_ms: int, max_ms: int, rand: float) -> float:
    """Seconds to wait before retry number ``attempts + 1`` (KIP-580).

    Grows exponentially from ``retry_backoff_ms`` to ``retry_backoff_max_ms``
    with +/-20% jitter (``rand`` uniform in [0, 1)), never above the maximum.
    """
    if max_ms <= base_ms:
        return base_ms / 1000
    exp: float = min(max_ms, base_ms * (2 ** min(attempts, 30)))  # int ** int is typed Any
    return min(max_ms, exp * (0.8 + 0.4 * rand)) / 1000


def classify(
    error: BaseException | None,
    *,
    attempts: int,
    config: RetryConfig,
    rand: float,
    idempotent: bool = False,
    first_pending: bool = True,
    splittable: bool = False,
    batch_bytes: int | None = None,
) -> Outcome:
    """Decide what to do with a batch after an attempt ended with ``error``.

    ``attempts`` counts the retries already made. A batch of several records
    that the broker refused as too large is ``splittable`` (KIP-126) unless an
    earlier attempt may have been written. A retriable error is retried
    while retries remain; otherwise the batch fails with the error itself.

    ``batch_bytes``: the size of the refused batch on the wire, which an
    error for a batch too large to split then names.

    A retry due after the batch's delivery deadline is scheduled all the same:
    the sender fails the batch at its deadline, as Java does, naming this error
    as the cause, rather than a backoff early (when the cluster may still
    recover in time for the batch to be sent).
    """
    if error is None:
        return Outcome(Action.COMPLETE)
    if getattr(error, "code", None) in _TOO_LARGE_CODES:
        if splittable:
            return Outcome(Action.SPLIT, error)
        if batch_bytes is not None:
            error = _too_large(error, batch_bytes)
    refresh = bool(getattr(error, "invalid_metadata", False))
    bump = False
    if idempotent:
        code = getattr(error, "code", None)
        if code == errors.DuplicateSequenceNumberError.code:
            # The broker already has this batch: a retry of a write that landed.
            return Outcome(Action.COMPLETE)
        if code == errors.OutOfOrderSequenceNumberError.code:
            # Behind an earlier batch that failed: resend after it, same sequence.
            # As the first pending batch, the broker lost track of us: new epoch.
            bump = first_pending
        elif code in _RESET_PRODUCER_CODES:
            bump = True
        elif not getattr(error, "retriable", False):
            return Outcome(Action.FAIL, error, refresh)
    elif not getattr(error, "retriable", False):
        return Outcome(Action.FAIL, error, refresh)
    backoff = retry_backoff(attempts, config.retry_backoff_ms, config.retry_backoff_max_ms, rand)
    if attempts >= config.retries:
        return Outcome(Action.FAIL, error, refresh, bump_epoch=bump)
    return Outcome(Action.RETRY, error, refresh, backoff, bump)


# The broker no longer knows this producer id or epoch (its state expired, or the
# epoch is stale): an idempotent producer recovers with a new epoch (KIP-360).
_RESET_PRODUCER_CODES = frozenset(
    {errors.UnknownProducerIdError.code, errors.InvalidProducerEpochError.code}
)


# The batch exceeds the broker's max.message.bytes or its segment size.
_TOO_LARGE_CODES = frozenset({errors.RecordTooLargeError.code, errors.RecordListTooLargeError.code})


def _too_large(error: BaseException, batch_bytes: int) -> BaseException:
    """``error`` (the broker refused a batch as too large) saying how large it was and what limits it."""
    said = str(error.args[0]) if error.args else ""
    if getattr(error, "code", None) == errors.RecordListTooLargeError.code:
        limit = "the topic's segment.bytes (by default the broker's log.segment.bytes)"
    else:
        limit = (
            "the topic's max.message.bytes (by default the broker's message.max.bytes, "
            "1048588) per batch"
        )
    explained = type(error)(
        f"{said + ': ' if said else ''}the batch was {batch_bytes} bytes; the broker takes at most "
        f"{limit}: raise that limit or send smaller records"
    )
    explained.__cause__ = error
    return explained


def expiry_error(
    record_count: int,
    tp: tuple[str, int],
    waited_s: float,
    delivery_timeout_ms: int,
    in_flight: bool,
    last: BaseException | None,
    pid_error: BaseException | None,
) -> errors.KafkaTimeoutError:
    """The error of a batch past ``delivery_timeout_ms`` (KIP-91): how long it waited,
    where it was, and the last error its partition (or the producer id) met, as its cause."""
    cause = f"; last error on this partition: {last}" if last is not None else ""
    if pid_error:
        cause += f"; last producer id error: {pid_error}"
    exc = errors.KafkaTimeoutError(
        f"expiring {record_count} record(s) for {tp[0]}-{tp[1]}: {waited_s * 1000:.0f} ms have "
        f"passed since batch creation (delivery_timeout_ms={delivery_timeout_ms}; the batch was "
        f"{'in flight' if in_flight else 'in the accumulator'}){cause}"
    )
    exc.__cause__ = last if last is not None else pid_error
    return exc


def expired_in_flight(
    in_flight: Iterable[ProducerBatch], now: float
) -> tuple[list[ProducerBatch], float]:
    """The batches of ``in_flight`` past their deadline at ``now``, and the earliest
    deadline of the others (``math.inf`` when none is left)."""
    expired = []
    earliest = math.inf
    for batch in in_flight:
        if batch.deadline <= now:
            expired.append(batch)
        elif batch.deadline < earliest:
            earliest = batch.deadline
    return expired, earliest
