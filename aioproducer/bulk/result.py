"""How the records of a bulk call (``enqueue_many``) report in, until its result is whole.

A bulk call has one future. Its records carry no future of their own: the
encoding pass files each run of consecutive records that lands in one batch
as a :class:`BulkSpan` (batch offset delta, first record, count). When the
batch completes or fails it tells each of its spans once, and the span tells
the call; the call resolves its future when every record has reported.

Per record the call keeps two machine integers (partition and position in the
call's stream for that partition) and the key/value sizes, in ``array``s, so
:class:`~aioproducer.types.BulkResult` (what the call gives back) answers
``result[i]`` (a ``RecordMetadata``) lazily, without a Python object per
record until asked.
"""

from __future__ import annotations

import asyncio
import bisect
from array import array

from .. import errors
from ..types import NOT_BUFFERED, AckedRun, BulkResult, BulkSendError, FailedRecords

__all__ = ["BulkCall", "BulkSpan"]


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
        "_failed",
        "_future",
        "_next",
        "_pending",
        "acked_runs",
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
        self.acked_runs: dict[int, list[AckedRun]] = {}
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
        runs = self.acked_runs.setdefault(span.partition, [])
        runs.append(AckedRun(span.first, span.count, base_offset, log_append_time_ms))
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
                self._future.set_exception(BulkSendError(result.describe_errors(), result))
            else:
                self._future.set_result(result)

    def failed_records(self) -> dict[int | None, FailedRecords]:
        """The failed records by partition (None: never buffered); empty if none failed."""
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
