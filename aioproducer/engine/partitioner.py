"""Choosing a partition for a record.

* Keyed records: ``toPositive(murmur2(key)) % numPartitions``, byte for byte the
  Java client's ``BuiltInPartitioner.partitionForKey``, so the same key lands on
  the same partition whichever client wrote it.
* Unkeyed records: the uniform sticky partitioner (KIP-794), as Java's
  ``BuiltInPartitioner``: stay on one partition until ``batch_size`` bytes were
  produced to it (switching when its last batch is full, or at twice that
  regardless), then move to another partition. With adaptive partitioning the
  next one is drawn with weights that fall as a partition's queue of unsent
  batches grows, so a slow broker's partitions get fewer new records;
  partitions whose broker had batches ready but undrained for longer than
  ``partitioner_availability_timeout_ms`` are left out. Batches fill up instead
  of spreading one record per partition, which is what makes low
  ``linger_ms`` cheap.
* A custom partitioner is a callable
  ``(topic, serialized_key, num_partitions, available_partitions) -> int``.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence
from typing import Any

from .._speedups import kernels

__all__ = [
    "PartitionerFn",
    "StickyPartitioner",
    "cumulative_frequencies",
    "murmur2",
    "next_sticky_partition",
    "partition_for_key",
    "weighted_index",
]

PartitionerFn = Callable[[str, "bytes | None", int, Sequence[int]], int]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit int like Java's."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length & 3
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


_murmur2_pure = murmur2  # the reference; tests compare the compiled twin with it
if kernels is not None:
    murmur2 = kernels.murmur2  # the C twin (see aioproducer._speedups)


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def cumulative_frequencies(queue_sizes: Sequence[int]) -> list[int] | None:
    """Java's ``updatePartitionLoadStats``: queue sizes -> cumulative frequency table.

    Each partition's weight is ``max(queue_sizes) + 1 - its size``, so an empty
    queue weighs most and the longest queue weighs 1. None when every size is
    equal: a uniform choice does the same, cheaper.
    """
    if len(queue_sizes) < 2:
        return None
    top = max(queue_sizes)
    if min(queue_sizes) == top:
        return None
    table = []
    running = 0
    for size in queue_sizes:
        running += top + 1 - size
        table.append(running)
    return table


def weighted_index(table: Sequence[int], rand: int) -> int:
    """The index of the first entry of ``table`` strictly greater than ``rand % table[-1]``."""
    return bisect.bisect_right(table, rand % table[-1])


def next_sticky_partition(
    candidates: Sequence[int], queue_sizes: Sequence[int] | None, rand: int
) -> int:
    """Java's ``BuiltInPartitioner.nextPartition`` over ``candidates`` (non-empty).

    ``queue_sizes`` (one per candidate, or None when adaptive partitioning is
    off) weights the choice; ``rand`` is a non-negative random int.
    """
    table = cumulative_frequencies(queue_sizes) if queue_sizes is not None else None
    if table is None:
        return candidates[rand % len(candidates)]
    return candidates[weighted_index(table, rand)]


class StickyPartitioner:
    """Each topic's current partition for unkeyed records and the bytes produced to it (KIP-794)."""

    __slots__ = ("_rand", "batch_size", "current", "filling", "produced")

    def __init__(self, batch_size: int = 16384, rand: random.Random | None = None) -> None:
        self.batch_size = batch_size
        self.current: dict[str, int] = {}
        self.produced: dict[str, int] = {}
        # The producer's shortcut per topic: the open batch of the current
        # partition (weakly) and the topic's metadata (TopicInfo) it was
        # chosen under. Dropped on every switch, so it never outlives the
        # choice it caches.
        self.filling: dict[str, tuple[Any, Any]] = {}
        self._rand = rand or random.Random()

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """The topic's current partition, choosing one if it has none (or it no longer exists)."""
        current = self.current.get(topic)
        if current is None or current >= num_partitions:
            current = self.next_partition(topic, num_partitions, available)
        return current

    def appended(self, topic: str, size: int, batch_full: bool) -> bool:
        """Count ``size`` bytes produced to the current partition; True when it is time to switch.

        As Java's ``updatePartitionInfo``: switch after ``batch_size`` bytes if
        the partition's last batch is full (so batches are not cut short),
        and after twice that in any case.
        """
        produced = self.produced.get(topic, 0) + size
        self.produced[topic] = produced
        return (batch_full and produced >= self.batch_size) or produced >= 2 * self.batch_size

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
