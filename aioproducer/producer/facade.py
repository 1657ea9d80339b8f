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
holds those steps and the public methods; a producer is made of parts it
holds, each the one owner of its state: the constructor's
(:class:`.running.Parts`), the :class:`.lifecycle.Lifecycle` that starts
and closes it (the parts of a started producer are one
:class:`.running.Running`), the :class:`.loop_binding.LoopBinding`, the
:class:`.transactions_api.TransactionsAPI` and the :class:`.bulk_api.BulkAPI`
its methods delegate to, the gauges of
:mod:`~aioproducer.telemetry.producer_metrics` and the hooks of
:mod:`~aioproducer.engine.interceptors`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from threading import get_ident
from time import time_ns
from typing import TYPE_CHECKING, Any

from .. import errors
from ..config import ProducerConfig
from ..config.foreign_names import PEER_METHODS
from ..engine.accumulator import RecordAccumulator
from ..engine.batch import RECORD_HANDLE_OVERHEAD
from ..engine.buffer_pool import BufferPool
from ..engine.interceptors import InterceptorChain, intercepted_enqueue
from ..engine.record_handle import RecordHandle
from ..engine.shortcut import EnqueueShortcut
from ..engine.sticky import StickyPartitioner
from ..engine.validation import (
    MAX_TIMESTAMP_MS,
    check_headers,
    check_record_size,
    check_topic,
)
from ..net.metadata_wait import MetadataWait
from ..protocol.records import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD, headers_size
from ..telemetry.logs import ClientLogger
from ..telemetry.metrics import MetricConfig, MetricName
from ..telemetry.producer_metrics import ProducerMetrics, add_producer_gauges
from ..types import BulkProgress, BulkResult, PreparedTransaction, RecordMetadata
from .bulk_api import BulkAPI
from .lifecycle import Lifecycle
from .loop_binding import UNBOUND, LoopBinding
from .running import Parts, Running
from .serializer_prepare import SerializerBinding
from .settings import ProducerConstructor
from .transactions_api import TransactionsAPI

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Producer"]

log = logging.getLogger("aioproducer.producer")
# A tight loop of enqueue() calls gives the event loop a turn at least this
# often (in records, about half a millisecond of work), not only when a record
# opens a new batch: with 1 MiB batches that would be every ~10,000 records.
YIELD_EVERY_RECORDS = 100
Headers = Sequence[tuple[str, bytes | None]]
# Producers without a client_id are named producer-1, producer-2, ... as in Java.
_client_numbers = itertools.count(1)


class Producer(ProducerConstructor):
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
        self._pool = BufferPool(config.buffer_memory)
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
        self._max_block = config.max_block_ms / 1000
        self._serializers = SerializerBinding(config.key_serializer, config.value_serializer)
        self._max_record = min(
            config.max_request_size, config.buffer_memory - RECORD_HANDLE_OVERHEAD
        )
        self._metrics = ProducerMetrics(
            self.client_id,
            MetricConfig(config.metrics_num_samples, config.metrics_sample_window_ms / 1000),
            enabled=config.metrics_enabled,
        )
        parts = Parts(
            config,
            self.client_id,
            self._acc,
            self._pool,
            self._sticky,
            self._metrics,
            MetadataWait(self._log, self._max_block),
            self._shortcut,
            self._max_block,
            # The largest record bound the unkeyed fast path of enqueue takes.
            self._max_record - RECORD_BATCH_OVERHEAD,
            self._serializers.active,
        )
        # Started or not, closed or not: the one owner of both (and of the loop binding).
        self._life = Lifecycle(parts, LoopBinding(self._shortcut), self._log)
        self._transactions = TransactionsAPI(self._life, parts, self._log)
        self._interceptors: InterceptorChain | None = None
        add_producer_gauges(
            self._metrics,
            self._pool,
            sender=lambda: None if self._running is None else self._running.sender,
            client=lambda: None if self._running is None else self._running.client,
            interceptors=lambda: self._interceptors,
        )
        if config.interceptors:
            self._interceptors = InterceptorChain(config.interceptors, self._log)
            # Only a producer with hooks pays for them: its enqueue runs them
            # around the plain one (an entry of the instance's dict shadows the
            # method, which is not a data descriptor).
            self.__dict__["enqueue"] = functools.partial(
                intercepted_enqueue, self._interceptors, functools.partial(Producer.enqueue, self)
            )
        # The bulk calls' part: enqueue_many and send_many delegate to it.
        self._bulk_api = BulkAPI(
            self._life.run, self._life.check_open, self._serializers, self._interceptors
        )

    @property
    def _running(self) -> Running | None:
        """The started producer's parts (None before start), held by the lifecycle."""
        return self._life.running

    @property
    def _closed(self) -> bool:
        return self._life.closed

    def __repr__(self) -> str:
        life = self._life
        state = "closed" if life.closed else "started" if life.running is not None else "new"
        security = self.config.security
        sasl = f"/{security.sasl.mechanism}" if security.sasl is not None else ""
        return (
            f"<Producer {state} bootstrap={self.config.bootstrap_servers!r} "
            f"security={security.protocol}{sasl} "
            f"acks={self.config.acks} idempotent={self.config.idempotent} {self._acc!r}>"
        )

    # -- start and close -----------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (bounded by ``max_block_ms``) and start sending.

        Calls made while a start is under way wait for it: one client and one
        sender, whatever the number of callers. Binds the producer to this loop.
        """
        await self._life.start()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then shut down.

        Records still pending when ``timeout`` runs out fail with
        KafkaTimeoutError. With ``timeout=None`` close waits for every record,
        which each batch's ``delivery_timeout_ms`` bounds. A transaction left
        open is ended first (within ``timeout``, else ``max_block_ms`` per
        round trip), so ``read_committed`` consumers are not held back until
        ``transaction_timeout_ms``: one begun and not ended is aborted, as the
        Java producer does; one whose ``commit_transaction()`` timed out is
        committed, or aborted if that fails, and then close raises
        TransactionAbortedError once shut down; one that can be ended neither
        way makes close raise TransactionNotCompletedError once shut down. A
        prepared transaction is left open. Calling it twice is safe.

        From another event loop it never waits: while the producer's loop
        exists it raises ProducerLoopError and leaves everything buffered;
        once that loop is closed it fails the records never acknowledged and
        raises ProducerLoopError naming how many there were (none: returns).
        """
        await self._life.close(timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed.

        Raises KafkaTimeoutError if ``timeout`` seconds pass first (the records
        stay pending). Failures are reported through each record's future.
        """
        await self._life.flush(timeout)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

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
        if shortcut.loop_mark._thread_id != get_ident():
            # Raises unless on the producer's loop.
            self._life.binding.check("enqueue()/send()", self._life.closed)
        if shortcut.countdown <= 0:
            # The previous record opened a batch while the sender had a pass
            # due (Admission._opened), or YIELD_EVERY_RECORDS were
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
        running = self._life.running
        if running is None or not shortcut.plain:
            running = self._life.check_can_send()
        if topic not in self._topics_seen:
            self._check_topic(topic)
        serializers = self._serializers
        prep = serializers.prep
        if prep is not None and not prep.prepared(topic):
            await prep.prepare(topic)  # before anything is appended (registry I/O)
            # close() or commit_transaction() may have run meanwhile: appended
            # now, the record would never resolve or land outside any
            # transaction (Java checks again in maybeAddPartition after its waits).
            running = self._life.check_can_send()
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
            info = await admission.wait_for_room(
                topic, info, partition, reserve, self._life.check_can_send
            )
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

    # -- transactions ----------------------------------------------------------

    async def init_transactions(self) -> None:
        """Get the producer id for ``transactional_id``, fencing older producers.

        Bounded by ``max_block_ms``. Call once, after start() and before the
        first begin_transaction().
        """
        await self._transactions.init()

    async def begin_transaction(self) -> None:
        """Start a transaction; records sent until commit or abort belong to it."""
        self._transactions.begin()

    async def commit_transaction(self) -> None:
        """Flush, then commit. If a record failed, raises; abort_transaction() then.

        A commit sends EndTxn only after every record of the transaction was
        acknowledged; the flush is bounded by ``max_block_ms``.
        """
        await self._transactions.commit()

    async def abort_transaction(self) -> None:
        """Abort: unsent records fail with TransactionAbortedError, then EndTxn(abort)."""
        await self._transactions.abort()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group_id: str
    ) -> None:
        """Commit consumer offsets ``{(topic, partition): next_offset}`` with the transaction."""
        await self._transactions.send_offsets(offsets, group_id)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Self]:
        """``async with producer.transaction():`` commits on exit, aborts on an exception."""
        await self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self._transactions.abort_quietly()
            raise
        try:
            await self.commit_transaction()
        except errors.ProducerFencedError:
            raise
        except (errors.KafkaError, asyncio.TimeoutError):
            await self._transactions.abort_quietly()
            raise

    async def prepare_transaction(self) -> PreparedTransaction:
        """Flush, then leave the transaction open for a later commit or abort.

        The first phase of a two-phase commit (as KIP-939's
        ``prepareTransaction``, without its broker-side support): pass the
        returned :class:`~aioproducer.PreparedTransaction` to
        :meth:`complete_transaction` of any started producer, in any process.
        Until then ``read_committed`` consumers wait at its first record, and
        the coordinator aborts it once ``transaction_timeout_ms`` has passed
        since it began. This producer sends nothing more until it completes
        it; closing it leaves the transaction open.
        """
        return await self._transactions.prepare()

    async def complete_transaction(self, prepared: PreparedTransaction, *, commit: bool) -> None:
        """Commit (or abort) a transaction that a producer prepared.

        Any started producer may complete it, transactional or not. Raises
        TransactionNotCompletedError if the transaction is gone (fenced by a
        newer producer with its id, timed out, or ended the other way); then
        its producer, if it is this one, goes on with a new epoch (or, fenced,
        must be closed). Completing it again the same way is harmless: on the
        producer that completed it, a no-op; elsewhere it succeeds while nothing
        newer happened to its transactional id, and is refused
        (TransactionNotCompletedError) otherwise. It never ends a later
        transaction of the same producer.
        """
        await self._transactions.complete(prepared, commit=commit)

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
        client = self._life.run().client
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
        return await self._life.run().client.probe(self._max_block if timeout is None else timeout)
