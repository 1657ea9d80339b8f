"""The bulk path: ``Producer.enqueue_many`` encodes a whole column of records in one pass.

Semantics are the per-record path's, and so are the rules, taken from the
producer's :class:`~aioproducer.engine.admission.Admission`: explicit
partitions win, keyed records go to ``murmur2(key)``'s partition, unkeyed ones
stick to a partition until its batch is full (KIP-480); buffer memory is
reserved before records are buffered, waiting at most ``max_block_ms``;
transactions register each partition; a new batch is announced as
``enqueue``'s are. What differs is the cost: no future, no metadata object and no
call chain per record. Each record is one ``RecordBatchBuilder.append``; runs
of records that land in one batch are filed as one span (see
:mod:`aioproducer.bulk.result`), and the call's one future resolves once all
of them have reported.

Records are taken in slices of at most :data:`SLICE_RECORDS` records and
:data:`SLICE_BYTES` bytes: memory is reserved per slice, and before a slice
the call yields to the event loop once bulk calls have run for
``YIELD_INTERVAL`` seconds without yielding (counted across calls, so that a
loop of short calls yields too), so other tasks (and the sender) keep running.

A call stops part way only between slices, so what it buffered is always a
prefix of its records (see :mod:`.progress`): after each wait it checks the
producer and the transaction again before appending (a close, a commit or an
abort may have come meanwhile), and then appends a whole slice without
yielding. Stopped by an error, it returns its future, which fails the rest of
the records with that error; cancelled, it fails them with
:class:`~aioproducer.errors.CallCancelledError` and raises the
``CancelledError``. Either way the records already buffered resolve as usual.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import errors
from ..engine.partitioner import partition_for_key
from ..types import BulkProgress, BulkResult
from .bounds import BULK_RECORD_OVERHEAD, fill_counting, record_reservations
from .input import BulkColumns, read_columns
from .result import BulkCall, BulkSpan

if TYPE_CHECKING:
    from ..config import ProducerConfig
    from ..engine.admission import Admission
    from ..engine.sticky import StickyPartitioner
    from ..engine.transactions import TransactionManager
    from ..net.client import KafkaClient
    from ..net.cluster import TopicInfo
    from ..net.metadata_wait import MetadataWait

__all__ = ["BULK_RECORD_OVERHEAD", "SLICE_BYTES", "SLICE_RECORDS", "YIELD_INTERVAL", "BulkAppender"]

SLICE_RECORDS = 1024
SLICE_BYTES = 256 * 1024
# Longest stretch of bulk work (checks and encoding, across calls) between two
# yields to the event loop (seconds).
YIELD_INTERVAL = 0.001


# partition -> (append, span, batch) of the batch a slice writes to there
_OpenBatches = dict[int, tuple[Any, BulkSpan, Any]]


class _Job(NamedTuple):
    """One bulk call on its way into the accumulator."""

    call: BulkCall
    cols: BulkColumns
    # Running totals of the records' buffer-memory reservations (see .bounds):
    # records a..b-1 reserve totals[b] - totals[a].
    totals: array[int]
    info: TopicInfo
    # Each key's murmur2 partition, -1 for a null key, when the keys came as an
    # Arrow array (hashed in one vectorized pass); None: hash key by key.
    key_partitions: array[int] | None


class BulkAppender:
    """Appends bulk calls to the accumulator; one per started producer."""

    def __init__(
        self,
        config: ProducerConfig,
        client: KafkaClient,
        admission: Admission,
        sticky: StickyPartitioner,
        txn: TransactionManager | None,
        wakeup: Callable[[], None],
        check_open: Callable[[], None],
        metadata_wait: MetadataWait | None = None,
    ) -> None:
        self._config = config
        self._client = client
        self._admission = admission
        self._sticky = sticky  # its per-topic counts; the choice is the admission's
        self._txn = txn
        self._wakeup = wakeup
        self._check_open = check_open
        self._metadata_wait = metadata_wait  # logs what a call waits for
        self._ignore_keys = config.partitioner_ignore_keys
        self._max_block = config.max_block_ms / 1000
        # A slice never asks for more than a quarter of the buffer at once, so
        # memory freed by the sender is taken up in small steps.
        self._slice_bytes = min(SLICE_BYTES, config.buffer_memory // 4)
        # Seconds of bulk work since a call last gave the event loop a turn,
        # across calls: a loop of calls yields as often as one long call.
        self._unyielded = 0.0
        # Calls part way through buffering, each with its progress: if the
        # producer's loop closes meanwhile, abandon() ends them.
        self._calls: dict[BulkCall, BulkProgress] = {}

    def abandon(self, exc: BaseException) -> int:
        """The producer's loop is closed: the calls part way through buffering never resume.

        Each one's records not yet buffered fail with ``exc`` (as never
        buffered), so its future resolves once its buffered records have
        reported too. A call that buffered nothing handed out no future and
        is left alone. Returns how many records failed.
        """
        calls, self._calls = self._calls, {}
        count = 0
        for call, progress in calls.items():
            if not progress.buffered:
                continue
            rest = len(call.value_sizes) - progress.buffered
            count += rest
            try:
                call.not_buffered(rest, exc)
            except RuntimeError:
                pass  # its future is set; its callbacks needed the closed loop
        return count

    def _check_state(self) -> None:
        self._check_open()
        if self._txn is not None:
            self._txn.check_can_send()

    async def enqueue_many(
        self,
        topic: str,
        values: Any,
        keys: Any,
        headers: Any,
        partition: Any,
        timestamp_ms: Any,
        *,
        serializers: tuple[Any, Any] | None = None,
        progress: BulkProgress | None = None,
    ) -> asyncio.Future[BulkResult]:
        """``serializers``: (key, value) for this topic; the configured ones when None.

        ``progress`` is kept up to date as records go in (see :mod:`.progress`).
        """
        if progress is None:
            progress = BulkProgress()
        self._check_state()
        began = time.perf_counter()
        cfg = self._config
        key_ser, value_ser = (
            (cfg.key_serializer, cfg.value_serializer) if serializers is None else serializers
        )
        cols = read_columns(
            topic,
            values,
            keys,
            headers,
            partition,
            timestamp_ms,
            key_serializer=key_ser,
            value_serializer=value_ser,
        )
        totals = record_reservations(cols, cfg.max_request_size, cfg.buffer_memory)
        deadline = self._admission.deadline()
        info = self._client.snapshot.topics.get(topic)
        explicit = [p for p in cols.partitions or (cols.partition,) if p is not None]
        wanted = max(explicit) + 1 if explicit else 1
        if info is None or not info.partitions or wanted > len(info.partitions):
            # As enqueue: a partition not in the metadata is looked up in one
            # fresh answer (it may have been added); _check_partitions decides.
            waiting = None
            if self._metadata_wait is not None:
                waiting = self._metadata_wait.waiting(topic, wanted - 1 if explicit else None)
            await self._client.partitions_for(topic, self._max_block, wanted, waiting)
            self._unyielded, began = 0.0, time.perf_counter()
            info = self._client.snapshot.topics[topic]
            self._check_state()
        self._check_partitions(topic, cols, info)
        if cfg.partitioner is not None:
            self._custom_partitions(topic, cols, info)
        now_ms = int(time.time() * 1000)
        future: asyncio.Future[BulkResult] = asyncio.get_running_loop().create_future()
        call = BulkCall(
            topic,
            future,
            cols.value_lengths,
            cols.key_lengths,
            now_ms if cols.timestamp is None else cols.timestamp,
            cols.timestamps,
        )
        if cols.count == 0:
            future.set_result(BulkResult(call))
            progress.future = future
            return future
        job = _Job(call, cols, totals, info, self._arrow_key_partitions(cols, info))
        await self._append_all(job, deadline, began, progress)
        progress.future = future
        return future

    def _arrow_key_partitions(self, cols: BulkColumns, info: TopicInfo) -> array[int] | None:
        """Each key's murmur2 partition in one pass, when keys came as an Arrow array and decide."""
        if (
            cols.key_array is None
            or cols.partition is not None
            or self._ignore_keys
            or self._config.partitioner is not None  # it chose every partition already
        ):
            return None
        try:
            # numpy is optional (pyarrow 18+ does not require it either).
            from ..engine.partition_vector import arrow_key_partitions
        except ImportError:
            return None  # without numpy, key by key (murmur2 in Python)
        return arrow_key_partitions(cols.key_array, len(info.partitions))

    @staticmethod
    def _check_partitions(topic: str, cols: BulkColumns, info: TopicInfo) -> None:
        n = len(info.partitions)
        for i, p in enumerate(cols.partitions or (cols.partition,)):
            if p is not None and p >= n:
                where = f" (record {i})" if cols.partitions else ""
                raise errors.InvalidPartitionError(
                    f"partition {p} is not in the range [0...{n}) of topic {topic!r}{where}: "
                    f"the topic has {n} partition(s)"
                )

    async def _append_all(
        self, job: _Job, deadline: float, resumed: float, progress: BulkProgress
    ) -> None:
        """Append the call's records slice by slice; ``resumed``: when the call
        last started running (its checks of the columns count as work too).

        Returns early, the rest of the records failed with the error, if the
        producer or the transaction stops it (nothing buffered: raises it).
        Cancelled, it fails the rest with CallCancelledError and re-raises.
        """
        call, cols, totals = job.call, job.cols, job.totals
        admission = self._admission
        n = cols.count
        start = 0
        self._calls[call] = progress
        try:
            while start < n:
                # Checked before the first slice too: a loop of short calls
                # gives the loop back as often as one long call does.
                if self._unyielded + time.perf_counter() - resumed >= YIELD_INTERVAL:
                    try:
                        await asyncio.sleep(0)
                    finally:
                        self._unyielded, resumed = 0.0, time.perf_counter()
                    if not self._still_allowed(call, start, n, 0):
                        return
                stop = min(n, start + SLICE_RECORDS)
                reserve = totals[stop] - totals[start]
                while stop - start > 1 and reserve > self._slice_bytes:
                    stop = start + max(1, (stop - start) // 2)
                    reserve = totals[stop] - totals[start]
                if not admission.try_reserve(reserve):
                    try:
                        await admission.reserve(reserve, deadline)
                    except errors.KafkaError as exc:
                        self._stop_early(call, start, n, exc)
                        return
                    finally:
                        self._unyielded, resumed = 0.0, time.perf_counter()
                    if not self._still_allowed(call, start, n, reserve):
                        return
                # No await from the check above to the end of the slice: the
                # transaction cannot move on meanwhile, so registering the
                # slice's partitions (TransactionManager.add_partition) cannot
                # fail part way through it.
                self._append_slice(job, start, stop)
                start = progress.buffered = stop
                if progress.future is None:
                    progress.future = call.future
        except asyncio.CancelledError:
            if start and call in self._calls:  # not abandoned (which told the call already)
                call.not_buffered(
                    n - start,
                    errors.CallCancelledError(
                        f"records {start}..{n - 1} of {n} were not buffered "
                        f"(records 0..{start - 1} were, and are being sent)"
                    ),
                )
            raise
        finally:
            self._calls.pop(call, None)
            self._unyielded += time.perf_counter() - resumed
        self._wakeup()

    def _still_allowed(self, call: BulkCall, start: int, n: int, reserved: int) -> bool:
        """After a wait: may record ``start`` go in? If the producer closed or the
        transaction moved on (committing, aborting, failed), give back the
        ``reserved`` bytes and stop the call there (see :meth:`_stop_early`)."""
        try:
            self._check_state()
        except errors.KafkaError as exc:
            if reserved:
                self._admission.release(reserved)
            self._stop_early(call, start, n, exc)
            return False
        return True

    @staticmethod
    def _stop_early(call: BulkCall, start: int, n: int, exc: BaseException) -> None:
        """The call stops at record ``start`` of ``n``: records already buffered
        stay buffered and the rest fail with ``exc``; if nothing was buffered,
        the call raises ``exc`` as a whole (its future was never handed out)."""
        if not start:
            raise exc
        call.not_buffered(n - start, exc)

    def _append_slice(self, job: _Job, start: int, stop: int) -> None:
        """Encode records ``start..stop`` (their memory is reserved) in one pass."""
        call, cols = job.call, job.cols
        open_: _OpenBatches = {}
        try:
            uniform = cols.partitions is None and cols.timestamps is None and cols.headers is None
            if uniform and (cols.keys is None or cols.partition is not None or self._ignore_keys):
                self._append_runs(job, start, stop, open_)
            elif uniform and self._all_keyed(job, start, stop):
                self._append_keyed(job, start, stop, open_)
            else:
                self._append_each(job, start, stop, open_)
        finally:
            for _append, span, _batch in open_.values():
                call.close_span(span)

    @staticmethod
    def _all_keyed(job: _Job, start: int, stop: int) -> bool:
        """No null key among records ``start..stop`` (a null key goes to the sticky partition)."""
        if job.key_partitions is not None:
            return -1 not in job.key_partitions[start:stop]
        keys = job.cols.keys  # never None here: the caller took the unkeyed path for that
        return keys is not None and None not in keys[start:stop]

    def _append_runs(self, job: _Job, start: int, stop: int, open_: _OpenBatches) -> None:
        """Records that all go to one partition until its batch is full: sticky or
        explicit partition, one timestamp and one set of headers for all. Each
        batch takes a run of records in one ``append_run``."""
        call, cols, totals, info = job.call, job.cols, job.totals, job.info
        topic, fixed = call.topic, cols.partition
        now = time.monotonic()
        entry = self._open(call, open_, fixed, topic, info, now)
        moved = False
        i = start
        while True:
            span, batch = entry[1], entry[2]
            count = batch.append_run(
                call.timestamp,
                cols.values,
                i,
                stop,
                cols.keys,
                cols.common_headers,
                lengths=cols.value_lengths,
            )
            if count:
                call.partitions[i : i + count] = array("i", [span.partition]) * count
                fill_counting(call.ordinals, i, count, span.first + span.count)
                span.count += count
                reserved = totals[i + count] - totals[i]
                batch.reserve(reserved)
                if fixed is None:
                    self._sticky.count(topic, reserved - count * BULK_RECORD_OVERHEAD)
                i += count
                moved = False
            if i >= stop:
                return
            # The batch is full. KIP-794: unkeyed records move to another
            # partition once batch_size bytes went to this one (the switch
            # falls on a batch boundary); if the new partition's open batch has
            # no room either, or it is not time to move, start a batch.
            if fixed is None and not moved and self._sticky.switch_due(topic):
                entry = self._open(call, open_, None, topic, info, now, move=True)
                moved = True
            else:
                entry = self._open(call, open_, span.partition, topic, info, now, new=True)

    def _append_keyed(self, job: _Job, start: int, stop: int, open_: _OpenBatches) -> None:
        """Keyed records: partitions first (murmur2), then one run per partition,
        in call order within each partition (a stable sort by partition)."""
        call, cols, totals, info, key_partitions = job
        n = len(info.partitions)
        keys = cols.keys
        assert keys is not None
        if key_partitions is not None:
            chosen = key_partitions[start:stop]
        else:
            chosen = array("i", [partition_for_key(key, n) for key in keys[start:stop]])
        call.partitions[start:stop] = chosen
        order = sorted(range(start, stop), key=call.partitions.__getitem__)
        ords = call.ordinals
        now = time.monotonic()
        pos = 0  # in order
        for p, count in sorted(Counter(chosen).items()):
            end = pos + count
            entry = self._open(call, open_, p, call.topic, info, now)
            while True:
                span, batch = entry[1], entry[2]
                taken = batch.append_run(
                    call.timestamp, cols.values, pos, end, keys, cols.common_headers, order
                )
                if taken:
                    placed = order[pos : pos + taken]
                    for i, ordinal in zip(
                        placed, range(span.first + span.count, span.first + span.count + taken)
                    ):
                        ords[i] = ordinal
                    span.count += taken
                    batch.reserve(sum([totals[i + 1] - totals[i] for i in placed]))
                    pos += taken
                if pos >= end:
                    break
                entry = self._open(call, open_, p, call.topic, info, now, new=True)

    def _append_each(self, job: _Job, start: int, stop: int, open_: _OpenBatches) -> None:
        """Records whose partition, timestamp or headers vary: one append each."""
        call, cols, totals, info, key_partitions = job
        topic = call.topic
        values, keys = cols.values, cols.keys
        common_headers, headers = cols.common_headers, cols.headers
        timestamp, timestamps = call.timestamp, cols.timestamps
        fixed, per_partition = cols.partition, cols.partitions
        num_partitions = len(info.partitions)
        parts, ords = call.partitions, call.ordinals
        sticky = self._sticky
        ignore_keys = self._ignore_keys
        now = time.monotonic()
        for i in range(start, stop):
            value = values[i]
            key = keys[i] if keys is not None else None
            ts = timestamp if timestamps is None or timestamps[i] is None else timestamps[i]
            h = common_headers if headers is None else headers[i]
            p = fixed if per_partition is None else per_partition[i]
            if p is None and key is not None and not ignore_keys:
                if key_partitions is not None:
                    p = key_partitions[i]
                else:
                    p = partition_for_key(key, num_partitions)
            entry = open_.get(p) if p is not None else open_.get(sticky.current.get(topic, -1))
            if entry is None or entry[0](ts, key, value, h) is None:
                # Slow path: a new partition for this slice, or a full batch.
                entry = self._open(call, open_, p, topic, info, now)
                delta = entry[0](ts, key, value, h)
                if delta is None and p is None and sticky.switch_due(topic):
                    # KIP-794: the sticky partition moves on at a batch boundary.
                    entry = self._open(call, open_, p, topic, info, now, move=True)
                    delta = entry[0](ts, key, value, h)
                if delta is None:  # the open batch is full: a new one always takes a record
                    entry = self._open(call, open_, entry[1].partition, topic, info, now, new=True)
                    entry[0](ts, key, value, h)
            span = entry[1]
            parts[i] = span.partition
            ords[i] = span.first + span.count
            span.count += 1
            size = totals[i + 1] - totals[i]
            entry[2].reserve(size)
            if p is None:
                sticky.count(topic, size - BULK_RECORD_OVERHEAD)

    def _custom_partitions(self, topic: str, cols: BulkColumns, info: TopicInfo) -> None:
        """Run a custom partitioner for every record up front, before anything is buffered."""
        choose = self._admission.choose
        keys = cols.keys or [None] * cols.count
        chosen_all = cols.partitions or [cols.partition] * cols.count
        out: list[int | None] = []
        for i, (chosen, key) in enumerate(zip(chosen_all, keys)):
            if chosen is None:
                try:
                    chosen = choose(topic, info, None, None if key is None else bytes(key))
                except errors.InvalidPartitionError as exc:
                    raise errors.InvalidPartitionError(f"{exc.args[0]} (record {i})") from None
            out.append(chosen)
        cols.partition, cols.partitions = None, out

    def _open(
        self,
        call: BulkCall,
        open_: _OpenBatches,
        p: int | None,
        topic: str,
        info: TopicInfo,
        now: float,
        *,
        move: bool = False,
        new: bool = False,
    ) -> tuple[Any, BulkSpan, Any]:
        """The batch the next record of partition ``p`` goes to (None: sticky), with a span.

        ``move``: the sticky partition's batch is full, move on; ``new``: the
        partition's open batch is full, start another.
        """
        admission = self._admission
        if new or move:
            # The batch this partition filled can go now (Java's batchIsFull):
            # the sender need not wait for its linger while the call goes on.
            self._wakeup()
        if p is None:
            p = admission.sticky_partition(topic, info, move=move)  # KIP-794
        tp = info.tps[p]
        # Before the batch takes a record: if this raised, nothing of the
        # partition would be buffered outside the transaction.
        admission.register(tp)
        batch = admission.batch_for(tp, topic, now, new=new)
        old = open_.get(p)
        if old is not None:
            call.close_span(old[1])
        span = call.span(p, batch.record_count)
        batch.add_span(span)
        entry = (batch.record_appender(), span, batch)
        open_[p] = entry
        return entry
