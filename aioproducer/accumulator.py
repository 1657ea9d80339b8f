"""Per-partition queues of batches, and the decisions of what to send where.

Invariants this module keeps:

* a partition's deque holds its unsent batches oldest first; a batch that must
  be retried goes back to the *front*, so it is sent before later batches;
* the accumulator never schedules timers, never completes or fails a batch and
  never touches producer-id state: it answers questions (:meth:`ready`,
  :meth:`drain`, :meth:`expired`) given ``now`` and the leaders, and the sender
  acts on the answers. That keeps it testable without an event loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .batch import ProducerBatch, pack_sizes
from .protocol.compression import Codec

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


def _send_order(batch: ProducerBatch) -> tuple[int, float]:
    return (batch.base_sequence, batch.created)


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
        self._drain_start: dict[int, int] = {}
        # Batches created and not yet completed or failed: flush() waits on these.
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closing = False

    def __repr__(self) -> str:
        queued = sum(len(d) for d in self._deques.values())
        return f"<RecordAccumulator queued={queued} incomplete={len(self.incomplete)}>"

    # -- filling -----------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] | None,
        future: Any,
        now: float,
        abort_on_new_batch: bool = False,
        sizes: int | None = None,
    ) -> ProducerBatch | None:
        """Append a record; return its batch (a new batch holds just this record).

        With ``abort_on_new_batch``, return None instead of starting a batch:
        the sticky partitioner then picks another partition (KIP-480).
        ``sizes`` is :func:`~aioproducer.batch.pack_sizes` of key and value,
        computed here when not given.
        """
        if sizes is None:
            sizes = pack_sizes(-1 if key is None else len(key), -1 if value is None else len(value))
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        elif dq:
            last = dq[-1]
            # ProducerBatch.try_append, inlined: this runs for every record.
            if not last.sealed and last.builder.append(timestamp_ms, key, value, headers) is not None:
                last.futures.append(future)
                last.sizes.append(sizes)
                last.timestamps.append(timestamp_ms)
                return last
        if abort_on_new_batch:
            return None
        batch = self.new_batch(tp, now)
        batch.try_append(timestamp_ms, key, value, headers, future, sizes)
        return batch

    def open_batch(self, tp: TopicPartition) -> ProducerBatch | None:
        """The batch of ``tp`` that still takes records, if any."""
        dq = self._deques.get(tp)
        if dq:
            last = dq[-1]
            if not last.sealed:
                return last
        return None

    def new_batch(self, tp: TopicPartition, now: float) -> ProducerBatch:
        """Start an empty batch at the back of ``tp``'s queue."""
        batch = ProducerBatch(
            tp[0],
            tp[1],
            codec=self.codec,
            batch_size=self.batch_size,
            now=now,
            delivery_timeout=self.delivery_timeout,
            compression_level=self.compression_level,
            is_transactional=self.is_transactional,
        )
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        dq.append(batch)
        self.incomplete.add(batch)
        return batch

    # -- deciding ----------------------------------------------------------

    def ready(self, now: float, leader_of: LeaderLookup, *, memory_exhausted: bool = False) -> ReadyResult:
        """Which leaders have a batch worth sending now, and when to look again.

        A partition's head batch is sendable when it is full, or has lingered
        ``linger_ms``, or a flush/close/memory shortage asks for everything,
        and it is not waiting out a retry backoff (KIP-580).
        """
        result = ReadyResult()
        urgent = memory_exhausted or self.flushing > 0 or self.closing
        linger = self.linger
        for tp, dq in self._deques.items():
            if not dq:
                continue
            leader = leader_of(tp[0], tp[1])
            if leader is None:
                result.unknown_leader_topics.add(tp[0])
                continue
            result.partitions.setdefault(leader, []).append(tp)
            if leader in result.nodes:
                continue
            head = dq[0]
            if head.attempts and head.retry_at > now:
                result.next_check = min(result.next_check, head.retry_at - now)
                continue
            if urgent or len(dq) > 1 or head.is_full():
                result.nodes.add(leader)
                continue
            wait = head.created + linger - now
            if head.attempts or wait <= 0:
                result.nodes.add(leader)
            else:
                result.next_check = min(result.next_check, wait)
        return result

    def drain(
        self,
        now: float,
        ready: ReadyResult,
        max_request_size: int,
        muted: Iterable[TopicPartition] = (),
    ) -> dict[int, list[ProducerBatch]]:
        """Take batches for each ready node, up to ``max_request_size`` per request.

        The partition to start from rotates per node so that, when a request
        fills up, the partitions left out get the first places next time.
        """
        muted_set = set(muted)
        out: dict[int, list[ProducerBatch]] = {}
        for node in ready.nodes:
            tps = ready.partitions.get(node, [])
            if not tps:
                continue
            start = self._drain_start.get(node, 0) % len(tps)
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
                    break
                dq.popleft()
                head.sealed = True
                taken.append(head)
                size += batch_size
            self._drain_start[node] = start + 1
            if taken:
                out[node] = taken
        return out

    def reenqueue(self, batch: ProducerBatch, now: float, backoff: float) -> None:
        """Put a batch that failed retriably back at the front of its partition.

        Retried batches queue ahead of new ones, among themselves in the order
        they were first sent (base sequence when idempotent, else creation), so
        that a partition's records keep their order.
        """
        batch.attempts += 1
        batch.retry_at = now + backoff
        batch.in_flight = False
        tp = (batch.topic, batch.partition)
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques[tp] = deque()
        key = _send_order(batch)
        index = 0
        for queued in dq:
            if not queued.attempts or _send_order(queued) > key:
                break
            index += 1
        dq.insert(index, batch)

    def retried_heads(self) -> list[TopicPartition]:
        """Partitions whose next batch is a retry."""
        return [tp for tp, dq in self._deques.items() if dq and dq[0].attempts]

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches past their delivery timeout."""
        out: list[ProducerBatch] = []
        for dq in self._deques.values():
            if dq and dq[0].deadline <= now:
                keep = [b for b in dq if b.deadline > now]
                out.extend(b for b in dq if b.deadline <= now)
                dq.clear()
                dq.extend(keep)
        return out

    def next_expiry(self) -> float:
        """The earliest delivery deadline of a queued batch (inf if none)."""
        return min((dq[0].deadline for dq in self._deques.values() if dq), default=float("inf"))

    def finished(self, batch: ProducerBatch) -> None:
        """Forget a batch that has been completed or failed, once its futures are resolved."""
        batch.when_done(self._forget)

    def _forget(self, batch: ProducerBatch) -> None:
        self.incomplete.discard(batch)

    def is_queued(self, batch: ProducerBatch) -> bool:
        dq = self._deques.get((batch.topic, batch.partition))
        return dq is not None and batch in dq

    def queued_batches(self) -> int:
        return sum(len(dq) for dq in self._deques.values())

    def take_partitions(self, partitions: Iterable[TopicPartition]) -> list[ProducerBatch]:
        """Remove and return every queued batch of ``partitions``, oldest first."""
        taken: list[ProducerBatch] = []
        for tp in partitions:
            dq = self._deques.get(tp)
            if dq:
                taken.extend(dq)
                dq.clear()
        return taken

    def take_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (for abort on close)."""
        out = [b for dq in self._deques.values() for b in dq]
        self._deques.clear()
        return out

    def queued_topics(self) -> set[str]:
        return {tp[0] for tp, dq in self._deques.items() if dq}
