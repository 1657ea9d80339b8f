"""Keyed Arrow rows grouped by their partition before they reach the producer.

Kafka's default partitioner puts a keyed record on
``toPositive(murmur2(key)) % numPartitions`` (Java's ``BuiltInPartitioner``).
Handed a chunk of keyed rows, the producer's bulk path hashes the keys in one
vectorized pass but then places the records one partition run at a time with
per-record bookkeeping in Python. The sink knows the whole chunk up front, so
it hashes the keys itself (the same vectorized murmur2), orders the rows by
partition with a stable sort (Arrow ``take``: C, no Python per row) and makes
one ``enqueue_many`` call per partition with that partition named: the
producer then appends each partition's rows as runs, record order within a
partition kept. The records and where they land are what the producer would
have chosen itself; only the work moves out of Python's per-record loop.

Rows with a null key have no key partition: they go in one call without a
partition, and the producer's sticky partitioner (KIP-480) places them.
"""

from __future__ import annotations

from typing import Any

from .columns import TopicColumns

__all__ = ["split_by_key", "splittable"]


def splittable(part: TopicColumns) -> bool:
    """Whether ``part``'s rows can be grouped here: Arrow keys and values,
    and no per-row partition, timestamp or headers columns."""
    if part.partitions is not None or part.timestamps is not None or part.headers is not None:
        return False
    try:
        import numpy  # noqa: F401 - the vectorized murmur2 needs it (optional with pyarrow)
        import pyarrow as pa
    except ImportError:
        return False
    keys, values = part.keys, part.values
    if not isinstance(keys, pa.Array) or not isinstance(values, pa.Array):
        return False
    t = keys.type
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    )


def split_by_key(part: TopicColumns, num_partitions: int) -> list[tuple[int | None, TopicColumns]]:
    """``part``'s rows as ``(partition, rows)`` groups, in partition order; the
    null-key rows first, with partition None. Call only where :func:`splittable`."""
    import numpy as np
    import pyarrow as pa

    from ..engine.partition_vector import arrow_key_partitions

    keys: Any = part.keys
    if len(keys) == 0:
        return [(None, part)]
    chosen = np.frombuffer(arrow_key_partitions(keys, num_partitions), dtype=np.int32)
    low, high = int(chosen.min()), int(chosen.max())
    if low == high:  # one partition (or only null keys): no reordering
        return [(None if low < 0 else low, _without_null_keys(part, low))]
    order = pa.array(np.argsort(chosen, kind="stable"))
    values, keys = part.values.take(order), keys.take(order)
    # Slot 0 counts the null keys (-1), slot p + 1 partition p.
    counts = np.bincount(chosen + 1, minlength=num_partitions + 1).tolist()
    groups: list[tuple[int | None, TopicColumns]] = []
    start = 0
    for slot, count in enumerate(counts):
        if not count:
            continue
        rows = TopicColumns(part.topic, values.slice(start, count), keys.slice(start, count))
        groups.append((slot - 1, rows) if slot else (None, _without_null_keys(rows, -1)))
        start += count
    return groups


def _without_null_keys(part: TopicColumns, partition: int) -> TopicColumns:
    # Rows whose keys are all null are unkeyed records: without a key column
    # the producer takes its run path (sticky partition) instead of record by record.
    if partition >= 0:
        return part
    return TopicColumns(part.topic, part.values)
