"""Which partition a record goes to, and the sticky partitioner's switches.

Pure rules over the producer's state, passed in as arguments: the explicit
partition (checked against the topic's metadata), the custom partitioner (its
answer checked), the key's murmur2 hash, and KIP-794's uniform sticky
partitioner switching partitions on a batch boundary, preferring partitions
whose leaders keep up (``partitioner_adaptive_partitioning``).

Invariants:

* a partition returned here is always in ``[0, number of partitions)``; bad
  input raises a typed error naming it and places nothing;
* the sticky partitioner's per-topic state is dropped only together with the
  accumulator's, and only for a topic with no pending record.

The unkeyed per-record path (stay on the sticky partition, count the bytes) is
inlined in ``Producer.enqueue``: only a switch calls in here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import errors
from ..config import ProducerConfig
from ..net.cluster import TopicInfo
from .accumulator import RecordAccumulator
from .partitioner import PartitionerFn, StickyPartitioner, partition_for_key

__all__ = ["choose_partition", "forget_idle_topics", "maybe_switch_sticky", "next_sticky_partition"]


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


def next_sticky_partition(
    sticky: StickyPartitioner,
    acc: RecordAccumulator,
    config: ProducerConfig,
    topic: str,
    info: TopicInfo,
) -> None:
    """Switch the topic's sticky partition (KIP-794's BuiltInPartitioner.nextPartition).

    With adaptive partitioning, partitions whose leader has not drained a
    batch for ``partitioner_availability_timeout_ms`` are skipped (unless all
    are), and the choice favours partitions with shorter queues.
    """
    available: Sequence[int] = info.available
    queue_sizes = None
    if config.partitioner_adaptive_partitioning and len(info.partitions) > 1:
        if config.partitioner_availability_timeout_ms > 0 and available:
            slow = acc.unavailable_nodes(config.partitioner_availability_timeout_ms / 1000)
            if slow:
                kept = [p for p in available if info.partitions[p].leader not in slow]
                available = kept or available
        queue_sizes = acc.queue_sizes(topic, available or range(len(info.partitions)))
    sticky.next_partition(topic, len(info.partitions), available, queue_sizes)


def maybe_switch_sticky(
    sticky: StickyPartitioner,
    acc: RecordAccumulator,
    config: ProducerConfig,
    topic: str,
    info: TopicInfo,
    produced: int,
    batch_bytes: int,
    size: int,
) -> None:
    """Switch the topic's sticky partition if it is time (KIP-794).

    Called once ``produced``, the bytes sent to the current partition, reached
    ``batch_size``: move on when the open batch (``batch_bytes`` so far) has no
    room for another record of ``size`` (so the switch falls on a batch
    boundary), or at twice ``batch_size`` regardless.
    """
    limit = sticky.batch_size
    if produced >= 2 * limit or batch_bytes + size > limit:
        next_sticky_partition(sticky, acc, config, topic, info)


def forget_idle_topics(
    acc: RecordAccumulator, sticky: StickyPartitioner, topics: list[str]
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
