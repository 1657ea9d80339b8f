"""The sender: one event-loop task that moves batches from the accumulator to brokers.

It reads top to bottom::

    while running:
        fail batches past their delivery timeout
        ready = accumulator.ready(now, leaders)          # pure
        ask for metadata if some leader is unknown
        drain ready nodes that have a connection and room in flight
        for each node: start one Produce request
        sleep until woken (new batch, response, flush) or the next deadline

Each Produce request ends in :meth:`Sender._apply`, the one place where batch
outcomes take effect: complete the futures, put the batch back at the front of
its partition to retry, or fail it; then release its buffer memory.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Iterable

from . import errors
from .accumulator import RecordAccumulator, TopicPartition
from .batch import ProducerBatch
from .buffer_pool import BufferPool
from .client import KafkaClient
from .config import ProducerConfig
from .connection import BrokerConnection
from .protocol.compression import Codec
from .protocol.messages import PRODUCE
from .retry import Action, RetryConfig, classify

__all__ = ["Sender"]

log = logging.getLogger("aioproducer.sender")

# Compressing a batch at least this large runs in a worker thread: the codecs
# release the GIL, and the event loop keeps serving other tasks meanwhile.
OFFLOAD_COMPRESSION_BYTES = 64 * 1024
# Poll interval while a ready node waits for its connection or in-flight room.
_BLOCKED_POLL = 0.005


class Sender:
    def __init__(
        self,
        config: ProducerConfig,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        pool: BufferPool,
    ) -> None:
        self._config = config
        self._client = client
        self._acc = accumulator
        self._pool = pool
        self._retry = RetryConfig(
            config.retries, config.retry_backoff_ms, config.retry_backoff_max_ms
        )
        self._acks = config.acks_value
        self._max_in_flight = config.max_in_flight_requests_per_connection
        # With one request in flight per connection, order is kept by muting a
        # partition while its batch is out (Java's guaranteeMessageOrder).
        self._muted: set[TopicPartition] = set()
        self._in_flight: set[ProducerBatch] = set()
        self._requests: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        self._running = True
        self._task: asyncio.Task[None] | None = None
        self._rand = random.Random()

    def __repr__(self) -> str:
        return f"<Sender in_flight_batches={len(self._in_flight)} requests={len(self._requests)}>"

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="aioproducer-sender")

    def wakeup(self) -> None:
        self._wakeup.set()

    # -- the loop ----------------------------------------------------------

    async def _run(self) -> None:
        while self._running:
            try:
                delay = self._run_once(time.monotonic())
            except Exception:  # noqa: BLE001 - the loop must survive any one bug
                log.exception("unexpected error in the sender loop")
                delay = 0.1
            if delay > 0:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)
            self._wakeup.clear()

    def _run_once(self, now: float) -> float:
        """One pass: expire, drain, send. Returns seconds until the next pass."""
        self._expire(now)
        snapshot = self._client.snapshot
        ready = self._acc.ready(now, snapshot.leader_for, memory_exhausted=self._pool.exhausted)
        if ready.unknown_leader_topics:
            for topic in ready.unknown_leader_topics:
                self._client.add_topic(topic)
            self._client.request_update()
        delay = ready.next_check
        conns: dict[int, BrokerConnection] = {}
        for node in list(ready.nodes):
            conn = self._client.ready_connection(node)
            if conn is None or conn.in_flight >= self._max_in_flight:
                ready.nodes.discard(node)
                delay = min(delay, _BLOCKED_POLL)
            else:
                conns[node] = conn
        if conns:
            muted = self._muted if self._max_in_flight == 1 else ()
            drained = self._acc.drain(now, ready, self._config.max_request_size, muted)
            for node, batches in drained.items():
                self._start_request(conns[node], batches)
        if ready.unknown_leader_topics:
            delay = min(delay, self._config.retry_backoff_ms / 1000)
        deadlines = [self._acc.next_expiry()]
        deadlines.extend(b.deadline for b in self._in_flight)
        return max(0.0, min(delay, min(deadlines) - now, 1.0))

    def _expire(self, now: float) -> None:
        """Fail batches past delivery_timeout_ms, queued or in flight (KIP-91)."""
        expired = self._acc.expired(now)
        expired.extend(b for b in self._in_flight if b.deadline <= now)
        for batch in expired:
            where = "in flight" if batch.in_flight else "in the accumulator"
            self._finish(
                batch,
                errors.KafkaTimeoutError(
                    f"expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
                    f"{(now - batch.created) * 1000:.0f} ms have passed since batch creation "
                    f"(delivery_timeout_ms={self._config.delivery_timeout_ms}; the batch was "
                    f"{where})"
                ),
            )

    # -- one request -------------------------------------------------------

    def _start_request(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        for batch in batches:
            batch.in_flight = True
            self._in_flight.add(batch)
            if self._max_in_flight == 1:
                self._muted.add((batch.topic, batch.partition))
        task = asyncio.get_running_loop().create_task(self._produce(conn, batches))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _produce(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        try:
            await self._build_payloads(batches)
            topic_data: dict[str, list[dict[str, Any]]] = {}
            for batch in batches:
                topic_data.setdefault(batch.topic, []).append(
                    {"index": batch.partition, "records": batch.payload}
                )
            body = {
                "transactional_id": self._config.transactional_id,
                "acks": self._acks,
                "timeout_ms": self._config.request_timeout_ms,
                "topic_data": [
                    {"name": topic, "partition_data": parts} for topic, parts in topic_data.items()
                ],
            }
            fut = conn.send(PRODUCE, body, expect_response=self._acks != 0)
            await conn.drain()
            response = await fut
        except errors.KafkaError as exc:
            self._apply_all(batches, exc)
        except Exception as exc:  # noqa: BLE001 - e.g. an encoder bug: fail, never hang
            log.exception("produce request to %r failed", conn)
            self._apply_all(batches, errors.KafkaError(f"produce request failed: {exc!r}"))
        else:
            if self._acks == 0:
                now = time.monotonic()
                for batch in batches:
                    self._apply(batch, None, -1, -1, now)
            else:
                self._apply_response(batches, response)
        finally:
            self.wakeup()

    async def _build_payloads(self, batches: list[ProducerBatch]) -> None:
        loop = asyncio.get_running_loop()
        for batch in batches:
            if batch.payload is not None:
                continue
            build = batch.builder.build
            kwargs = {
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
            }
            if (
                batch.builder.codec != Codec.NONE
                and batch.builder.size_in_bytes >= OFFLOAD_COMPRESSION_BYTES
            ):
                batch.payload = await loop.run_in_executor(None, lambda: build(**kwargs))
            else:
                batch.payload = build(**kwargs)

    def _apply_response(self, batches: list[ProducerBatch], response: Any) -> None:
        results: dict[TopicPartition, Any] = {}
        for topic in response.responses:
            for part in topic.partition_responses:
                results[(topic.name, part.index)] = part
        now = time.monotonic()
        for batch in batches:
            part = results.get((batch.topic, batch.partition))
            if part is None:
                self._apply(
                    batch,
                    errors.CorruptResponseError(
                        f"produce response does not mention {batch.topic}-{batch.partition}"
                    ),
                    -1,
                    -1,
                    now,
                )
                continue
            error = None
            if part.error_code:
                detail = part.get("error_message") or ""
                record_errors = part.get("record_errors") or []
                if record_errors:
                    detail += " " + "; ".join(
                        f"record {e.batch_index}: {e.batch_index_error_message}"
                        for e in record_errors
                    )
                error = errors.error_for_code(part.error_code)(
                    f"{batch.topic}-{batch.partition}: {detail.strip()}".rstrip(": ")
                )
            self._apply(batch, error, part.base_offset, part.log_append_time_ms, now)

    def _apply_all(self, batches: Iterable[ProducerBatch], exc: BaseException) -> None:
        now = time.monotonic()
        for batch in batches:
            self._apply(batch, exc, -1, -1, now)

    def _apply(
        self,
        batch: ProducerBatch,
        error: BaseException | None,
        base_offset: int,
        log_append_time: int,
        now: float,
    ) -> None:
        """Make one batch's outcome take effect. The only place outcomes apply."""
        self._in_flight.discard(batch)
        self._muted.discard((batch.topic, batch.partition))
        batch.in_flight = False
        if batch.done:  # expired while in flight; its futures already failed
            return
        outcome = classify(
            error,
            attempts=batch.attempts,
            deadline=batch.deadline,
            now=now,
            config=self._retry,
            rand=self._rand.random(),
        )
        if outcome.refresh_metadata:
            self._client.request_update()
        if outcome.action is Action.COMPLETE:
            batch.complete(base_offset, log_append_time)
            self._finish(batch, None)
        elif outcome.action is Action.RETRY:
            log.debug("retrying %r after %s in %.3fs", batch, error, outcome.backoff)
            self._acc.reenqueue(batch, now, outcome.backoff)
        else:
            self._finish(batch, outcome.error)

    def _finish(self, batch: ProducerBatch, error: BaseException | None) -> None:
        if error is not None:
            batch.fail(error)
        self._in_flight.discard(batch)
        self._acc.finished(batch)
        if batch.reserved:
            self._pool.release(batch.reserved)
            batch.reserved = 0

    # -- shutdown ----------------------------------------------------------

    def abort(self, exc: BaseException) -> None:
        """Fail everything queued or in flight with ``exc`` (forced close)."""
        for batch in self._acc.take_all() + list(self._in_flight):
            self._finish(batch, exc)
        for batch in list(self._acc.incomplete):
            self._finish(batch, exc)

    async def stop(self) -> None:
        self._running = False
        self.wakeup()
        if self._task is not None:
            await self._task
        requests = list(self._requests)
        for task in requests:
            task.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
