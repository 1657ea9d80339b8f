"""Write tasks of the Spark sink, on an event loop their Python worker keeps.

Each Spark task runs :func:`write_partition`, which hands :func:`_produce` to
its worker's event loop (:mod:`.producer_pool`): the task takes a producer,
feeds it the task's rows a chunk at a time through the bulk path
(``enqueue_many``, straight from the Arrow arrays, keyed rows grouped by
partition first; its buffer-memory backpressure bounds what
is held in memory), flushes and reports a :class:`KafkaCommitMessage`. The
first failed delivery fails the task with that error's message. At-least-once
tasks share one producer per worker and settings: it goes back to the pool once
every record of the task was acknowledged, and is closed if the task failed.

In transactional mode the write is a two-phase commit, as Spark's own
contract for exactly-once sinks asks: each task writes its records in one
Kafka transaction whose id is stable across attempts and *prepares* it
(flushed, left open); only the driver's ``commit()``, which Spark calls once
every task has succeeded, commits them, and ``abort()`` aborts them. A task
cannot commit by itself: when an upstream computation fails, the task's input
can simply end early, so a task that reaches the end of its input has not
necessarily succeeded. A retried attempt's ``init_transactions()`` fences the
attempt it replaces and aborts whatever that one left open; a task with no rows
still fences, but begins no transaction. Transactional producers are not pooled.

Rows are pulled from Spark on a helper thread, one chunk ahead of the producer:
reading the input can block (on the JVM or an upstream computation), and the
event loop must keep serving acknowledgements and linger timers meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from .. import BulkSendError, PreparedTransaction, Producer, errors
from .avro_columns import avro_encoder
from .columns import (
    Chunk,
    ColumnPlan,
    SinkWriteError,
    TopicColumns,
    arrow_chunks,
    row_chunks,
    split_by_key,
    splittable,
)
from .job_transactions import abort_job, commit_job
from .options import SinkOptions, refuse_speculation
from .producer_pool import ProducerPool, worker_loop

try:  # Spark 4.1+: Arrow batches for streaming writes too.
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - Spark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]  # None: not in Spark 4.0

__all__ = [
    "KafkaBatchWriter",
    "KafkaCommitMessage",
    "KafkaStreamWriter",
    "stream_writer_class",
    "summarize",
    "write_partition",
]

log = logging.getLogger("aioproducer.spark")

# How long a failing task waits for records still in flight before closing.
_CLOSE_ON_ERROR_S = 5.0


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task delivered; sent back to the driver's commit()."""

    partition_id: int
    attempt: int
    records: int
    bytes: int  # key + value bytes
    topics: dict[str, int] = field(default_factory=dict)
    started: float = 0.0  # epoch seconds, for the job's wall time
    finished: float = 0.0
    transactional_id: str | None = None
    # Transactional mode: the task's open transaction, for the driver to end.
    prepared: PreparedTransaction | None = None
    # At-least-once: the task used a producer an earlier task of its worker started.
    producer_reused: bool = False


def _task_identity() -> tuple[int, int]:
    ctx = TaskContext.get()
    if ctx is None:  # called outside a Spark task (tests, local experiments)
        return 0, 0
    return ctx.partitionId(), ctx.attemptNumber()


def _task_setting(name: str) -> str | None:
    """A Spark setting as the task sees it: Spark SQL hands the session's
    settings to every task of a query as local properties (None: unset)."""
    ctx = TaskContext.get()
    return None if ctx is None else ctx.getLocalProperty(name)


class _Outstanding:
    """The futures of the bulk calls not yet checked, in call order."""

    __slots__ = ("_futures", "written")

    def __init__(self) -> None:
        self._futures: deque[asyncio.Future[Any]] = deque()
        # A record of a checked call may be in the log: acknowledged, or failed
        # with may_have_been_written (a task retry then writes it again).
        self.written = False

    def may_have_written(self) -> bool:
        """Whether any record handed over may be in the log (calls in flight count)."""
        return self.written or bool(self._futures)

    def add(self, future: asyncio.Future[Any]) -> None:
        self._futures.append(future)

    def first_error(self) -> BaseException | None:
        """Check the calls resolved so far; return the first failed record's error, if any."""
        futures = self._futures
        while futures and futures[0].done():
            fut = futures.popleft()
            if fut.cancelled():
                continue
            exc = fut.exception()
            if exc is None:
                self.written = True
                continue
            if isinstance(exc, BulkSendError):
                result = exc.result
                failed = sum(len(f.indices) for f in result.errors.values())
                self.written |= failed < len(result) or any(
                    getattr(f.error, "may_have_been_written", None) is not False
                    for f in result.errors.values()
                )
                return next(iter(result.errors.values())).error
            self.written |= getattr(exc, "may_have_been_written", None) is not False
            return exc
        return None

    async def settle(self) -> BaseException | None:
        """After a flush: wait for the calls still unresolved (each bounded by
        ``delivery.timeout.ms``), then :meth:`first_error`."""
        if self._futures:
            await asyncio.wait(list(self._futures))
        return self.first_error()

    def discard(self) -> None:
        """Mark every failure as seen, so asyncio does not log each one at exit."""
        for fut in self._futures:
            if fut.done() and not fut.cancelled():
                fut.exception()
        self._futures.clear()


async def _produce(
    chunks: Iterator[Chunk],
    options: SinkOptions,
    partition_id: int,
    attempt: int,
    pool: ProducerPool | None = None,
) -> KafkaCommitMessage:
    """Deliver ``chunks``; ``pool``: take an at-least-once producer from it and give
    it back if every record was acknowledged (None: a producer of this call's own)."""
    started = time.time()
    records = 0
    nbytes = 0
    topics: Counter[str] = Counter()
    # A transactional producer is never pooled: its transactional id belongs to
    # one partition, and its prepared transaction stays open until the driver
    # commits it, which this worker does not hear of (see the Spark guide).
    pooled = pool is not None and not options.transactional
    props = options.shared_properties() if pooled else options.task_properties(partition_id)
    producer: Producer | None = None
    reused = False
    loop = asyncio.get_running_loop()
    # One thread, so the Spark input iterator is only ever read from one place.
    reader = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aioproducer-spark-input")
    # Avro columns are encoded on that thread, as the chunks are read.
    encoder = avro_encoder(options, loop)
    if encoder is not None:
        chunks = encoder.encoded(chunks)
    pending: asyncio.Future[Chunk | None] | None = None
    outstanding = _Outstanding()
    ok = in_transaction = False
    prepared: PreparedTransaction | None = None
    # KIP-794's partitioner.ignore.keys places keyed records like unkeyed ones.
    by_key = props.get("partitioner.ignore.keys", "false").strip().lower() != "true"
    try:
        # The first chunk is read while the producer starts.
        pending = loop.run_in_executor(reader, next, chunks, None)
        if options.transactional:
            producer = Producer.from_config(props)
            await producer.start()
            # Fences an earlier attempt of this task and aborts what it left
            # open, even when this attempt's input turns out to be empty.
            await producer.init_transactions()
        while True:
            chunk = await pending
            pending = None
            if chunk is None:
                break
            pending = loop.run_in_executor(reader, next, chunks, None)
            if producer is None:  # at-least-once: no producer for an empty input
                if pool is not None:
                    producer, reused = await pool.acquire(props)
                else:
                    producer = Producer.from_config(props)
                    await producer.start()
            if options.transactional and not in_transaction:
                await producer.begin_transaction()
                in_transaction = True
            for part in chunk.parts:
                await _enqueue_part(producer, part, outstanding, by_key)
            error = outstanding.first_error()
            if error is not None:
                raise error
            records += chunk.rows
            nbytes += chunk.nbytes
            topics.update(chunk.topics)
        if producer is not None:
            await producer.flush()
            error = await outstanding.settle()
            if error is not None:
                raise error
        if in_transaction:
            assert producer is not None
            # Left open: the driver commits it once every task succeeded.
            prepared = await producer.prepare_transaction()
        ok = True
    except SinkWriteError as exc:
        # The input or its encoding refused a row (a null topic, an Avro value
        # its schema rejects); records of earlier chunks are with the producer.
        written = outstanding.may_have_written() or exc.may_have_been_written is True
        raise _task_failure(
            f"partition {partition_id} (attempt {attempt}) failed after {records} records "
            f"were handed to the producer: {exc}",
            written,
            options.transactional,
        ) from exc
    except errors.KafkaError as exc:
        # None: raised by a call, which buffered nothing of its own.
        written = outstanding.may_have_written() or exc.may_have_been_written is True
        raise _task_failure(
            f"partition {partition_id} (attempt {attempt}) failed after {records} records "
            f"were handed to the producer: {type(exc).__name__}: {exc}",
            written,
            options.transactional,
        ) from exc
    except (TypeError, ValueError) as exc:
        # Bad row content the producer refused (e.g. a negative timestamp): the
        # refusing call buffered nothing, but earlier calls' records may be written.
        raise _task_failure(
            f"partition {partition_id} (attempt {attempt}) has a record the producer "
            f"rejected: {type(exc).__name__}: {exc}",
            outstanding.may_have_written(),
            options.transactional,
        ) from exc
    finally:
        if pending is not None:
            # Let a read in progress finish: the thread cannot be interrupted.
            await asyncio.gather(pending, return_exceptions=True)
        reader.shutdown(wait=False)
        try:
            if producer is not None:
                await _finish(producer, props, pool if pooled else None, ok, in_transaction)
        finally:
            outstanding.discard()
            if encoder is not None:
                await encoder.close()
    return KafkaCommitMessage(
        partition_id=partition_id,
        attempt=attempt,
        records=records,
        bytes=nbytes,
        topics=dict(topics),
        started=started,
        finished=time.time(),
        transactional_id=props.get("transactional.id"),
        prepared=prepared,
        producer_reused=reused,
    )


async def _enqueue_part(
    producer: Producer, part: TopicColumns, outstanding: _Outstanding, by_key: bool
) -> None:
    """Hand one topic's rows of a chunk to the producer: keyed Arrow rows one
    call per partition (see split_by_key in .columns), anything else in one call."""
    groups: list[tuple[int | None, TopicColumns]] = [(None, part)]
    if by_key and splittable(part):
        count = len(await producer.partitions_for(part.topic))
        groups = split_by_key(part, count)
    for partition, rows in groups:
        outstanding.add(
            await producer.enqueue_many(
                rows.topic,
                rows.values,
                keys=rows.keys,
                partition=rows.partitions if partition is None else partition,
                timestamp_ms=rows.timestamps,
                headers=rows.headers,
            )
        )


async def _finish(
    producer: Producer,
    props: dict[str, str],
    pool: ProducerPool | None,
    ok: bool,
    in_transaction: bool,
) -> None:
    """Pool the producer of a successful at-least-once task (``pool``), else close it.

    A failed or interrupted task's producer is closed, never pooled: its
    buffered records, connections or error state must not reach the next task.
    """
    if ok and pool is not None:
        await pool.release(props, producer)
        return
    try:
        if not ok and in_transaction:
            await _abort_quietly(producer)
    finally:
        await producer.close(None if ok else _CLOSE_ON_ERROR_S)


def _task_failure(text: str, written: bool, transactional: bool) -> SinkWriteError:
    """The error a failed task raises: ``text``, what Spark's retry will do, and
    ``may_have_been_written`` (``written``: a record of the task may be in the log)."""
    failure = SinkWriteError(f"{text}. {_retry_outlook(written, transactional)}")
    failure.may_have_been_written = written
    return failure


def _retry_outlook(written: bool, transactional: bool) -> str:
    """What Spark's retry of a failed task will do to the topic, from whether
    any record of the task may be in the log (``may_have_been_written``)."""
    if transactional:
        return "Its transaction is aborted: a retry of the task duplicates nothing"
    if written:
        return (
            "Records of this task may already be in the topic: Spark's retry of the task "
            "writes them again (at-least-once; the transactional mode writes them once)"
        )
    return "No record of this task reached the topic: a retry of the task duplicates nothing"


async def _abort_quietly(producer: Producer) -> None:
    # Best effort: if this fails, the next attempt's init_transactions() (or the
    # broker's transaction timeout) aborts the transaction instead.
    try:
        await producer.abort_transaction()
    except (errors.KafkaError, asyncio.TimeoutError) as exc:
        log.warning("[%s] aborting the task's transaction failed: %s", producer.client_id, exc)


def write_partition(chunks: Iterator[Chunk], options: SinkOptions) -> KafkaCommitMessage:
    """Deliver one task's records; raise SinkWriteError on the first failure.

    A transactional write refuses Spark speculation (ConfigurationError) before
    it starts a producer: the setting reaches the tasks, not the planning.
    """
    refuse_speculation(options, _task_setting("spark.speculation"))
    partition_id, attempt = _task_identity()
    # The worker's loop, where at-least-once producers outlive the task (see
    # producer_pool): Spark runs the next task of this worker on it too.
    worker = worker_loop()
    return worker.run(_produce(chunks, options, partition_id, attempt, worker.pool))


def _report(level: int, line: str) -> None:
    """Log ``line``; in Spark's unconfigured commit worker, to its stderr.

    Spark runs commit() and abort() in a Python worker process on the driver
    host. Nothing configures logging there, so an INFO line would be dropped;
    Spark copies that process's stderr into the driver's console and log.
    """
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    log.log(level, line)


def summarize(
    messages: Iterable[WriterCommitMessage | None], what: str = "write"
) -> tuple[str, int, int]:
    """One human-readable line for a finished write; also (records, bytes)."""
    done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    records = sum(m.records for m in done)
    nbytes = sum(m.bytes for m in done)
    topics: Counter[str] = Counter()
    for m in done:
        topics.update(m.topics)
    if done:
        seconds = max(m.finished for m in done) - min(m.started for m in done)
    else:
        seconds = 0.0
    rate = f", {records / seconds:,.0f} records/s" if seconds > 0 else ""
    reused = sum(1 for m in done if m.producer_reused)
    reuse = f", {reused} with a producer their worker kept" if reused else ""
    topic_text = ", ".join(f"{t}={n:,}" for t, n in sorted(topics.items())) or "none"
    line = (
        f"aioproducer sink {what}: {records:,} records, {nbytes:,} bytes from {len(done)} "
        f"tasks{reuse} in {seconds:.2f} s{rate}; topics: {topic_text}"
    )
    return line, records, nbytes


def _commit(options: SinkOptions, messages: list[WriterCommitMessage | None], what: str) -> None:
    """The driver's commit: in transactional mode, commit every task's transaction."""
    line = summarize(messages, what)[0]
    if options.transactional:
        line += f" ({commit_job(options, messages)} task transactions committed)"
    _report(logging.INFO, line)


def _abort(options: SinkOptions, messages: list[WriterCommitMessage | None], what: str) -> None:
    line = summarize(messages, what)[0]
    if options.transactional:
        line += f" ({abort_job(options, messages)})"
    else:
        # Without transactions the successful tasks' records stay in Kafka.
        line += " (already delivered records stay in Kafka: at-least-once)"
    _report(logging.WARNING, line)


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch writes; Arrow input avoids building a Row object per record."""

    def __init__(self, options: SinkOptions, plan: ColumnPlan) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return write_partition(arrow_chunks(iterator, self.plan), self.options)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.options, messages, "write committed")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort(self.options, messages, "write failed")


class KafkaStreamWriter(DataSourceStreamWriter):
    """Micro-batch writes from Spark Rows (the only input Spark 4.0 offers)."""

    def __init__(self, options: SinkOptions, plan: ColumnPlan) -> None:
        self.options = options
        self.plan = plan

    def _chunks(self, iterator: Iterator[Any]) -> Iterator[Chunk]:
        return row_chunks(iterator, self.plan)

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return write_partition(self._chunks(iterator), self.options)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(self.options, messages, f"micro-batch {batchId} committed")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.options, messages, f"micro-batch {batchId} failed")


if DataSourceStreamArrowWriter is not None:

    class KafkaStreamArrowWriter(KafkaStreamWriter, DataSourceStreamArrowWriter):
        """Micro-batch writes from Arrow batches (Spark 4.1+)."""

        def _chunks(self, iterator: Iterator[Any]) -> Iterator[Chunk]:
            return arrow_chunks(iterator, self.plan)


def stream_writer_class() -> type[KafkaStreamWriter]:
    """The fastest streaming writer this Spark version supports."""
    if DataSourceStreamArrowWriter is not None:
        return KafkaStreamArrowWriter
    return KafkaStreamWriter
