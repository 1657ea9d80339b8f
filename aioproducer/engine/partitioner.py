"""Choosing a partition for a record that names one, has a key, or meets a custom partitioner.

* An explicit partition is checked against the topic's metadata.
* Keyed records: ``toPositive(murmur2(key)) % numPartitions``, byte for byte the
  Java client's ``BuiltInPartitioner.partitionForKey``, so the same key lands on
  the same partition whichever client wrote it.
* A custom partitioner is a callable
  ``(topic, serialized_key, num_partitions, available_partitions) -> int``; its
  answer is checked.

Records with none of these (unkeyed, or any with ``partitioner_ignore_keys``)
go to the uniform sticky partitioner of :mod:`.sticky`. A partition returned
here is always in ``[0, number of partitions)``; bad input raises a typed error
naming it and places nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import errors
from .._speedups import kernels
from ..config import PartitionerFn

if TYPE_CHECKING:
    from ..net.cluster import TopicInfo

__all__ = ["PartitionerFn", "choose_partition", "murmur2", "partition_for_key"]


_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as a signed 32-bit int like Java's.

    Anything but exactly bytes is hashed as the bytes its buffer holds, in C
    order (``memoryview(data).tobytes()``): a memoryview of any format or
    stride, an ``array('b')`` or a bytes subclass hashes as its bytes, never as
    its items (which may be signed or wider than a byte); an object without a
    buffer raises memoryview's TypeError.
    """
    if type(data) is not bytes:
        data = memoryview(data).tobytes()
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


def choose_partition(
    topic: str,
    partition: int | None,
    key: bytes | None,
    info: TopicInfo,
    custom: PartitionerFn | None,
) -> int:
    """The partition of a keyed record, or one with ``partition`` or a custom partitioner.

    ``custom`` is the configured ``partitioner(topic, key, num_partitions,
    available)`` or None; without either, ``key`` must not be None.
    """
    num_partitions = len(info.partitions)
    if partition is not None:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition must be an int, got {type(partition).__name__}")
        if not 0 <= partition < num_partitions:
            raise errors.InvalidPartitionError(
                f"partition {partition} is not in the range [0...{num_partitions}) "
                f"of topic {topic!r}: the topic has {num_partitions} partition(s)"
            )
        return partition
    if custom is not None:
        chosen = custom(topic, key, num_partitions, info.available)
        if isinstance(chosen, bool) or not isinstance(chosen, int) or not 0 <= chosen < num_partitions:
            raise errors.InvalidPartitionError(
                f"the partitioner returned {chosen!r} for topic {topic!r} with "
                f"{num_partitions} partitions"
            )
        return chosen
    assert key is not None
    return partition_for_key(key, num_partitions)
