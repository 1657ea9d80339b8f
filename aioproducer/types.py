"""The public value types: what the producer hands back, and the shapes of what it is handed.

One leaf module, beside :mod:`aioproducer.errors`: it imports nothing of the
package but ``errors``, so the engine, the bulk path and the facade import
these types from here (downward), and code outside the package (Spark, the
command line, the integrations) finds every public type in one place.

What the producer hands back: :class:`RecordMetadata` (where a record
landed, Java's ``RecordMetadata``), :class:`BulkResult`,
:class:`FailedRecords`, :class:`BulkSendError` and :class:`BulkProgress` (a
bulk call), :class:`PreparedTransaction` (a two-phase commit's first half)
and :class:`MetricName` (the keys of ``producer.metrics()``).

What the user hands in: :data:`Serializer` and :data:`PartitionerFn`
(callables), :class:`ProducerInterceptor` (Java's ``ProducerInterceptor``)
which sees :class:`ProducerRecord`, and :class:`TokenProvider` (OAUTHBEARER,
KIP-255).
"""

from __future__ import annotations

import asyncio
import bisect
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from . import errors

__all__ = [
    "BulkProgress",
    "BulkResult",
    "BulkSendError",
    "FailedRecords",
    "MetricName",
    "PartitionerFn",
    "PreparedTransaction",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "Serializer",
    "TokenProvider",
]

#: A key or value serializer: the object given to ``enqueue`` -> its bytes (None: a null).
Serializer = Callable[[Any], "bytes | None"]
#: A custom partitioner:
#: (topic, serialized key, partition count, available partitions) -> partition.
PartitionerFn = Callable[[str, "bytes | None", int, Sequence[int]], int]


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 when acks=0 (the broker never says)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int


@dataclass(slots=True)
class ProducerRecord:
    """A record as given to ``enqueue``, before serialization."""

    topic: str
    value: Any
    key: Any = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: Sequence[tuple[str, bytes | None]] | None = None


class ProducerInterceptor(Protocol):
    """The hook interface; both methods are optional (implement either or both)."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """Called by ``enqueue`` before serialization; return the record, changed or new."""
        ...

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        """Called once per record when it is acknowledged (``error`` None) or fails."""
        ...


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies OAUTHBEARER tokens; asked at every (re-)authentication.

    ``token()`` should answer at once with a cached token, refreshed ahead of
    its expiry: a re-authentication (KIP-368) awaits it while the connection
    holds its requests (:class:`~aioproducer.sasl.ClientCredentialsTokenProvider`
    does so). ``extensions()`` (optional) returns SASL extensions (KIP-342),
    e.g. the logical cluster and identity pool ids that Confluent Cloud expects.
    """

    async def token(self) -> str: ...


@dataclass(frozen=True)
class PreparedTransaction:
    """A flushed transaction left open, to be committed or aborted elsewhere.

    Picklable: a Spark task prepares, the driver completes. ``empty`` means no
    record or offset was added, so the broker has nothing to complete.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int  # 1 or 2 (KIP-890): which EndTxn versions apply
    empty: bool = False


@dataclass(frozen=True)
class MetricName:
    """A metric's identity: ``name`` within ``group``, with sorted ``tags``.

    As in Java, the description is not part of the identity.
    """

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()
    description: str = field(default="", compare=False, hash=False)

    def tag(self, key: str) -> str | None:
        """The value of tag ``key``, or None."""
        for k, v in self.tags:
            if k == key:
                return v
        return None


# --- what a bulk call (``enqueue_many``/``send_many``) gives back ---

#: The partition of a bulk call's record that the call never buffered.
NOT_BUFFERED = -1


class FailedRecords(NamedTuple):
    """Records of one partition that failed, and the first error that failed them
    (its ``may_have_been_written`` is True if any of them may be in the log)."""

    error: BaseException
    indices: list[int]


class AckedRun(NamedTuple):
    """A run of a bulk call's records acknowledged together, in one batch."""

    first: int  # position of the run's first record in the call's stream for the partition
    length: int
    base_offset: int  # -1 with acks=0
    log_append_time_ms: int  # -1: the records keep their create time


class BulkRecords(Protocol):
    """What a finished bulk call shows its :class:`BulkResult` (``bulk.result.BulkCall``)."""

    topic: str
    value_sizes: array[int]
    key_sizes: array[int] | None
    timestamp: int
    timestamps: list[int | None] | None
    partitions: array[int]  # per record: its partition, or NOT_BUFFERED
    ordinals: array[int]  # per record: its position in the call's stream for its partition

    @property
    def acked_runs(self) -> Mapping[int, list[AckedRun]]: ...

    def failed_records(self) -> dict[int | None, FailedRecords]: ...


class BulkSendError(errors.KafkaError):
    """Some records of a bulk call failed; ``result.errors`` says which and why."""

    description = "records of a bulk send failed"

    def __init__(self, message: str, result: BulkResult) -> None:
        super().__init__(message)
        self.result = result

    def __reduce__(self) -> Any:
        return (errors.KafkaError, (str(self),))


class BulkResult:
    """Where the records of one bulk call landed.

    ``len(result)`` records; ``result[i]`` is record ``i``'s
    :class:`RecordMetadata`, built on demand; ``result.offsets`` maps each
    partition to its ``(base_offset, count)`` runs, in call order. ``errors``
    maps a partition (``None``: records never buffered) to the records that
    failed there; :meth:`raise_for_errors` raises :class:`BulkSendError` if any did.
    """

    __slots__ = ("_call", "_runs", "_starts", "errors", "topic")

    def __init__(self, call: BulkRecords) -> None:
        self._call = call
        self.topic = call.topic
        self._runs: dict[int, list[AckedRun]] = {}
        self._starts: dict[int, list[int]] = {}
        for partition, runs in call.acked_runs.items():
            runs.sort()
            self._runs[partition] = runs
            self._starts[partition] = [run.first for run in runs]
        self.errors: dict[int | None, FailedRecords] = call.failed_records()

    def __repr__(self) -> str:
        failed = sum(len(f.indices) for f in self.errors.values())
        return (
            f"<BulkResult {self.topic} records={len(self)} partitions={sorted(self._runs)} "
            f"failed={failed}>"
        )

    def __len__(self) -> int:
        return len(self._call.value_sizes)

    @property
    def offsets(self) -> dict[int, list[tuple[int, int]]]:
        """``{partition: [(base_offset, count), ...]}`` of the delivered records.

        Runs that continue one another (the next offset follows) are merged.
        """
        out: dict[int, list[tuple[int, int]]] = {}
        for p, runs in self._runs.items():
            merged: list[list[int]] = []
            for run in runs:
                last = merged[-1] if merged else None
                if last is not None and last[0] >= 0 and last[0] + last[1] == run.base_offset:
                    last[1] += run.length
                else:
                    merged.append([run.base_offset, run.length])
            out[p] = [(base, count) for base, count in merged]
        return out

    def partition_of(self, index: int) -> int | None:
        """The partition record ``index`` went to (None if it was never buffered)."""
        p = self._call.partitions[index]
        return None if p == NOT_BUFFERED else p

    def __getitem__(self, index: int) -> RecordMetadata:
        """Record ``index``'s metadata; raises the record's error if it failed."""
        call = self._call
        n = len(call.value_sizes)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"record index {index} out of range for {n} records")
        p = call.partitions[index]
        ordinal = call.ordinals[index]
        runs = self._runs.get(p)
        if runs is not None:
            k = bisect.bisect_right(self._starts[p], ordinal) - 1
            if k >= 0 and ordinal < runs[k].first + runs[k].length:
                run = runs[k]
                offset = -1 if run.base_offset < 0 else run.base_offset + ordinal - run.first
                if run.log_append_time_ms >= 0:
                    ts = run.log_append_time_ms
                elif call.timestamps is not None and call.timestamps[index] is not None:
                    ts = call.timestamps[index]  # type: ignore[assignment]
                else:
                    ts = call.timestamp
                key_size = -1 if call.key_sizes is None else call.key_sizes[index]
                return RecordMetadata(self.topic, p, offset, ts, key_size, call.value_sizes[index])
        for failure in self.errors.values():
            found = failure.indices  # ascending: a binary search, not a scan per lookup
            k = bisect.bisect_left(found, index)
            if k < len(found) and found[k] == index:
                raise failure.error
        raise LookupError(f"record {index} has no outcome")  # pragma: no cover - cannot happen

    def __iter__(self) -> Iterator[RecordMetadata]:
        for i in range(len(self)):
            yield self[i]

    def describe_errors(self) -> str:
        """The failures in one line: per partition, how many records failed, the
        first five indices and the error (the message of :class:`BulkSendError`).

        ``"events: 2 record(s) partition 1 (indices [3, 7]): KafkaTimeoutError: ..."``
        """
        parts = []
        for partition, failure in self.errors.items():
            where = "never buffered" if partition is None else f"partition {partition}"
            first = failure.indices[:5]
            more = f" and {len(failure.indices) - 5} more" if len(failure.indices) > 5 else ""
            parts.append(
                f"{len(failure.indices)} record(s) {where} (indices {first}{more}): "
                f"{type(failure.error).__name__}: {failure.error}"
            )
        return f"{self.topic}: " + "; ".join(parts)

    def raise_for_errors(self) -> None:
        """Raise :class:`BulkSendError` if any record failed."""
        if self.errors:
            raise BulkSendError(self.describe_errors(), self)


#: The attribute of a bulk call's ``CancelledError`` that holds its progress.
PROGRESS_ATTRIBUTE = "bulk_progress"


def _retrieve(future: asyncio.Future[BulkResult]) -> None:
    """Mark the outcome as seen: a cancelled caller was offered it, not made to take it."""
    if not future.cancelled():
        future.exception()


class BulkProgress:
    """How far one bulk call (``enqueue_many``/``send_many``) got.

    ``enqueue_many`` appends a call's records in call order and waits only
    between slices, so wherever it can be cancelled the buffered records are a
    prefix of the call; a retry sends ``values[buffered:]`` and duplicates
    nothing. The caller may pass one in (``progress=``), which survives whatever
    asyncio does with the exception; the ``CancelledError`` a bulk call raises
    also carries it as ``bulk_progress``, found behind a ``TimeoutError`` by
    :meth:`of`. (That error stays a plain ``CancelledError``: asyncio's
    ``timeout()`` and TaskGroup test for exactly that class.)

    ``buffered``: records ``0 .. buffered - 1`` of the call are buffered (a
    prefix: records go in in call order) and will be delivered or fail on
    their own; the rest were never buffered. ``future``: the call's future
    once it has one (a record is buffered, or the call returned), else None;
    it resolves exactly once, when the buffered records have all reported, to
    a :class:`~aioproducer.BulkResult` or a :class:`~aioproducer.BulkSendError`
    (whose ``result.errors[None]`` lists the records never buffered).

    One object records one call: passing it to a second call raises ValueError.
    """

    __slots__ = ("_used", "buffered", "future")

    def __init__(self) -> None:
        self.buffered = 0
        self.future: asyncio.Future[BulkResult] | None = None
        self._used = False

    def __repr__(self) -> str:
        state = "no future" if self.future is None else "done" if self.future.done() else "pending"
        return f"<BulkProgress buffered={self.buffered} {state}>"

    @staticmethod
    def of(exc: BaseException) -> BulkProgress | None:
        """The progress a bulk call's ``CancelledError`` carries, looked for in
        ``exc`` and its causes (``asyncio.timeout`` raises ``TimeoutError``
        from the ``CancelledError``); None if there is none."""
        seen: set[int] = set()
        cur: BaseException | None = exc
        while cur is not None and id(cur) not in seen:
            seen.add(id(cur))
            progress = getattr(cur, PROGRESS_ATTRIBUTE, None)
            if isinstance(progress, BulkProgress):
                return progress
            cur = cur.__cause__ or cur.__context__
        return None

    def claim(self) -> None:
        """Start recording a call; raises ValueError if this object recorded one already."""
        if self._used:
            raise ValueError(
                "this BulkProgress already records a bulk call; pass a new one to each call"
            )
        self._used = True

    def attach(self, exc: BaseException) -> None:
        """Hand this progress out with ``exc`` (the call's ``CancelledError``).

        The call's outcome then counts as seen, so a caller that does not ask
        for it gets no "exception was never retrieved" log.
        """
        setattr(exc, PROGRESS_ATTRIBUTE, self)
        if self.future is not None:
            self.future.add_done_callback(_retrieve)
