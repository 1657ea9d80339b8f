"""The public producer: a small API over the accumulator, the sender and the client.

``enqueue`` reads as its steps: (1) an unkeyed bytes record goes straight to
the open batch of its topic's sticky partition when nothing is in doubt
(:class:`~aioproducer.engine.unkeyed_lane.UnkeyedLane`), a record with a bytes
key to the open batch of the partition its key hashes to
(:class:`~aioproducer.engine.keyed_lane.KeyedLane`); otherwise (2) the record
is checked and serialized, (3) metadata and buffer memory are waited for (up
to ``max_block_ms``), and (4)
:meth:`~aioproducer.engine.admission.Admission.place` picks its partition and
appends it. It returns the record's future; ``send`` also waits for that
future. Everything after that (batching, retries, expiry) belongs to the
sender.

Where a record enters the engine (its partition, its batch, the effects of
appending) is :mod:`~aioproducer.engine.admission`, which the bulk path
shares; appending is the batch's own method
(:meth:`~aioproducer.engine.batch.ProducerBatch.try_append`). This module
holds those steps; start, flush and close come from :mod:`.lifecycle` (the
parts of a started producer are one :class:`.running.Running`), the
transaction methods from :mod:`.transactions_api`, the bulk ones from
:mod:`.bulk_api`, the gauges from
:mod:`~aioproducer.telemetry.producer_metrics`, the hooks from
:mod:`~aioproducer.interceptors`."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Sequence
from threading import get_ident
from time import time_ns
from typing import TYPE_CHECKING, Any

from .. import errors
from ..config import ProducerConfig
from ..engine.accumulator import RecordAccumulator
from ..engine.admission import Admission
from ..engine.batch import RECORD_HANDLE_OVERHEAD
from ..engine.buffer_pool import BufferPool
from ..engine.record_handle import RecordHandle
from ..engine.shortcut import EnqueueShortcut
from ..engine.sticky import StickyPartitioner
from ..engine.validation import (
    MAX_TIMESTAMP_MS,
    check_headers,
    check_record_size,
    check_topic,
)
from ..foreign_names import PEER_METHODS
from ..interceptors import InterceptorChain, intercepted_enqueue
from ..logs import ClientLogger
from ..net.cluster import TopicInfo
from ..net.metadata_wait import MetadataWait
from ..protocol.records import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD, headers_size
from ..telemetry.metrics import MetricConfig, MetricName
from ..telemetry.producer_metrics import ProducerMetrics, add_producer_gauges
from ..types import BulkProgress, BulkResult, RecordMetadata
from .bulk_api import BulkAPI
from .lifecycle import LifecycleMixin
from .loop_binding import UNBOUND, LoopBindingMixin
from .running import Parts, Running
from .serializer_prepare import SerializerBinding
from .settings import ProducerConstructor
from .transactions_api import TransactionalProducerMixin

__all__ = ["Producer"]

log = logging.getLogger("aioproducer.producer")
# A tight loop of enqueue() calls gives the event loop a turn at least this
# often (in records, about half a millisecond of work), not only when a record
# opens a new batch: with 1 MiB batches that would be every ~10,000 records.
YIELD_EVERY_RECORDS = 100
Headers = Sequence[tuple[str, bytes | None]]
# Producers without a client_id are named producer-1, producer-2, ... as in Java.
_client_numbers = itertools.count(1)


class Producer(
    LoopBindingMixin,
    LifecycleMixin,
    TransactionalProducerMixin,
    ProducerConstructor,
):
    """An asyncio Kafka producer with the Java producer's semantics.

    Use ``async with Producer(...) as p:`` or ``await p.start()`` / ``await
    p.close()``. Every setting is a keyword of ``Producer(...)`` (see
    ``help(Producer.__init__)``, :class:`ProducerConfig`, which defines them,
    or the configuration reference); ``Producer.from_config`` takes Java
    property names. A producer belongs to the event loop that starts it (see
    :mod:`.loop_binding`).
    """

    if not TYPE_CHECKING:  # type checkers keep flagging unknown names

        def __getattr__(self, name: str) -> Any:
            # Only for names not found: a method of aiokafka's or confluent-kafka's
            # producer gets what to call here (foreign_names.PEER_METHODS).
            hint = PEER_METHODS.get(name)
            if hint is None:
                # Anything else fails as it would without this method (a
                # property's own AttributeError included, raised again).
                return object.__getattribute__(self, name)
            message = f"{type(self).__name__!r} object has no attribute {name!r}: {hint}"
            raise AttributeError(message, name=name, obj=self)

    def _init(self, config: ProducerConfig) -> None:
        # Topics already validated and known to the metadata: skips checks per record.
        self._topics_seen: set[str] = set()
        # Step 1 of enqueue, and the state it reads: the loop mark, the records
        # until enqueue yields to the loop (0 after a record opened a new batch,
        # so that the sender runs first), and whether the producer is started,
        # open and not transactional (then a record has no state to check).
        self._shortcut = EnqueueShortcut(UNBOUND, YIELD_EVERY_RECORDS, self._topics_seen)
        self.config = config
        self.client_id = config.client_id or f"producer-{next(_client_numbers)}"
        self._log = ClientLogger(log, self.client_id)
        # Everything that exists only once started, built by start() (lifecycle).
        self._running: Running | None = None
        self._pool = BufferPool(config.buffer_memory, on_exhausted=self._wake_sender)
        self._acc = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=config.linger_ms,
            codec=config.codec,
            delivery_timeout_ms=config.delivery_timeout_ms,
            compression_level=config.compression_level,
            is_transactional=config.transactional_id is not None,
        )
        self._sticky = StickyPartitioner(
            config.batch_size,
            load=self._acc,
            adaptive=config.partitioner_adaptive_partitioning,
            availability_timeout_ms=config.partitioner_availability_timeout_ms,
        )
        # KIP-794: unkeyed (or every, with partitioner_ignore_keys) record goes
        # through the uniform sticky partitioner.
        self._ignore_keys = config.partitioner_ignore_keys
        self._closed = False
        self._close_lock: asyncio.Lock | None = None
        self._start_lock: asyncio.Lock | None = None
        self._max_block = config.max_block_ms / 1000
        self._metadata_wait = MetadataWait(self._log, self._max_block)
        self._serializers = SerializerBinding(config.key_serializer, config.value_serializer)
        self._max_record = min(
            config.max_request_size, config.buffer_memory - RECORD_HANDLE_OVERHEAD
        )
        # The largest record bound the unkeyed fast path of enqueue takes.
        self._max_unkeyed = self._max_record - RECORD_BATCH_OVERHEAD
        self._custom_partitioner = config.partitioner
        self._metrics = ProducerMetrics(
            self.client_id,
            MetricConfig(config.metrics_num_samples, config.metrics_sample_window_ms / 1000),
            enabled=config.metrics_enabled,
        )
        add_producer_gauges(
            self._metrics,
            self._pool,
            sender=lambda: None if self._running is None else self._running.sender,
            client=lambda: None if self._running is None else self._running.client,
            interceptors=lambda: self._interceptors,
        )
        self._interceptors: InterceptorChain | None = None
        if config.interceptors:
            self._interceptors = InterceptorChain(config.interceptors, self._log)
            # Only a producer with hooks pays for them: its enqueue runs them
            # around the plain one (an entry of the instance's dict shadows the
            # method, which is not a data descriptor).
            self.__dict__["enqueue"] = functools.partial(
                intercepted_enqueue, self._interceptors, functools.partial(Producer.enqueue, self)
            )
        # The bulk calls' part: enqueue_many and send_many delegate to it.
        self._bulk_api = BulkAPI(self._run, self._check_open, self._serializers, self._interceptors)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._running is not None else "new"
        security = self.config.security
        sasl = f"/{security.sasl.mechanism}" if security.sasl is not None else ""
        return (
            f"<Producer {state} bootstrap={self.config.bootstrap_servers!r} "
            f"security={security.protocol}{sasl} "
            f"acks={self.config.acks} idempotent={self.config.idempotent} {self._acc!r}>"
        )

    # -- producing ---------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> RecordMetadata:
        """Produce one record and wait for the broker's acknowledgement."""
        fut = await self.enqueue(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    async def enqueue(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> RecordHandle:
        """Buffer one record; return its handle, resolved when the broker acknowledges it.

        ``key``, ``partition``, ``timestamp_ms`` and ``headers`` may be given by
        name or by position, in aiokafka's order.

        Waits only for metadata and buffer space, together bounded by
        ``max_block_ms`` (then KafkaTimeoutError). Invalid input raises at once
        and buffers nothing, as does a call from an event loop other than the
        producer's (ProducerLoopError).

        Cancellation is atomic: every wait comes before the record is
        appended, and nothing awaits after it. A cancelled ``enqueue()`` has
        appended nothing (and holds no buffer memory); one that returned has
        appended the record, whose handle then resolves whatever the caller does.

        The handle behaves as an ``asyncio.Future`` to asyncio (await it, or give
        it to ``gather``, ``wait``, ``wait_for``, ``shield``; ``done()``,
        ``result()``, ``add_done_callback()``...): a view on its batch's outcome,
        so that a batch decides all its records in one step. Cancelling it (or a
        task awaiting it) stops the wait, not the record.
        """
        # 1. The common cases, a bytes record without key or with a bytes key,
        #    straight to the open batch (engine/shortcut.py). (The options are
        #    not keyword-only: Python fills each omitted keyword-only parameter
        #    by a dict lookup, positional ones from a tuple.)
        shortcut = self._shortcut
        fut = shortcut.take(topic, value, key, partition, timestamp_ms, headers)
        if fut is not None:
            return fut
        if self._loop_mark._thread_id != get_ident():
            self._check_loop("enqueue()/send()")  # raises unless on the producer's loop
        if shortcut.countdown <= 0:
            # The previous record opened a batch, or YIELD_EVERY_RECORDS were
            # enqueued since the last yield: let the sender and other tasks
            # run once, so they keep going while the caller keeps producing (a
            # loop of enqueue() calls would otherwise never let them run). Done
            # here, before anything is appended, so that a cancellation never
            # strands an appended record.
            shortcut.countdown = YIELD_EVERY_RECORDS
            await asyncio.sleep(0)
            fut = shortcut.take(topic, value, key, partition, timestamp_ms, headers)
            if fut is not None:
                return fut
        # 2. Checks and serialization: bad input raises here, before any wait.
        running = self._running
        if running is None or not self._plain:
            running = self._check_can_send()
        if topic not in self._topics_seen:
            self._check_topic(topic)
        serializers = self._serializers
        prep = serializers.prep
        if prep is not None and not prep.prepared(topic):
            await prep.prepare(topic)  # before anything is appended (registry I/O)
            # close() or commit_transaction() may have run meanwhile: appended
            # now, the record would never resolve or land outside any
            # transaction (Java checks again in maybeAddPartition after its waits).
            running = self._check_can_send()
        if (
            type(value) is not bytes
            or (key is not None and type(key) is not bytes)
            or serializers.active
        ):
            key, value = serializers.serialize(topic, key, value)
        if headers is not None:
            headers = check_headers(headers)
            header_size = headers_size(headers)
        else:
            header_size = 1
        if timestamp_ms is None:
            timestamp_ms = time_ns() // 1_000_000
        elif (
            isinstance(timestamp_ms, bool)
            or not isinstance(timestamp_ms, int)
            or not 0 <= timestamp_ms <= MAX_TIMESTAMP_MS
        ):
            raise ValueError(
                f"timestamp_ms must be an int from 0 to 2**63-1 (ms since the epoch), "
                f"got {timestamp_ms!r}"
            )
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        # Upper bound of the record's encoded size: lengths as 5-byte varints.
        size = MAX_RECORD_OVERHEAD + header_size + key_size + value_size + 12
        if size + RECORD_BATCH_OVERHEAD > self._max_record:
            check_record_size(
                size + RECORD_BATCH_OVERHEAD,
                self.config.max_request_size,
                self.config.buffer_memory,
            )
        reserve = size + RECORD_HANDLE_OVERHEAD  # the record's future and bookkeeping too
        # 3. The topic's metadata, then buffer memory: the only waits, within max_block_ms.
        admission = running.admission
        info = running.client.snapshot.topics.get(topic)
        if (
            info is None
            or not info.partitions
            or (type(partition) is int and partition >= len(info.partitions))
            or not self._pool.try_reserve(reserve)
        ):
            info = await self._wait_for_room(admission, topic, info, partition, reserve)
        # 4. Its partition and batch: nothing waits from here on.
        return admission.place(
            topic,
            info,
            partition,
            key,
            value,
            headers,
            timestamp_ms,
            ((key_size + 1) << 32) | (value_size + 1),  # batch.pack_sizes, inlined
            size,
            reserve,
        )

    async def _wait_for_room(
        self,
        admission: Admission,
        topic: str,
        info: TopicInfo | None,
        partition: int | None,
        reserve: int,
    ) -> TopicInfo:
        """Step 3 when something must be waited for: the topic's metadata (an unknown
        topic, or a partition not in the metadata, added since the last refresh?), then
        ``reserve`` bytes of buffer memory (not reserved yet), within ``max_block_ms``."""
        deadline = admission.deadline()
        if (
            info is None
            or not info.partitions
            or (type(partition) is int and partition >= len(info.partitions))
        ):
            info = await admission.topic_info(topic, partition)
        await admission.reserve(reserve, deadline)
        # We waited: the producer or the transaction may have moved on.
        try:
            self._check_can_send()
        except BaseException:
            admission.release(reserve)
            raise
        return info

    @property
    def _plain(self) -> bool:
        """Started, open and not transactional (held by the enqueue shortcut, which reads it)."""
        return self._shortcut.plain

    @_plain.setter
    def _plain(self, plain: bool) -> None:
        self._shortcut.plain = plain

    @property
    def _loop_mark(self) -> Any:
        """The mark of the producer's loop (see loop_binding; held by the enqueue shortcut)."""
        return self._shortcut.loop_mark

    @_loop_mark.setter
    def _loop_mark(self, mark: Any) -> None:
        self._shortcut.loop_mark = mark

    def _check_topic(self, topic: str) -> None:
        """Raise unless ``topic`` is a valid name; remembered, so checked once per topic."""
        check_topic(topic)
        if len(self._topics_seen) < 10000:
            self._topics_seen.add(topic)

    # -- bulk ------------------------------------------------------------------

    async def enqueue_many(
        self,
        topic: str,
        values: Any,
        *,
        keys: Any = None,
        headers: Any = None,
        partition: Any = None,
        timestamp_ms: Any = None,
        progress: BulkProgress | None = None,
    ) -> asyncio.Future[BulkResult]:
        """Buffer many records of ``topic`` in one pass; one future for all (see :mod:`~aioproducer.bulk`).

        ``values``/``keys``: lists of bytes-like or None, or pyarrow binary arrays.
        The future resolves to a BulkResult, or fails with BulkSendError naming
        the failed records. Bad input raises at once and buffers nothing.
        Configured interceptors see every record (see :mod:`~aioproducer.bulk.intercept`).

        Records go in in call order, waiting for buffer memory or metadata
        between slices (at most ``max_block_ms``). If the producer closes, the
        transaction moves on (commit, abort) or the wait runs out part way, the
        call returns its future and the records not buffered fail there
        (``result.errors[None]``). If the call is cancelled part way, records
        ``0 .. k - 1`` stay buffered and are delivered, and the
        ``CancelledError`` carries a :class:`~aioproducer.types.BulkProgress`
        (``exc.bulk_progress``; ``BulkProgress.of(exc)`` finds it behind a
        ``TimeoutError`` too) with ``buffered == k`` and the call's future; pass
        ``progress=BulkProgress()`` to hold it whatever becomes of the
        exception. Resend ``values[k:]``: nothing is sent twice.
        """
        return await self._bulk_api.enqueue_many(
            topic, values, keys, headers, partition, timestamp_ms, progress
        )

    async def send_many(
        self, topic: str, values: Any, *, progress: BulkProgress | None = None, **columns: Any
    ) -> BulkResult:
        """:meth:`enqueue_many`, then wait for every record's acknowledgement.

        Cancelled while buffering, as :meth:`enqueue_many`. Cancelled while
        waiting for the acknowledgements (every record buffered), the records
        are still delivered: the ``CancelledError`` carries the progress
        (``buffered == len(values)``) whose ``future`` gives their outcome.
        """
        if progress is None:
            progress = BulkProgress()
        future = await self.enqueue_many(topic, values, progress=progress, **columns)
        try:
            # Shielded: cancelling the caller must not cancel the call's future,
            # which still reports the records on their way.
            return await asyncio.shield(future)
        except asyncio.CancelledError as exc:
            progress.attach(exc)
            raise

    # -- metrics -------------------------------------------------------------

    def metrics(self) -> dict[MetricName, float]:
        """The producer's metrics now, keyed by :class:`~aioproducer.types.MetricName`.

        Names, groups (``producer-metrics``, ``producer-topic-metrics``,
        ``producer-node-metrics``) and tags (``client-id``, ``topic``,
        ``node-id``) are the Java producer's; docs/guides/observability.md lists them.
        Averages and maxima are NaN until their first event; rates are per
        second over the sample windows (``metrics_sample_window_ms`` x
        ``metrics_num_samples``). With ``metrics_enabled=False`` only the
        gauges (buffer, connections, requests in flight, metadata age) remain.
        """
        return self._metrics.measure(time.monotonic())

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``, waiting up to ``max_block_ms`` for metadata."""
        client = self._run().client
        check_topic(topic)
        count = await client.partitions_for(topic, self._max_block)
        return list(range(count))

    async def ping(self, timeout: float | None = None) -> int:
        """Check that the cluster answers: one fresh metadata round trip.

        Returns the number of brokers in the answer. Raises KafkaTimeoutError
        when nothing answered within ``timeout`` seconds (default
        ``max_block_ms``), or NoBrokersAvailableError when no broker could be
        reached. Meant for health checks; sending does not need it.
        """
        return await self._run().client.probe(self._max_block if timeout is None else timeout)

    def _check_can_send(self) -> Running:
        """The started producer's parts; raise unless records may be appended now:
        started, open, and the transaction (if any) in a state that takes records."""
        if self._closed:
            raise errors.ProducerClosedError("cannot send after close(); create a new producer")
        running = self._running
        if running is None:
            raise errors.IllegalStateError("call 'await producer.start()' before sending")
        if running.txn is not None:
            running.txn.check_can_send()
        return running

    def _parts(self) -> Parts:
        """What start() wires together (see running.Running.build)."""
        return Parts(
            self.config,
            self.client_id,
            self._acc,
            self._pool,
            self._sticky,
            self._metrics,
            self._metadata_wait,
            self._shortcut,
            self._max_block,
            self._max_unkeyed,
            self._serializers.active,
            self._check_open,
        )
