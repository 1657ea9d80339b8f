"""Per-partition queues of batches, and the decisions of what to send where.

Invariants this module keeps:

* a partition's deque holds its unsent batches oldest first; a batch that must
  be retried goes back to the *front*, so it is sent before later batches;
* the accumulator never schedules timers, never completes or fails a batch and
  never touches producer-id state: it answers questions (:meth:`ready`,
  :meth:`drain`, :meth:`expired`) given ``now`` and the leaders, and the sender
  acts on the answers. That keeps it testable without an event loop;
* :attr:`RecordAccumulator._nonempty` holds exactly the partitions with queued
  batches, so a pass costs what is queued, not every partition ever written.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.compression import Codec
from ..protocol.record_parsing import parse_record_batches
from .batch import OPEN, ProducerBatch, pack_sizes
from .idempotence import sequence_before

if TYPE_CHECKING:
    import asyncio

__all__ = ["ReadyResult", "RecordAccumulator", "TopicPartition"]

TopicPartition = tuple[str, int]
LeaderLookup = Callable[[str, int], "int | None"]


@dataclass(slots=True)
class ReadyResult:
    """What :meth:`RecordAccumulator.ready` found."""

    nodes: set[int] = field(default_factory=set)
    # Partitions with queued batches, per leader (for drain).
    partitions: dict[int, list[TopicPartition]] = field(default_factory=dict)
    # Seconds until some batch may become ready; inf when nothing waits.
    next_check: float = float("inf")
    unknown_leader_topics: set[str] = field(default_factory=set)


def _sent_before(a: ProducerBatch, b: ProducerBatch) -> bool:
    """Was ``a`` first sent before ``b`` (same partition)?

    Idempotent batches compare by sequence, across the wrap after 2**31-1: a
    raw comparison would put a batch at sequence 0 before one at 2**31-2 that
    precedes it, and the broker would refuse both as out of order.
    """
    if a.base_sequence >= 0 and b.base_sequence >= 0 and a.producer_id == b.producer_id:
        return sequence_before(a.base_sequence, b.base_sequence)
    return a.created < b.created


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        codec: Codec,
        delivery_timeout_ms: int,
        compression_level: int | None = None,
        is_transactional: bool = False,
    ) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.codec = codec
        self.compression_level = compression_level
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.is_transactional = is_transactional
        self._deques: dict[TopicPartition, deque[ProducerBatch]] = {}
        # The deques that hold a batch, by partition: ready/drain/expiry look only here.
        self._nonempty: dict[TopicPartition, deque[ProducerBatch]] = {}
        # Per node: the partition a full request left out, first in line next time.
        self._drain_start: dict[int, TopicPartition] = {}
        # Per node: when it last had a batch ready, and when it was last drained
        # (KIP-794: partitions of a node ready but undrained for longer than
        # partitioner_availability_timeout_ms get no new records).
        self._ready_time: dict[int, float] = {}
        self._drain_time: dict[int, float] = {}
        # Batches created and not yet completed or failed: flush() waits on these.
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closing = False
        #: The producer's event loop, where the records' handles run their
        #: callbacks (set when the producer starts).
        self.loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        queued = sum(len(d) for d in self._nonempty.values())
        return f"<RecordAccumulator queued={queued} incomplete={len(self.incomplete)}>"

    # -- filling -----------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        now: float,
        sizes: int | None = None,
        reserve: int = 0,
        bound: int = 0,
    ) -> ProducerBatch:
        """Append a record to ``tp``'s open batch, or to a new one; return its batch.

        ``sizes`` is :func:`~aioproducer.engine.batch.pack_sizes` of key and
        value, computed here when not given; ``reserve`` and ``bound`` as for
        :meth:`ProducerBatch.try_append`. (The record's handle is the batch's
        last: ``batch.outcome.handle(batch.record_count - 1, ...)``.)
        """
        if sizes is None:
            sizes = pack_sizes(-1 if key is None else len(key), -1 if value is None else len(value))
        batch = self.open_batch(tp)
        if (
            batch is None
            or batch.try_append(timestamp_ms, key, value, headers, sizes, reserve, bound) is None
        ):
            batch = self.new_batch(tp, now)
            batch.try_append(timestamp_ms, key, value, headers, sizes, reserve, bound)
        return batch

    def _new_batch(self, tp: TopicPartition, created: float, batch_size: int) -> ProducerBatch:
        return ProducerBatch(
            tp[0],
            tp[1],
            codec=self.codec,
            batch_size=batch_size,
            now=created,
            delivery_timeout=self.delivery_timeout,
            compression_level=self.compression_level,
            is_transactional=self.is_transactional,
            loop=self.loop,
        )

    def open_batch(self, tp: TopicPartition) -> ProducerBatch | None:
        """The batch of ``tp`` that still takes records, if any."""
        dq = self._deques.get(tp)
        if dq:
            last = dq[-1]
            if last.state is OPEN:
                return last
        return None

    def new_batch(self, tp: TopicPartition, now: float) -> ProducerBatch:
        """Start an empty batch at the back of ``tp``'s queue."""
        batch = self._new_batch(tp, now, self.batch_size)
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        elif dq:
            # Only the tail takes records: the producer's per-topic shortcut to
            # the open batch (StickyPartitioner.filling) relies on it.
            dq[-1].seal()
        dq.append(batch)
        if len(dq) == 1:
            self._nonempty[tp] = dq
        self.incomplete.add(batch)
        return batch

    # -- deciding ----------------------------------------------------------

    @property
    def queues(self) -> dict[TopicPartition, deque[ProducerBatch]]:
        """Each partition's queue of batches, the open one at the back. The keyed
        shortcut (:mod:`.keyed_lane`) reads it per record; only this class changes it."""
        return self._deques

    def ready(
        self, now: float, leader_of: LeaderLookup, *, memory_exhausted: bool = False
    ) -> ReadyResult:
        """Which leaders have a batch worth sending now, and when to look again.

        A partition's head batch is sendable when it is full, or has lingered
        ``linger_ms``, or a flush/close/memory shortage asks for everything,
        and it is not waiting out a retry backoff (KIP-580).
        """
        result = ReadyResult()
        urgent = memory_exhausted or self.flushing > 0 or self.closing
        linger = self.linger
        for tp, dq in self._nonempty.items():
            leader = leader_of(tp[0], tp[1])
            if leader is None:
                result.unknown_leader_topics.add(tp[0])
                continue
            result.partitions.setdefault(leader, []).append(tp)
            head = dq[0]
            if head.attempts and head.retry_at > now:
                # Looked at even when the leader is already ready: the partition
                # that made it ready may be muted, and this retry must not wait
                # for the sender's idle cap.
                result.next_check = min(result.next_check, head.retry_at - now)
                continue
            if leader in result.nodes:
                continue
            if urgent or len(dq) > 1 or head.is_full():
                result.nodes.add(leader)
                continue
            wait = head.created + linger - now
            if head.attempts or wait <= 0:
                result.nodes.add(leader)
            else:
                result.next_check = min(result.next_check, wait)
        for node in result.nodes:
            self._ready_time[node] = now
            self._drain_time.setdefault(node, now)
        return result

    def sendable_from(
        self, batch: ProducerBatch, leader_of: LeaderLookup, *, memory_exhausted: bool = False
    ) -> float:
        """The earliest time ``batch``, just opened, can make its leader ready, as ready() decides.

        Its linger deadline while it is its partition's only batch, not full,
        and nothing urgent is asked; else ``-inf`` (at once: a pass is due).
        A partition without a known leader makes a pass due at once too: the
        pass asks for metadata (ready()'s ``unknown_leader_topics``).
        Until then only another event can make the batch sendable: a record
        that does not fit opens the next batch, and a flush, close or memory
        shortage wakes the sender itself; so does a record that fills the
        batch exactly on enqueue's full path (the lanes' appends do not: such a
        batch goes at its linger, as one a byte short of full does).
        """
        dq = self._deques.get((batch.topic, batch.partition))
        if (
            memory_exhausted
            or self.flushing > 0
            or self.closing
            or dq is None
            or len(dq) != 1
            or dq[0] is not batch
            or batch.is_full()
            or leader_of(batch.topic, batch.partition) is None
        ):
            return -math.inf
        return batch.created + self.linger

    def drain(
        self,
        now: float,
        ready: ReadyResult,
        max_request_size: int,
        muted: Iterable[TopicPartition] = (),
    ) -> dict[int, list[ProducerBatch]]:
        """Take batches for each ready node, up to ``max_request_size`` per request.

        When a request fills up, the partition left out gets the first place
        at that node next time, so no partition waits behind the others forever.
        """
        muted_set = set(muted)
        out: dict[int, list[ProducerBatch]] = {}
        for node in ready.nodes:
            self._drain_time[node] = now
            tps = ready.partitions.get(node, [])
            if not tps:
                continue
            start = 0
            first = self._drain_start.pop(node, None)
            if first is not None:
                try:
                    start = tps.index(first)
                except ValueError:
                    pass
            taken: list[ProducerBatch] = []
            size = 0
            for i in range(len(tps)):
                tp = tps[(start + i) % len(tps)]
                if tp in muted_set:
                    continue
                dq = self._deques.get(tp)
                if not dq:
                    continue
                head = dq[0]
                if head.attempts and head.retry_at > now:
                    continue
                batch_size = head.builder.size_in_bytes
                if taken and size + batch_size > max_request_size:
                    self._drain_start[node] = tp
                    break
                dq.popleft()
                if not dq:
                    del self._nonempty[tp]
                head.seal()
                taken.append(head)
                size += batch_size
            if taken:
                out[node] = taken
        return out

    def reenqueue(self, batch: ProducerBatch, now: float, backoff: float) -> None:
        """Put a batch that failed retriably back at the front of its partition.

        Retried batches queue ahead of new ones, among themselves in the order
        they were first sent (base sequence when idempotent, wrap-aware, else
        creation), so that a partition's records keep their order.
        """
        self._insert_retried([batch], now, backoff)

    def _insert_retried(self, batches: list[ProducerBatch], now: float, backoff: float) -> None:
        """Queue ``batches`` (consecutive, in order) where the first one belongs."""
        first = batches[0]
        for batch in batches:
            batch.requeue(now, backoff)
        tp = (first.topic, first.partition)
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        index = 0
        for queued in dq:
            if not queued.attempts or _sent_before(first, queued):
                break
            index += 1
        for offset, batch in enumerate(batches):
            dq.insert(index + offset, batch)
        self._nonempty[tp] = dq

    def split(self, batch: ProducerBatch) -> list[ProducerBatch]:
        """Split a batch the broker refused as too large into smaller ones (KIP-126).

        The records keep their order, handles, timestamps and delivery deadline.
        Each part holds at most ``batch_size`` bytes and at most half of the
        refused batch, so that splitting again always makes progress, down to
        one record per batch. The parts replace ``batch`` among the incomplete
        batches; the caller queues them with :meth:`reenqueue_split`.
        """
        assert batch.payload is not None, "only a batch that was sent can be refused"
        (parsed,) = parse_record_batches(batch.payload)
        limit = max(1, min(self.batch_size, batch.builder.size_in_bytes // 2))
        parts: list[ProducerBatch] = []
        current: ProducerBatch | None = None
        for record in parsed.records:
            if current is None or not current.append_moved(
                record.timestamp_ms, record.key, record.value, record.headers
            ):
                current = self._new_batch((batch.topic, batch.partition), batch.created, limit)
                current.append_moved(record.timestamp_ms, record.key, record.value, record.headers)
                parts.append(current)
        # The parts' sequence ranges are fixed by the refused batch: none may take
        # new records, or its range would overlap the next batch's (KIP-126).
        # replace_by seals them and moves the buffer memory with the records.
        batch.replace_by(parts)
        self.incomplete.discard(batch)
        self.incomplete.update(parts)
        return parts

    def reenqueue_split(self, parts: list[ProducerBatch], now: float) -> None:
        """Queue the parts of a split batch, in order, where the batch belonged."""
        self._insert_retried(parts, now, 0.0)

    def retried_heads(self) -> list[TopicPartition]:
        """Partitions whose next batch is a retry."""
        return [tp for tp, dq in self._nonempty.items() if dq[0].attempts]

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches past their delivery timeout."""
        out: list[ProducerBatch] = []
        for tp, dq in list(self._nonempty.items()):
            if dq[0].deadline <= now:
                keep = [b for b in dq if b.deadline > now]
                for b in dq:
                    if b.deadline <= now:
                        b.seal()  # failed now: it must take no record after this
                        out.append(b)
                dq.clear()
                dq.extend(keep)
                if not dq:
                    del self._nonempty[tp]
        return out

    def stranded(self, now: float, skip: Container[ProducerBatch]) -> list[ProducerBatch]:
        """Batches past their deadline at ``now`` that are neither decided, queued, in
        flight nor in ``skip``: none, unless a bug lost one (the sender fails them)."""
        return [
            b
            for b in list(self.incomplete)
            if b.deadline <= now
            and not b.decided
            and not b.in_flight
            and b not in skip
            and not self.is_queued(b)
        ]

    def next_expiry(self) -> float:
        """The earliest delivery deadline of a queued batch (inf if none)."""
        # A loop, not min() over a generator: the sender asks on every pass.
        earliest = math.inf
        for dq in self._nonempty.values():
            deadline = dq[0].deadline
            if deadline < earliest:
                earliest = deadline
        return earliest

    def finished(self, batch: ProducerBatch) -> None:
        """Forget a batch that has been completed or failed."""
        self.incomplete.discard(batch)

    def is_queued(self, batch: ProducerBatch) -> bool:
        dq = self._deques.get((batch.topic, batch.partition))
        return dq is not None and batch in dq

    def queued_batches(self) -> int:
        return sum(len(dq) for dq in self._nonempty.values())

    def has_queued(self) -> bool:
        """Whether any batch waits to be sent (the sender asks after each request)."""
        return bool(self._nonempty)

    def nonempty_partitions(self) -> list[TopicPartition]:
        """Partitions with at least one queued batch."""
        return list(self._nonempty)

    def take_partitions(self, partitions: Iterable[TopicPartition]) -> list[ProducerBatch]:
        """Remove and return every queued batch of ``partitions``, oldest first."""
        taken: list[ProducerBatch] = []
        for tp in partitions:
            dq = self._nonempty.pop(tp, None)
            if dq:
                for batch in dq:
                    batch.seal()
                taken.extend(dq)
                dq.clear()
        return taken

    def take_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (for abort on close)."""
        out = [b for dq in self._nonempty.values() for b in dq]
        for batch in out:
            batch.seal()
        self._deques.clear()
        self._nonempty.clear()
        return out

    def queued_topics(self) -> set[str]:
        return {tp[0] for tp in self._nonempty}

    def forget_topic(self, topic: str) -> bool:
        """Drop an idle topic's empty queues; False (nothing dropped) if a batch is pending."""
        if any(b.topic == topic for b in self.incomplete):
            return False
        for tp in [tp for tp in self._deques if tp[0] == topic]:
            del self._deques[tp]
        return True

    # -- load, for the uniform sticky partitioner (KIP-794) ------------------

    def queue_sizes(self, topic: str, partitions: Iterable[int]) -> list[int]:
        """Queued batches of each of ``topic``'s ``partitions``."""
        nonempty = self._nonempty
        return [len(nonempty.get((topic, p), ())) for p in partitions]

    def unavailable_nodes(self, timeout: float) -> set[int]:
        """Nodes that have had a batch ready, undrained, for longer than ``timeout`` seconds."""
        return {
            node
            for node, ready in self._ready_time.items()
            if ready - self._drain_time.get(node, ready) > timeout
        }
