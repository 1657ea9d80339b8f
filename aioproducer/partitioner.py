"""Choosing a partition for a record.

* Keyed records: ``toPositive(murmur2(key)) % numPartitions``, byte for byte the
  Java client's ``BuiltInPartitioner.partitionForKey``, so the same key lands on
  the same partition whichever client wrote it.
* Unkeyed records: sticky partitioning (KIP-480). Stay on one partition until
  a new batch would be started there, then move to another partition chosen at
  random among those with a leader. Batches fill up instead of spreading one
  record per partition, which is what makes low ``linger_ms`` cheap.
* A custom partitioner is a callable
  ``(topic, serialized_key, num_partitions, available_partitions) -> int``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

__all__ = ["PartitionerFn", "StickyPartitioner", "murmur2", "partition_for_key"]

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


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """The partition each topic's unkeyed records currently stick to (KIP-480)."""

    __slots__ = ("current", "_rand", "used_topics")

    def __init__(self, rand: random.Random | None = None) -> None:
        self.current: dict[str, int] = {}
        # Topics whose current partition has received a record since it was chosen.
        self.used_topics: set[str] = set()
        self._rand = rand or random.Random()

    def used(self, topic: str) -> bool:
        return topic in self.used_topics

    def mark_used(self, topic: str) -> None:
        self.used_topics.add(topic)

    def partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        current = self.current.get(topic)
        if current is None or current >= num_partitions:
            current = self._pick(num_partitions, available, None)
            self.current[topic] = current
        return current

    def next_partition(self, topic: str, num_partitions: int, available: Sequence[int]) -> int:
        """Move on from the current partition (its batch is full or was sent)."""
        current = self._pick(num_partitions, available, self.current.get(topic))
        self.current[topic] = current
        self.used_topics.discard(topic)
        return current

    def _pick(self, num_partitions: int, available: Sequence[int], avoid: int | None) -> int:
        choices = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(choices) > 1 and avoid is not None:
            choices = [p for p in choices if p != avoid]
        return choices[self._rand.randrange(len(choices))]
