"""The unkeyed shortcut of ``Producer.enqueue``: one record straight into the open batch.

Most records an application sends carry no key, no headers, no partition and
no timestamp. Such a record goes to the open batch of its topic's sticky
partition (KIP-480), which the partitioner keeps in ``StickyPartitioner.filling``
with the metadata it was chosen under. The lane appends it there when nothing
is in doubt: the batch is alive and open with room, the topic's metadata is
still the one the batch was chosen under, the record is not too large, and
buffer memory is free without waiting. On any doubt it appends nothing and
answers None, and ``enqueue`` takes its full path, which decides. A record
that leaves its batch full wakes the sender, as on the full path (Java's
``batchIsFull``): the batch is sendable now, whatever its linger.

:class:`UnkeyedLanePy` is the reference. When the C kernels are built,
:data:`UnkeyedLane` is their compiled twin (``_lanes.c``), which does the
same steps without a Python frame or attribute lookup per step, and calls the
batch's compiled ``append_unkeyed`` directly on a ``BatchCore`` (a
``ProducerBatch``) with a compiled builder and outcome.
tests/unit/test_unkeyed_lane.py runs both and proves they leave the same
state and answers.
"""

from __future__ import annotations

from collections.abc import Callable
from time import time_ns
from typing import TYPE_CHECKING, Any

from .._speedups import kernels
from ..protocol.records import MAX_RECORD_OVERHEAD
from .batch import APPENDED, FULL, RECORD_HANDLE_OVERHEAD, SWITCH
from .buffer_pool import BufferPool

if TYPE_CHECKING:
    from ..net.client import KafkaClient
    from .record_handle import RecordHandlePy
    from .sticky import StickyPartitioner

__all__ = ["UNKEYED_RECORD_BOUND", "UnkeyedLane", "UnkeyedLanePy"]

# enqueue's upper bound of an unkeyed record without headers, less its value:
# the record bound with a null key (-1) and an empty header count (1).
UNKEYED_RECORD_BOUND = MAX_RECORD_OVERHEAD + 12


class UnkeyedLanePy:
    """The shortcut's view of one started producer (see the module docstring).

    It holds the partitioner's own ``filling`` and ``produced`` dicts (never
    copies), the buffer pool, the client (whose ``snapshot`` it reads per
    record: a refresh replaces it), the loop's future factory and the
    sender's ``wakeup``.
    """

    __slots__ = (
        "batch_size",
        "client",
        "filling",
        "max_size",
        "move_on",
        "pool",
        "produced",
        "wake",
    )

    def __init__(
        self,
        sticky: StickyPartitioner,
        pool: BufferPool,
        client: KafkaClient,
        max_size: int,
        wake: Callable[[], None],
    ) -> None:
        self.filling = sticky.filling
        self.produced = sticky.produced
        self.batch_size = sticky.batch_size
        self.move_on = sticky.move_on
        self.pool = pool
        self.client = client
        self.max_size = max_size  # the largest record bound the shortcut takes
        self.wake = wake  # Sender.wakeup: a batch this lane filled is sendable now

    def append(self, topic: str, value: bytes) -> RecordHandlePy | None:
        """Append an unkeyed record to the topic's filling batch; its handle, or None."""
        filling = self.filling.get(topic)
        if filling is None:
            return None
        batch_ref, known = filling
        # Weak: a delivered batch dies with its records. The partitioner keeps
        # it by its shape; what it keeps is the ProducerBatch the producer put there.
        batch: Any = batch_ref()
        size = len(value) + UNKEYED_RECORD_BOUND
        reserve = size + RECORD_HANDLE_OVERHEAD
        pool = self.pool
        if (
            batch is None
            # The topic's entry, not the snapshot: forgetting an idle topic
            # drops it from the snapshot in place.
            or self.client.snapshot.topics.get(topic) is not known
            or size > self.max_size
            # Reserved before the append: the pool is the counter's only other
            # writer, and a refused append gives the bytes back through it.
            or not pool.try_reserve(reserve)
        ):
            return None
        try:
            # The handle first (its delta is the record count before the append):
            # once the record is appended, nothing may fail.
            now = time_ns() // 1_000_000
            handle: RecordHandlePy = batch.outcome.handle(
                batch.record_count, now, len(value) + 1
            )  # pack_sizes(-1, len(value))
            # One call appends it and counts it for the sticky partitioner.
            appended = batch.append_unkeyed(
                now, value, reserve, size, self.produced, topic, self.batch_size
            )
        except BaseException:
            pool.release(reserve)
            raise
        if not appended:
            pool.release(reserve)  # through the pool: a waiter may fit now
            return None  # the batch is full or sealed
        if appended != APPENDED:  # SWITCH, FULL or both (batch.py)
            if appended & FULL:
                self.wake()
            if appended & SWITCH:
                self.move_on(topic, known)
        return handle


# The twin chosen once: the compiled lane is a type of the kernels (_lanes.c).
if TYPE_CHECKING:
    UnkeyedLane = UnkeyedLanePy
else:
    UnkeyedLane = kernels.UnkeyedLane if kernels is not None else UnkeyedLanePy
