"""What a bulk call (``enqueue_many``) gives back, and how its records report in.

A bulk call has one future. Its records carry no future of their own: the
encoding pass files each run of consecutive records that lands in one batch
as a :class:`BulkSpan` (batch offset delta, first record, count). When the
batch completes or fails it tells each of its spans once, and the span tells
the call; the call resolves its future when every record has reported.

Per record the call keeps two machine integers (partition and position in the
call's stream for that partition) and the key/value sizes, in ``array``s, so
:class:`BulkResult` answers ``result[i]`` (a :class:`RecordMetadata`) lazily,
without a Python object per record until asked.
"""

from __future__ import annotations

import asyncio
import bisect
from array import array
from collections.abc import Iterator
from typing import Any, NamedTuple

from .. import errors
from ..engine.batch import RecordMetadata

__all__ = ["BulkCall", "BulkResult", "BulkSendError", "BulkSpan", "FailedRecords"]

NOT_BUFFERED = -1  # the partition of a record the call never buffered


class FailedRecords(NamedTuple):
    """Records of one partition that failed, and the first error that failed them
    (its ``may_have_been_written`` is True if any of them may be in the log)."""

    error: BaseException
    indices: list[int]


class BulkSendError(errors.KafkaError):
    """Some records of a bulk call failed; ``result.errors`` says which and why."""

    description = "records of a bulk send failed"

    def __init__(self, message: str, result: BulkResult) -> None:
        super().__init__(message)
        self.result = result

    def __reduce__(self) -> Any:
        return (errors.KafkaError, (str(self),))


class _Acked(NamedTuple):
    first: int  # position of the run's first record in the call's stream for the partition
    length: int
    base_offset: int  # -1 with acks=0
    log_append_time_ms: int  # -1: the records keep their create time


class BulkSpan:
    """A run of a bulk call's records in one batch (see :class:`~aioproducer.engine.batch.Span`)."""

    __slots__ = ("call", "count", "delta", "first", "partition")

    def __init__(self, call: BulkCall, partition: int, delta: int, first: int) -> None:
        self.call = call
        self.partition = partition
        self.delta = delta
        self.first = first
        self.count = 0

    def acked(self, base_offset: int, log_append_time_ms: int) -> None:
        self.call.acked(self, base_offset, log_append_time_ms)

    def failed(self, exc: BaseException) -> None:
        self.call.failed(self, exc)


class BulkCall:
    """The book-keeping of one bulk call until its future resolves."""

    __slots__ = (
        "_acked",
        "_failed",
        "_future",
        "_next",
        "_pending",
        "key_sizes",
        "ordinals",
        "partitions",
        "timestamp",
        "timestamps",
        "topic",
        "value_sizes",
    )

    def __init__(
        self,
        topic: str,
        future: asyncio.Future[BulkResult],
        value_sizes: array[int],
        key_sizes: array[int] | None,
        timestamp: int,
        timestamps: list[int | None] | None,
    ) -> None:
        n = len(value_sizes)
        self.topic = topic
        self._future = future
        self.value_sizes = value_sizes
        self.key_sizes = key_sizes
        self.timestamp = timestamp
        self.timestamps = timestamps
        self.partitions = array("i", [NOT_BUFFERED]) * n
        self.ordinals = array("q", [0]) * n
        self._next: dict[int, int] = {}  # partition -> records of this call filed there so far
        self._pending = n
        self._acked: dict[int, list[_Acked]] = {}
        self._failed: dict[int, list[tuple[int, int, BaseException]]] = {}

    @property
    def future(self) -> asyncio.Future[BulkResult]:
        """The call's future, resolved once every record has reported."""
        return self._future

    def span(self, partition: int, delta: int) -> BulkSpan:
        """A new run of records in a batch of ``partition``, starting at offset ``delta``."""
        return BulkSpan(self, partition, delta, self._next.get(partition, 0))

    def close_span(self, span: BulkSpan) -> None:
        """The encoding pass is done with ``span``: later records start a new one."""
        self._next[span.partition] = span.first + span.count

    def acked(self, span: BulkSpan, base_offset: int, log_append_time_ms: int) -> None:
        if not span.count:
            return
        runs = self._acked.setdefault(span.partition, [])
        runs.append(_Acked(span.first, span.count, base_offset, log_append_time_ms))
        self._settled(span.count)

    def failed(self, span: BulkSpan, exc: BaseException) -> None:
        if not span.count:
            return
        self._failed.setdefault(span.partition, []).append((span.first, span.count, exc))
        self._settled(span.count)

    def not_buffered(self, count: int, exc: BaseException) -> None:
        """The last ``count`` records were never buffered (buffer wait timed out, closed...)."""
        exc = errors.delivery_error(exc, False)
        self._failed.setdefault(NOT_BUFFERED, []).append((0, count, exc))
        self._settled(count)

    def _settled(self, count: int) -> None:
        self._pending -= count
        if self._pending == 0 and not self._future.done():
            result = BulkResult(self)
            if result.errors:
                self._future.set_exception(
                    BulkSendError(result.describe_errors(), result)
                )
            else:
                self._future.set_result(result)

    def failed_records(self) -> dict[int | None, FailedRecords]:
        out: dict[int | None, FailedRecords] = {}
        parts, ords = self.partitions, self.ordinals
        for partition, runs in self._failed.items():
            runs.sort(key=lambda run: run[0])
            starts = [run[0] for run in runs]
            indices = []
            for i, p in enumerate(parts):
                if p != partition:
                    continue
                k = bisect.bisect_right(starts, ords[i]) - 1
                if partition == NOT_BUFFERED or (k >= 0 and ords[i] < starts[k] + runs[k][1]):
                    indices.append(i)
            error = runs[0][2]
            if getattr(error, "may_have_been_written", None) is not True and any(
                getattr(run[2], "may_have_been_written", None) for run in runs
            ):
                # One error speaks for the partition's failed records: if any
                # of them may be in the log, it says so for all (the safe side).
                error = errors.delivery_error(error, True)
            out[None if partition == NOT_BUFFERED else partition] = FailedRecords(error, indices)
        return out


class BulkResult:
    """Where the records of one bulk call landed.

    ``len(result)`` records; ``result[i]`` is record ``i``'s
    :class:`RecordMetadata`, built on demand; ``result.offsets`` maps each
    partition to its ``(base_offset, count)`` runs, in call order. ``errors``
    maps a partition (``None``: records never buffered) to the records that
    failed there; :meth:`raise_for_errors` raises :class:`BulkSendError` if any did.
    """

    __slots__ = ("_call", "_runs", "_starts", "errors", "topic")

    def __init__(self, call: BulkCall) -> None:
        self._call = call
        self.topic = call.topic
        self._runs: dict[int, list[_Acked]] = {}
        self._starts: dict[int, list[int]] = {}
        for partition, runs in call._acked.items():
            runs.sort()
            self._runs[partition] = runs
            self._starts[partition] = [run.first for run in runs]
        self.errors: dict[int | None, FailedRecords] = call.failed_records() if call._failed else {}

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
                elif call.timestamps is not None and (given := call.timestamps[index]) is not None:
                    ts = given
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
