"""The uniform sticky partitioner (KIP-794): where records without a partition go, and when that changes.

As Java's ``BuiltInPartitioner``: a topic's unkeyed records (every record,
with ``partitioner_ignore_keys``) stay on one partition until ``batch_size``
bytes were produced to it, and then move on when its open batch has no room
for the next record (so the switch falls on a batch boundary), or at twice
``batch_size`` regardless. With adaptive partitioning the next partition is
drawn with weights that fall as a partition's queue of unsent batches grows,
so a slow broker's partitions get fewer new records, and partitions whose
broker had batches ready but undrained for longer than
``partitioner_availability_timeout_ms`` are left out. Batches fill up instead
of spreading one record per partition, which is what makes low ``linger_ms``
cheap.

Every path that places such records (``Producer.enqueue``, its unkeyed
shortcut and the bulk path) asks :class:`StickyPartitioner` and reports to it
what it appended; nothing else keeps or changes this state, with one
exception for speed: the unkeyed shortcut's append
(``ProducerBatch.append_unkeyed``, one compiled call per record) counts its
record in :attr:`StickyPartitioner.produced` itself, and the shortcut then
calls :meth:`StickyPartitioner.move_on` when it is time.

This module keeps the state (each topic's current partition, the bytes
produced to it, the adaptive weights' inputs); the rules it applies (when to
move on, where to) are :mod:`.partitioner`'s, whose compiled twin the
shortcut's append runs.

Invariants: a partition returned here is in ``[0, number of partitions)``; a
topic's state is dropped only together with the accumulator's, and only for a
topic with no pending record (:func:`forget_idle_topics`).
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from .partitioner import next_sticky_partition, switch_when_full, time_to_switch

if TYPE_CHECKING:
    from ..net.cluster import TopicInfo

__all__ = [
    "PartitionLoad",
    "StickyPartitioner",
    "forget_idle_topics",
]


class _Builder(Protocol):
    @property
    def size_in_bytes(self) -> int: ...


class FillingBatch(Protocol):
    """What the partitioner reads of the batch a record went to (a ``ProducerBatch``;
    named by its shape, so that this module does not import the batch module)."""

    @property
    def builder(self) -> _Builder: ...


class PartitionLoad(Protocol):
    """What adaptive partitioning asks the accumulator."""

    def queue_sizes(self, topic: str, partitions: Iterable[int]) -> list[int]: ...
    def unavailable_nodes(self, timeout: float) -> set[int]: ...
    def forget_topic(self, topic: str) -> bool: ...


class StickyPartitioner:
    """Each topic's current partition for unkeyed records and the bytes produced to it (KIP-794)."""

    __slots__ = (
        "_availability_timeout",
        "_load",
        "_rand",
        "adaptive",
        "batch_size",
        "current",
        "filling",
        "produced",
    )

    def __init__(
        self,
        batch_size: int = 16384,
        rand: random.Random | None = None,
        *,
        load: PartitionLoad | None = None,
        adaptive: bool = False,
        availability_timeout_ms: int = 0,
    ) -> None:
        self.batch_size = batch_size
        self.current: dict[str, int] = {}
        self.produced: dict[str, int] = {}
        # The producer's shortcut per topic: the open batch of the current
        # partition (weakly: a delivered batch dies with its records) and the
        # topic's metadata (TopicInfo) it was chosen under. Dropped on every
        # switch, so it never outlives the choice it caches.
        self.filling: dict[str, tuple[weakref.ReferenceType[FillingBatch], TopicInfo]] = {}
        self._rand = rand or random.Random()
        # Adaptive partitioning weighs partitions by the accumulator's queues.
        self._load = load
        self.adaptive = adaptive and load is not None
        self._availability_timeout = availability_timeout_ms / 1000

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """The topic's current partition, choosing one if it has none (or it no longer exists)."""
        current = self.current.get(topic)
        if current is None or current >= num_partitions:
            current = self.next_partition(topic, num_partitions, available)
        return current

    def appended(self, topic: str, size: int, batch: FillingBatch, info: TopicInfo) -> None:
        """A record of ``size`` bytes (its bound) went to the current partition's ``batch``.

        Counts it, and moves on when it is time (Java's ``updatePartitionInfo``):
        once ``batch_size`` bytes went there and the batch has no room for
        another such record, or at twice ``batch_size`` regardless.
        """
        produced = self.produced.get(topic, 0) + size
        self.produced[topic] = produced
        limit = self.batch_size
        if time_to_switch(produced, limit, batch.builder.size_in_bytes, size):
            self.move_on(topic, info)

    def count(self, topic: str, size: int) -> None:
        """Count bytes of a bulk run produced to the current partition; :meth:`switch_due` decides."""
        self.produced[topic] = self.produced.get(topic, 0) + size

    def switch_due(self, topic: str) -> bool:
        """The current partition's batch is full: is it time to move on?"""
        return switch_when_full(self.produced.get(topic, 0), self.batch_size)

    def filling_batch(self, topic: str, batch: FillingBatch, info: TopicInfo) -> None:
        """Cache ``batch`` as the open batch of the topic's current partition for the shortcut."""
        self.filling[topic] = (weakref.ref(batch), info)

    def move_on(self, topic: str, info: TopicInfo) -> int:
        """Switch the topic's partition (KIP-794's ``BuiltInPartitioner.nextPartition``).

        With adaptive partitioning, partitions whose leader has not drained a
        batch for ``partitioner_availability_timeout_ms`` are skipped (unless all
        are), and the choice favours partitions with shorter queues.
        """
        available: Sequence[int] = info.available
        queue_sizes = None
        load = self._load
        if self.adaptive and load is not None and len(info.partitions) > 1:
            if self._availability_timeout > 0 and available:
                slow = load.unavailable_nodes(self._availability_timeout)
                if slow:
                    kept = [p for p in available if info.partitions[p].leader not in slow]
                    available = kept or available
            queue_sizes = load.queue_sizes(topic, available or range(len(info.partitions)))
        return self.next_partition(topic, len(info.partitions), available, queue_sizes)

    def next_partition(
        self,
        topic: str,
        num_partitions: int,
        available: Sequence[int],
        queue_sizes: Sequence[int] | None = None,
    ) -> int:
        """Move to another partition: among ``available`` (all if none), weighted by ``queue_sizes``.

        ``queue_sizes`` are per entry of ``available``, or None for a uniform choice.
        """
        candidates: Sequence[int] = [p for p in available if p < num_partitions]
        if len(candidates) != len(available):
            queue_sizes = None
        if not candidates:
            candidates, queue_sizes = range(num_partitions), None
        chosen = next_sticky_partition(candidates, queue_sizes, self._rand.getrandbits(31))
        self.filling.pop(topic, None)
        self.current[topic] = chosen
        self.produced[topic] = 0
        return chosen

    def forget(self, topic: str) -> None:
        self.filling.pop(topic, None)
        self.current.pop(topic, None)
        self.produced.pop(topic, None)


def forget_idle_topics(
    acc: PartitionLoad, sticky: StickyPartitioner, topics: list[str]
) -> list[str]:
    """Drop the state of idle topics (metadata_max_idle_ms) that have no pending record.

    Returns the topics dropped. Sequence numbers are kept: the broker
    remembers them for this producer id, and a partition restarted at 0
    would be refused.
    """
    dropped = []
    for topic in topics:
        if acc.forget_topic(topic):
            sticky.forget(topic)
            dropped.append(topic)
    return dropped
