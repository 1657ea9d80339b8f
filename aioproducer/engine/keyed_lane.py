"""The keyed shortcut of ``Producer.enqueue``: one keyed record straight into its partition's open batch.

A record with a bytes key and value, and no partition, headers or timestamp,
goes to the partition its key hashes to (Java's default partitioner:
``toPositive(murmur2(key)) % partitions``, over all of the topic's
partitions). The lane appends it to the open batch at the back of that
partition's queue when nothing is in doubt: the topic's metadata is known, the
queue has a batch that takes the record, the record is not too large, and
buffer memory is free without waiting. Otherwise it appends nothing and answers
None, and ``enqueue`` takes its full path, which decides (a new batch, a wait
for metadata or memory, an error). A record that leaves its batch full wakes
the sender, as on the full path (Java's ``batchIsFull``): the batch is
sendable now, whatever its linger.

The producer uses it only when the full path would choose the same partition
the same way: no custom partitioner, ``partitioner_ignore_keys`` off, no
serializers, not transactional (``EnqueueShortcut.plain``), and a topic already
checked.

:class:`KeyedLanePy` is the reference. When the C kernels are built,
:data:`KeyedLane` is its compiled twin (``_lanes.c``), which calls the batch's
compiled ``append_keyed`` directly.
tests/unit/test_keyed_lane.py runs both and proves they leave the same state
and answers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from time import time_ns
from typing import TYPE_CHECKING, Any

from .._speedups import kernels
from ..protocol.records import MAX_RECORD_OVERHEAD
from .batch import APPENDED, RECORD_HANDLE_OVERHEAD
from .buffer_pool import BufferPool
from .partitioner import partition_for_key

if TYPE_CHECKING:
    from ..net.client import KafkaClient
    from .batch import ProducerBatch
    from .record_handle import RecordHandlePy

__all__ = ["KEYED_RECORD_BOUND", "KeyedLane", "KeyedLanePy"]

# enqueue's upper bound of a keyed record without headers, less its key and
# value: the record bound with an empty header count (1).
KEYED_RECORD_BOUND = MAX_RECORD_OVERHEAD + 1 + 12


class KeyedLanePy:
    """The keyed shortcut's view of one started producer (see the module docstring).

    It holds the accumulator's own per-partition queues (never a copy), the
    buffer pool, the client (whose ``snapshot`` it reads per record: a refresh
    replaces it), the loop's future factory and the sender's ``wakeup``.
    """

    __slots__ = ("client", "deques", "max_size", "pool", "wake")

    def __init__(
        self,
        deques: dict[tuple[str, int], deque[ProducerBatch]],
        pool: BufferPool,
        client: KafkaClient,
        max_size: int,
        wake: Callable[[], None],
    ) -> None:
        self.deques = deques
        self.pool = pool
        self.client = client
        self.max_size = max_size  # the largest record bound the shortcut takes
        self.wake = wake  # Sender.wakeup: a batch this lane filled is sendable now

    def append(self, topic: str, key: bytes, value: bytes) -> RecordHandlePy | None:
        """Append a keyed record to its partition's open batch; its handle, or None."""
        info = self.client.snapshot.topics.get(topic)
        if info is None or not info.partitions:
            return None
        dq = self.deques.get(info.tps[partition_for_key(key, len(info.partitions))])
        if not dq:
            return None
        batch: Any = dq[-1]
        size = len(key) + len(value) + KEYED_RECORD_BOUND
        reserve = size + RECORD_HANDLE_OVERHEAD
        pool = self.pool
        # Reserved before the append; a refused append gives the bytes back
        # through the pool (a waiter may fit now).
        if size > self.max_size or not pool.try_reserve(reserve):
            return None
        try:
            # The handle first (its delta is the record count before the append):
            # once the record is appended, nothing may fail.
            now = time_ns() // 1_000_000
            handle: RecordHandlePy = batch.outcome.handle(
                batch.record_count,
                now,
                ((len(key) + 1) << 32) | (len(value) + 1),  # pack_sizes
            )
            appended = batch.append_keyed(now, key, value, reserve, size)
        except BaseException:
            pool.release(reserve)
            raise
        if not appended:
            pool.release(reserve)
            return None  # the batch is full, sealed or no longer open
        if appended != APPENDED:  # APPENDED + FULL (batch.py)
            self.wake()
        return handle


# The twin chosen once: the compiled lane is a type of the kernels (_lanes.c).
if TYPE_CHECKING:
    KeyedLane = KeyedLanePy
else:
    KeyedLane = kernels.KeyedLane if kernels is not None else KeyedLanePy
