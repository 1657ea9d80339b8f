"""Every rule of where a record goes: the keyed hash, the sticky switch, the next sticky partition.

This module is the one pure reference of the partitioner; the compiled twin is
``_speedups/_partitioning.h`` (used by the compiled lanes, ``_lane.c`` and
``_append.c``). Change a rule here and there together:
tests/unit/test_partitioning_twins.py compares both sides on random input and
with the Java client's own values, so a change of one side alone fails.

* An explicit partition is checked against the topic's metadata.
* Keyed records: ``toPositive(murmur2(key)) % numPartitions``, byte for byte the
  Java client's ``BuiltInPartitioner.partitionForKey``, so the same key lands on
  the same partition whichever client wrote it. murmur2's steps are written so
  that they also run on numpy uint32 arrays (:mod:`.partition_vector` hashes a
  whole Arrow key column with them).
* A custom partitioner is a callable
  ``(topic, serialized_key, num_partitions, available_partitions) -> int``; its
  answer is checked.
* Records with none of these (unkeyed, or any with ``partitioner_ignore_keys``)
  go to the uniform sticky partitioner (KIP-480, KIP-794): :func:`time_to_switch`
  and :func:`switch_when_full` say when it moves on, :func:`next_sticky_partition`
  where to. Its state (the current partition, the bytes produced to it) lives in
  :mod:`.sticky`.

A partition returned here is always in ``[0, number of partitions)``; bad input
raises a typed error naming it and places nothing.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import errors
from .._speedups import kernels
from ..types import PartitionerFn

if TYPE_CHECKING:
    from ..net.cluster import TopicInfo

__all__ = [
    "PartitionerFn",
    "choose_partition",
    "cumulative_frequencies",
    "goes_sticky",
    "murmur2",
    "murmur2_finish",
    "murmur2_start",
    "murmur2_tail",
    "murmur2_word",
    "next_sticky_partition",
    "partition_for_hash",
    "partition_for_key",
    "switch_when_full",
    "time_to_switch",
    "weighted_index",
]

# -- the keyed partition: Kafka's murmur2 (Java's Utils.murmur2) --------------

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF

# Each step takes and returns an unsigned 32-bit value: a Python int, or a numpy
# uint32 array (its arithmetic wraps modulo 2**32, and the mask keeps it so).


def murmur2_start(length: Any) -> Any:
    """The hash before any byte of a key of ``length`` bytes: ``seed ^ length``."""
    return (_SEED ^ length) & _MASK


def murmur2_word(h: Any, k: Any) -> Any:
    """Mix the next little-endian 4-byte word ``k`` of the key into ``h``."""
    k = (k * _M) & _MASK
    k ^= k >> 24
    k = (k * _M) & _MASK
    return ((h * _M) & _MASK) ^ k


def murmur2_tail(h: Any, t: Any) -> Any:
    """Mix the last 1-3 bytes (``t``, little-endian) of a key whose length is not a multiple of 4."""
    return ((h ^ t) * _M) & _MASK


def murmur2_finish(h: Any) -> Any:
    """The final avalanche: the unsigned hash."""
    h = ((h ^ (h >> 13)) * _M) & _MASK
    return h ^ (h >> 15)


# The little-endian 4-byte words of a key, unpacked at once (for keys < 256 bytes).
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(64)]


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
    h: int = murmur2_start(length)  # the steps take ints or arrays, so are typed Any
    n = length >> 2
    word = murmur2_word
    for k in (_WORDS[n] if n < len(_WORDS) else struct.Struct(f"<{n}I").unpack_from)(data):
        h = word(h, k)
    if length & 3:
        h = murmur2_tail(h, int.from_bytes(data[n * 4 :], "little"))
    h = murmur2_finish(h)
    return h - (1 << 32) if h & 0x80000000 else h


_murmur2_pure = murmur2  # the reference; tests compare the compiled twin with it
if kernels is not None:
    murmur2 = kernels.murmur2  # the C twin (_partitioning.h's murmur2_buffer)


def partition_for_hash(h: Any, num_partitions: int) -> Any:
    """Java's ``Utils.toPositive(hash) % numPartitions`` (a hash, or a numpy array of them)."""
    return (h & 0x7FFFFFFF) % num_partitions


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Java's ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % numPartitions``."""
    partition: int = partition_for_hash(murmur2(key), num_partitions)
    return partition


# -- the sticky partition (KIP-480, KIP-794: Java's BuiltInPartitioner) --------


def goes_sticky(partition: int | None, key: object, ignore_keys: bool, custom: object) -> bool:
    """Whether a record goes to the uniform sticky partitioner (Java's ``KafkaProducer.partition``).

    Not with an explicit partition or a custom partitioner; else when it has
    no key, or keys are ignored (``partitioner.ignore.keys``, KIP-794).
    """
    return partition is None and custom is None and (key is None or ignore_keys)


def time_to_switch(produced: int, limit: int, filled: int, size: int) -> bool:
    """Java's ``updatePartitionInfo`` rule: move on from the current partition now?

    ``produced`` bytes (record bounds) went to it, ``filled`` is the encoded
    size of its open batch and ``size`` the bound of the record just appended:
    yes once ``limit`` (``batch_size``) bytes went there and the batch has no
    room for another such record, or at twice ``limit`` regardless. Exact for
    any ints (the twin computes it without overflow over int64).
    """
    return produced >= limit and (produced >= 2 * limit or filled + size > limit)


def switch_when_full(produced: int, limit: int) -> bool:
    """The current partition's batch took no more records: move on now?

    :func:`time_to_switch` with a batch that has no room: once ``limit``
    bytes went to the partition (else the new batch stays on it).
    """
    return produced >= limit


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


# -- an explicit or custom partition ------------------------------------------


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
        if (
            isinstance(chosen, bool)
            or not isinstance(chosen, int)
            or not 0 <= chosen < num_partitions
        ):
            raise errors.InvalidPartitionError(
                f"the partitioner returned {chosen!r} for topic {topic!r} with "
                f"{num_partitions} partitions"
            )
        return chosen
    assert key is not None
    return partition_for_key(key, num_partitions)
