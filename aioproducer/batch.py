"""A batch of records for one partition, and what the user gets back for each record.

A :class:`ProducerBatch` is filled by the accumulator, sealed when drained,
possibly sent several times (retries keep its bytes), and completed exactly
once: :meth:`complete` or :meth:`fail`, after which further calls are ignored.
The futures it resolves are the ones ``Producer.enqueue`` handed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple

from .protocol.compression import Codec
from .protocol.records import RecordBatchBuilder

__all__ = ["ProducerBatch", "RecordMetadata", "pack_sizes"]


def pack_sizes(key_size: int, value_size: int) -> int:
    """Pack serialized key/value sizes (-1 for null) into one int."""
    return ((key_size + 1) << 32) | (value_size + 1)


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 when acks=0 (the broker never says)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int


class ProducerBatch:
    __slots__ = (
        "_waiters",
        "attempts",
        "base_sequence",
        "batch_size",
        "builder",
        "created",
        "deadline",
        "done",
        "futures",
        "in_flight",
        "max_record_size",
        "maybe_written",
        "partition",
        "payload",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at",
        "sealed",
        "sizes",
        "timestamps",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        codec: Codec,
        batch_size: int,
        now: float,
        delivery_timeout: float,
        compression_level: int | None = None,
        is_transactional: bool = False,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.builder = RecordBatchBuilder(
            codec=codec,
            batch_size=batch_size,
            is_transactional=is_transactional,
            compression_level=compression_level,
        )
        self.batch_size = batch_size
        self.futures: list[Any] = []
        # Per record: serialized key and value sizes packed into one int (see
        # pack_sizes; an int is cheaper to keep than a tuple), and the timestamp.
        self.sizes: list[int] = []
        self.timestamps: list[int] = []
        self.created = now
        self.deadline = now + delivery_timeout
        self.attempts = 0
        self.retry_at = 0.0
        self.reserved = 0  # bytes of buffer memory this batch holds
        # Largest record appended, as the upper bound enqueue reserved for it
        # (Java's maxRecordSize, reported as record-size-max).
        self.max_record_size = 0
        self.payload: bytes | None = None  # the built batch, kept across retries
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.done = False
        self.in_flight = False
        self.sealed = False
        self._waiters: list[asyncio.Future[None]] | None = None
        # An attempt ended without a clear answer: the broker may hold the batch
        # under its current producer id, epoch and sequence.
        self.maybe_written = False

    def __repr__(self) -> str:
        state = "done" if self.done else "in flight" if self.in_flight else "queued"
        return (
            f"<ProducerBatch {self.topic}-{self.partition} records={len(self.futures)} "
            f"bytes~{self.builder.size_in_bytes} attempts={self.attempts} {state}>"
        )

    @property
    def record_count(self) -> int:
        return len(self.futures)

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        future: Any,
        sizes: int,
    ) -> bool:
        """Append a record if it fits; the first record of a batch always fits.

        ``sizes`` is :func:`pack_sizes` of the record's key and value.
        """
        if self.sealed or self.builder.append(timestamp_ms, key, value, headers) is None:
            return False
        self.futures.append(future)
        self.sizes.append(sizes)
        self.timestamps.append(timestamp_ms)
        return True

    def is_full(self) -> bool:
        return self.sealed or self.builder.size_in_bytes >= self.batch_size

    def done_waiter(self) -> asyncio.Future[None]:
        """A future resolved when this batch completes or fails (for flush/close)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.done:
            fut.set_result(None)
        else:
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(fut)
        return fut

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def replace_by(self, parts: Sequence[ProducerBatch]) -> None:
        """This batch was split (KIP-126): its records and futures now belong to
        ``parts``, and whoever waits for it is woken once every part is done."""
        self.done = True
        waiters, self._waiters = self._waiters, None
        if not waiters:
            return

        def wake(_: object) -> None:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

        asyncio.gather(*(part.done_waiter() for part in parts)).add_done_callback(wake)

    def complete(self, base_offset: int, log_append_time_ms: int = -1) -> None:
        """Resolve every record's future with its metadata (once)."""
        if self.done:
            return
        self.done = True
        topic, partition = self.topic, self.partition
        new = tuple.__new__  # skips NamedTuple's Python-level __new__: this loop is hot
        offset = base_offset
        step = 1 if base_offset >= 0 else 0  # acks=0: every offset is -1
        append_time = log_append_time_ms >= 0
        for fut, ts, packed in zip(self.futures, self.timestamps, self.sizes):
            if append_time:
                ts = log_append_time_ms
            try:
                fut.set_result(
                    new(
                        RecordMetadata,
                        (topic, partition, offset, ts, (packed >> 32) - 1, (packed & 0xFFFFFFFF) - 1),
                    )
                )
            except asyncio.InvalidStateError:
                pass  # the caller cancelled its wait; the record is written all the same
            offset += step
        self._wake_waiters()

    def fail(self, exc: BaseException) -> None:
        """Fail every record's future with ``exc`` (once)."""
        if self.done:
            return
        self.done = True
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(exc)
        self._wake_waiters()
