"""Where a record enters the engine: its partition, its batch, and what appending it sets off.

``Producer.enqueue`` (after its checks and serialization) and the bulk path
(``enqueue_many``) place records through one :class:`Admission`, built when
the producer starts; the lanes of ``enqueue``'s shortcut take the common
cases before it and leave anything in doubt to it. It owns the rules that
must not differ between those paths:

* **the partition** (:meth:`Admission.choose`): an explicit one, else the
  custom partitioner's, else ``murmur2(key)``'s (Java's
  ``BuiltInPartitioner.partitionForKey``), else the uniform sticky one
  (KIP-794; every record with ``partitioner_ignore_keys``);
* **the waits**, both within ``max_block_ms``: the topic's metadata and
  buffer memory (:meth:`Admission.topic_info`, :meth:`Admission.reserve`);
  the buffer pool is the one that counts its memory;
* **the batch** (:meth:`Admission.batch_for`, :meth:`Admission.place`): the
  partition's open batch, else a new one, which is announced once and the
  same way whichever path opened it: the topic counts as used
  (``metadata_max_idle_ms``), the sender sees to its linger clock
  (``Sender.batch_opened``), and, when the sender has a pass due, the next
  ``enqueue`` gives it a turn first;
* **after the append**: a transaction takes the partition
  (``TransactionManager.add_partition``, checked before the append since
  nothing may fail after it), and a batch the record left full wakes the
  sender (Java's ``batchIsFull``).

Nothing here awaits once a record is appended: a cancelled caller has either
appended nothing or appended a record whose future resolves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .partitioner import PartitionerFn, choose_partition, goes_sticky

if TYPE_CHECKING:
    from ..net.client import KafkaClient
    from ..net.cluster import TopicInfo
    from ..net.metadata_wait import MetadataWait
    from .accumulator import RecordAccumulator
    from .batch import ProducerBatch
    from .buffer_pool import BufferPool
    from .record_handle import RecordHandlePy
    from .sender import Sender
    from .shortcut import EnqueueShortcut
    from .sticky import StickyPartitioner
    from .transactions import TransactionManager

__all__ = ["Admission"]

Headers = Sequence[tuple[str, bytes | None]]
TopicPartition = tuple[str, int]


class Admission:
    """The one way into the engine for a checked record (see the module docstring)."""

    __slots__ = (
        "_acc",
        "_client",
        "_custom",
        "_ignore_keys",
        "_max_block",
        "_metadata_wait",
        "_pool",
        "_sender",
        "_shortcut",
        "_sticky",
        "_txn",
        "fills_lanes",
    )

    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        sticky: StickyPartitioner,
        client: KafkaClient,
        sender: Sender,
        txn: TransactionManager | None,
        shortcut: EnqueueShortcut,
        partitioner: PartitionerFn | None,
        ignore_keys: bool,
        max_block: float,
        metadata_wait: MetadataWait,
        fills_lanes: bool,
    ) -> None:
        self._acc = accumulator
        self._pool = pool
        self._sticky = sticky
        self._client = client
        self._sender = sender
        self._txn = txn
        self._shortcut = shortcut
        self._custom = partitioner
        self._ignore_keys = ignore_keys
        self._max_block = max_block
        self._metadata_wait = metadata_wait
        #: Whether a sticky record's batch is handed to the unkeyed lane
        #: (no serializers: the lane takes only bytes records).
        self.fills_lanes = fills_lanes

    # -- the waits -----------------------------------------------------------

    def deadline(self) -> float:
        """When a wait that starts now must end (``max_block_ms`` from now)."""
        return time.monotonic() + self._max_block

    async def topic_info(self, topic: str, partition: int | None) -> TopicInfo:
        """The topic's metadata with ``partition`` in it, from one fresh answer if needed."""
        return await self._metadata_wait.topic_info(self._client, topic, partition)

    def try_reserve(self, nbytes: int) -> bool:
        """Take ``nbytes`` of buffer memory if it is free now, with nobody waiting before."""
        return self._pool.try_reserve(nbytes)

    async def reserve(self, nbytes: int, deadline: float) -> None:
        """Take ``nbytes`` of buffer memory, waiting until ``deadline`` at most (KafkaTimeoutError)."""
        pool = self._pool
        if not pool.try_reserve(nbytes):
            await pool.reserve(nbytes, max(0.0, deadline - time.monotonic()))

    def release(self, nbytes: int) -> None:
        """Give back memory reserved for a record that was not appended."""
        self._pool.release(nbytes)

    async def wait_for_room(
        self,
        topic: str,
        info: TopicInfo | None,
        partition: int | None,
        reserve: int,
        recheck: Callable[[], object],
    ) -> TopicInfo:
        """A record's waits, together within ``max_block_ms``: the topic's metadata
        (unknown, or without ``partition`` until a refresh), then ``reserve`` bytes of
        buffer memory, not reserved yet. ``recheck`` raises if the producer or its
        transaction moved on meanwhile; the bytes are given back then."""
        deadline = self.deadline()
        if (
            info is None
            or not info.partitions
            or (type(partition) is int and partition >= len(info.partitions))
        ):
            info = await self.topic_info(topic, partition)
        await self.reserve(reserve, deadline)
        try:
            recheck()
        except BaseException:
            self.release(reserve)
            raise
        return info

    # -- the partition ---------------------------------------------------------

    def sticky(self, key: Any, partition: int | None) -> bool:
        """Whether a record goes to the uniform sticky partitioner (KIP-794)."""
        return goes_sticky(partition, key, self._ignore_keys, self._custom)

    def sticky_partition(self, topic: str, info: TopicInfo, *, move: bool = False) -> int:
        """The topic's sticky partition; ``move``: its batch is full, time to move on."""
        sticky = self._sticky
        if move:
            sticky.move_on(topic, info)  # adaptive when configured
        return sticky.partition(topic, len(info.partitions), info.available)

    def choose(self, topic: str, info: TopicInfo, partition: int | None, key: bytes | None) -> int:
        """The record's partition: explicit, custom, keyed or sticky (raises on a bad one)."""
        if self.sticky(key, partition):
            return self.sticky_partition(topic, info)
        return choose_partition(topic, partition, key, info, self._custom)

    # -- the batch -------------------------------------------------------------

    def register(self, tp: TopicPartition) -> None:
        """The transaction takes ``tp`` (before a record of it is appended: this may raise)."""
        if self._txn is not None:
            self._txn.add_partition(tp)

    def batch_for(
        self, tp: TopicPartition, topic: str, now: float, *, new: bool = False
    ) -> ProducerBatch:
        """``tp``'s open batch, or (``new``, or none open) a new one, announced."""
        batch = None if new else self._acc.open_batch(tp)
        if batch is None:
            batch = self._acc.new_batch(tp, now)
            self._opened(batch, topic, now)
        return batch

    def _opened(self, batch: ProducerBatch, topic: str, now: float) -> None:
        self._client.touch_topic(topic, now)
        # The sender starts the batch's linger clock (unless it will look
        # before the batch lingered). When it has a pass due (the batch before
        # is full, or this one is sendable at once), the next enqueue yields
        # to it first. Else that yield would cost a task step for nothing: in
        # a web service, batches open all the time behind ones already sent.
        if self._sender.batch_opened(batch):
            self._shortcut.countdown = 0

    def place(
        self,
        topic: str,
        info: TopicInfo,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp_ms: int,
        sizes: int,
        size: int,
        reserve: int,
    ) -> RecordHandlePy:
        """Append a checked record whose ``reserve`` bytes of memory are reserved; its handle.

        On an error (a bad partition, a transaction that takes no records)
        the memory is released and nothing is appended; once appended,
        nothing raises or waits.
        """
        acc = self._acc
        txn = self._txn
        try:
            sticky = self.sticky(key, partition)
            if sticky:
                chosen = self.sticky_partition(topic, info)
            else:
                chosen = choose_partition(topic, partition, key, info, self._custom)
            tp = info.tps[chosen]
            if txn is not None:
                txn.check_can_send()  # add_partition below then cannot fail
            batch = acc.open_batch(tp)
            handle = (
                None
                if batch is None
                else batch.try_append(timestamp_ms, key, value, headers, sizes, reserve, size)
            )
            opened = handle is None
            if batch is None or handle is None:
                now = time.monotonic()
                batch = acc.new_batch(tp, now)
                handle = batch.try_append(timestamp_ms, key, value, headers, sizes, reserve, size)
                if handle is None:  # a new batch always takes its first record
                    raise RuntimeError(f"a new batch of {tp} refused its first record")
        except BaseException:
            self._pool.release(reserve)
            raise
        # Appended: the batch holds the memory and decides the record's handle.
        if opened:
            self._opened(batch, topic, now)
        elif batch.is_full():  # filled exactly: sendable now (Java's batchIsFull wakeup)
            self._sender.wakeup()
        self._shortcut.countdown -= 1
        if txn is not None:
            txn.add_partition(tp)
        if sticky:
            if self.fills_lanes and self._shortcut.plain:
                self._sticky.filling_batch(topic, batch, info)  # the lane takes the next records
            self._sticky.appended(topic, size, batch, info)
        return handle
