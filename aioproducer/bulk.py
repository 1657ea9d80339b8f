"""The bulk path: ``Producer.enqueue_many`` encodes a whole column of records in one pass.

Semantics are the per-record path's: explicit partitions win, keyed records go
to ``murmur2(key)``'s partition, unkeyed ones stick to a partition until its
batch is full (KIP-480); buffer memory is reserved before records are
buffered, waiting at most ``max_block_ms``; transactions register each
partition. What differs is the cost: no future, no metadata object and no
call chain per record. Each record is one ``RecordBatchBuilder.append``; runs
of records that land in one batch are filed as one span (see
:mod:`aioproducer.bulk_result`), and the call's one future resolves once all
of them have reported.

Records are taken in slices of at most :data:`SLICE_RECORDS` records and
:data:`SLICE_BYTES` bytes: memory is reserved per slice, and between slices
the call yields to the event loop whenever it has run for
``YIELD_INTERVAL`` seconds, so other tasks (and the sender) keep running.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import errors
from .bulk_input import BulkColumns, read_columns
from .bulk_result import BulkCall, BulkResult, BulkSpan
from .partitioner import partition_for_key
from .protocol.records import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from .accumulator import RecordAccumulator
    from .buffer_pool import BufferPool
    from .client import KafkaClient
    from .cluster import TopicInfo
    from .config import ProducerConfig
    from .partitioner import StickyPartitioner
    from .transactions import TransactionManager

__all__ = ["SLICE_BYTES", "SLICE_RECORDS", "YIELD_INTERVAL", "BulkAppender"]

SLICE_RECORDS = 1024
SLICE_BYTES = 256 * 1024
# Longest stretch of encoding between two yields to the event loop (seconds).
YIELD_INTERVAL = 0.001
# Record bound on top of key, value and headers: fixed fields at their widest,
# plus the lengths of key and value as 5-byte varints (as the per-record path).
_RECORD_BOUND = MAX_RECORD_OVERHEAD + 10


class BulkAppender:
    """Appends bulk calls to the accumulator; one per started producer."""

    def __init__(
        self,
        config: ProducerConfig,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        sticky: StickyPartitioner,
        txn: TransactionManager | None,
        wakeup: Callable[[], None],
        check_open: Callable[[], None],
    ) -> None:
        self._config = config
        self._client = client
        self._acc = accumulator
        self._pool = pool
        self._sticky = sticky
        self._txn = txn
        self._wakeup = wakeup
        self._check_open = check_open
        self._max_block = config.max_block_ms / 1000
        self._max_record = min(config.max_request_size, config.buffer_memory)
        # A slice never asks for more than a quarter of the buffer at once, so
        # memory freed by the sender is taken up in small steps.
        self._slice_bytes = min(SLICE_BYTES, config.buffer_memory // 4)

    def _check_state(self) -> None:
        self._check_open()
        if self._txn is not None:
            self._txn.check_can_send()

    async def enqueue_many(
        self, topic: str, values: Any, keys: Any, headers: Any, partition: Any, timestamp_ms: Any
    ) -> asyncio.Future[BulkResult]:
        self._check_state()
        cfg = self._config
        cols = read_columns(
            topic, values, keys, headers, partition, timestamp_ms,
            key_serializer=cfg.key_serializer, value_serializer=cfg.value_serializer,
        )
        sizes = self._record_bounds(cols)
        deadline = time.monotonic() + self._max_block
        info = self._client.snapshot.topics.get(topic)
        if info is None or not info.partitions:
            await self._client.partitions_for(topic, self._max_block)
            info = self._client.snapshot.topics[topic]
            self._check_state()
        self._check_partitions(topic, cols, info)
        if cfg.partitioner is not None:
            self._custom_partitions(topic, cols, info)
        now_ms = int(time.time() * 1000)
        future: asyncio.Future[BulkResult] = asyncio.get_running_loop().create_future()
        call = BulkCall(
            topic, future, cols.value_lengths, cols.key_lengths,
            now_ms if cols.timestamp is None else cols.timestamp, cols.timestamps,
        )
        if cols.count == 0:
            future.set_result(BulkResult(call))
            return future
        await self._append_all(call, cols, sizes, info, deadline, now_ms)
        return future

    def _record_bounds(self, cols: BulkColumns) -> list[int]:
        """Each record's buffer-memory reservation; RecordTooLargeError names the first too big."""
        vlen, klen = cols.value_lengths, cols.key_lengths
        if klen is None:
            sizes = [_RECORD_BOUND + 1 + max(v, 0) for v in vlen]
        else:
            sizes = [_RECORD_BOUND + max(v, 0) + max(k, 0) for v, k in zip(vlen, klen)]
        if cols.header_sizes is not None:
            sizes = [s + h for s, h in zip(sizes, cols.header_sizes)]
        elif cols.common_headers is not None:
            from .protocol.records import headers_size

            extra = headers_size(cols.common_headers)
            sizes = [s + extra for s in sizes]
        limit = self._max_record - RECORD_BATCH_OVERHEAD
        if sizes and max(sizes) > limit:
            index = next(i for i, s in enumerate(sizes) if s > limit)
            bound = sizes[index] + RECORD_BATCH_OVERHEAD
            which = (
                "max_request_size" if bound > self._config.max_request_size else "buffer_memory"
            )
            raise errors.RecordTooLargeError(
                f"record {index} is {bound} bytes when serialized, larger than {which} "
                f"({getattr(self._config, which)}); nothing of this call was buffered"
            )
        return sizes

    @staticmethod
    def _check_partitions(topic: str, cols: BulkColumns, info: TopicInfo) -> None:
        n = len(info.partitions)
        for i, p in enumerate(cols.partitions or (cols.partition,)):
            if p is not None and p >= n:
                where = f"partition[{i}]" if cols.partitions else "partition"
                raise errors.InvalidPartitionError(
                    f"{where} is {p}, not in the range [0...{n}) of topic {topic!r}"
                )

    async def _append_all(
        self,
        call: BulkCall,
        cols: BulkColumns,
        sizes: list[int],
        info: TopicInfo,
        deadline: float,
        now_ms: int,
    ) -> None:
        pool = self._pool
        n = cols.count
        start = 0
        last_yield = time.perf_counter()
        while start < n:
            stop = min(n, start + SLICE_RECORDS)
            reserve = sum(sizes[start:stop])
            while stop - start > 1 and reserve > self._slice_bytes:
                stop = start + max(1, (stop - start) // 2)
                reserve = sum(sizes[start:stop])
            if not pool.try_reserve(reserve):
                try:
                    await pool.reserve(reserve, max(0.0, deadline - time.monotonic()))
                    self._check_state()
                except asyncio.CancelledError:
                    call.not_buffered(n - start, errors.KafkaError("the bulk call was cancelled"))
                    raise
                except Exception as exc:
                    if start == 0:
                        raise  # nothing was buffered: the call fails as a whole
                    call.not_buffered(n - start, exc)
                    return
                last_yield = time.perf_counter()
            self._append_slice(call, cols, sizes, info, start, stop, now_ms)
            start = stop
            if start < n and time.perf_counter() - last_yield >= YIELD_INTERVAL:
                await asyncio.sleep(0)
                last_yield = time.perf_counter()
                try:
                    self._check_state()
                except Exception as exc:
                    call.not_buffered(n - start, exc)
                    return
        self._wakeup()

    def _append_slice(
        self,
        call: BulkCall,
        cols: BulkColumns,
        sizes: list[int],
        info: TopicInfo,
        start: int,
        stop: int,
        now_ms: int,
    ) -> None:
        """Encode records ``start..stop`` (their memory is reserved) in one pass."""
        topic = call.topic
        values, keys = cols.values, cols.keys
        common_headers, headers = cols.common_headers, cols.headers
        timestamp, timestamps = call.timestamp, cols.timestamps
        fixed, per_partition = cols.partition, cols.partitions
        num_partitions = len(info.partitions)
        parts, ords = call.partitions, call.ordinals
        sticky = self._sticky
        now = time.monotonic()
        # partition -> (append, span, batch) of the batch this slice writes to there
        open_: dict[int, tuple[Any, BulkSpan, Any]] = {}
        try:
            for i in range(start, stop):
                value = values[i]
                key = keys[i] if keys is not None else None
                ts = timestamp if timestamps is None or timestamps[i] is None else timestamps[i]
                h = common_headers if headers is None else headers[i]
                p = fixed if per_partition is None else per_partition[i]
                if p is None and key is not None:
                    p = partition_for_key(key, num_partitions)
                entry = open_.get(p) if p is not None else open_.get(sticky.current.get(topic, -1))
                if entry is not None:
                    delta = entry[0](ts, key, value, h)
                    if delta is not None:
                        span = entry[1]
                        parts[i] = span.partition
                        ords[i] = span.first + span.count
                        span.count += 1
                        entry[2].reserved += sizes[i]
                        continue
                # Slow path: a new partition for this slice, or a full batch.
                entry = self._open(call, open_, p, topic, info, now)
                delta = entry[0](ts, key, value, h)
                if delta is None and p is None:
                    # KIP-480: the sticky partition moves on when its batch is full.
                    entry = self._open(call, open_, p, topic, info, now, move=True)
                    delta = entry[0](ts, key, value, h)
                if delta is None:  # the open batch is full: a new one always takes a record
                    entry = self._open(call, open_, entry[1].partition, topic, info, now, new=True)
                    entry[0](ts, key, value, h)
                span = entry[1]
                parts[i] = span.partition
                ords[i] = span.first + span.count
                span.count += 1
                entry[2].reserved += sizes[i]
                if p is None:
                    sticky.used_topics.add(topic)
        finally:
            for _append, span, _batch in open_.values():
                call.close_span(span)

    def _custom_partitions(self, topic: str, cols: BulkColumns, info: TopicInfo) -> None:
        """Run a custom partitioner for every record up front, before anything is buffered."""
        custom = self._config.partitioner
        n = len(info.partitions)
        keys = cols.keys or [None] * cols.count
        chosen_all = cols.partitions or [cols.partition] * cols.count
        out: list[int | None] = []
        for i, (chosen, key) in enumerate(zip(chosen_all, keys)):
            if chosen is None:
                chosen = custom(topic, None if key is None else bytes(key), n, info.available)  # type: ignore[misc]
                if isinstance(chosen, bool) or not isinstance(chosen, int) or not 0 <= chosen < n:
                    raise errors.InvalidPartitionError(
                        f"the partitioner returned {chosen!r} for record {i} of topic {topic!r} "
                        f"with {n} partitions"
                    )
            out.append(chosen)
        cols.partition, cols.partitions = None, out

    def _open(
        self,
        call: BulkCall,
        open_: dict[int, tuple[Any, BulkSpan, Any]],
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
        acc = self._acc
        if p is None:
            # KIP-480: the sticky partition moves on when its batch is full or
            # sent, or would need a new batch once it has taken records.
            sticky = self._sticky
            n = len(info.partitions)
            p = sticky.partition(topic, n, info.available)
            if move or (sticky.used(topic) and acc.open_batch(info.tps[p]) is None):
                p = sticky.next_partition(topic, n, info.available)
        tp = info.tps[p]
        batch = None if new else acc.open_batch(tp)
        if batch is None:
            batch = acc.new_batch(tp, now)
            self._wakeup()  # the sender starts the batch's linger clock
        old = open_.get(p)
        if old is not None:
            call.close_span(old[1])
        span = call.span(p, batch.builder.record_count, len(batch.futures))
        if batch.spans is None:
            batch.spans = []
        batch.spans.append(span)
        if self._txn is not None:
            self._txn.add_partition(tp)
        entry = (batch.builder.append, span, batch)
        open_[p] = entry
        return entry
