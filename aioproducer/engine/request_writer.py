"""Writing the sender's Produce requests, each node's in the order they were started.

Order matters: the broker checks an idempotent producer's sequences per
partition, and two requests to one node may carry one partition's consecutive
batches (KIP-98). Most requests are written at once, in the sender's pass: their
batches were built there and nothing to their node waits before them. A
request with a large batch to compress (built in a worker thread, off the
loop), or one behind such a request or behind a full socket buffer, waits in a
task for its node's lock, which is taken in the order the requests started.

Whatever ends a request (its response, the acks=0 non-answer, a lost
connection, a timeout, an encoder or codec failure) comes back through one
callback, ``answered(conn, batches, outcome)``, called from the event loop,
never from within the sender's pass. Requests are answered through a done
callback of the connection's future, not a task awaiting it: a task, a lock
and two coroutines per request were a measurable part of a web service's CPU.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from .. import errors
from ..net.connection import BrokerConnection
from ..protocol.apis import PRODUCE
from ..protocol.generated import ProduceResponse
from ..telemetry.logs import ClientLogger
from .batch import ProducerBatch
from .produce_request import build_payloads, build_small_payloads, produce_body
from .transaction_version import choose_version
from .transactions import TransactionManager

if TYPE_CHECKING:
    from ..telemetry.producer_metrics import ProducerMetrics

__all__ = ["Outcome", "RequestWriter"]

#: What ended a request: its response, None (acks=0: no answer), or the error.
Outcome = ProduceResponse | BaseException | None


class RequestWriter:
    """Writes Produce requests in their start order per node; reports what ends each."""

    __slots__ = (
        "_acks",
        "_answered",
        "_log",
        "_metrics",
        "_stopped",
        "_timeout_ms",
        "_transactional_id",
        "_txn",
        "_waiting",
        "locks",
        "requests",
        "tasks",
    )

    def __init__(
        self,
        *,
        acks: int,
        transactional_id: str | None,
        timeout_ms: int,
        txn: TransactionManager | None,
        metrics: ProducerMetrics | None,
        log: ClientLogger,
        answered: Callable[[BrokerConnection, list[ProducerBatch], Outcome], None],
    ) -> None:
        self._acks = acks
        self._transactional_id = transactional_id
        self._timeout_ms = timeout_ms
        self._txn = txn
        self._metrics = metrics
        self._log = log
        self._answered = answered
        #: One lock per node written to, taken by the writes that must wait.
        #: Its keys are the brokers this producer has produced to.
        self.locks: dict[int, asyncio.Lock] = {}
        #: Per node: requests started and not yet ended, counted from their
        #: start (a batch may still be compressing in a worker thread).
        self.requests: dict[int, int] = {}
        # Per node: tasks holding or waiting for its lock. While there is one,
        # a new request waits its turn too.
        self._waiting: dict[int, int] = {}
        #: The tasks of the writes that wait (cancelled by :meth:`stop`).
        self.tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

    def start(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """Write the request of ``batches`` now, or after its node's earlier ones."""
        node = conn.node_id
        self.requests[node] = self.requests.get(node, 0) + 1
        lock = self.locks.get(node)
        if lock is None:
            lock = self.locks[node] = asyncio.Lock()
        if not self._waiting.get(node):
            try:
                offload = build_small_payloads(batches)
            except Exception as exc:  # noqa: BLE001 - a codec failure: fail, never hang
                self._failed(conn, batches, exc)
                return
            if offload is None:
                self._write(conn, batches)
                if conn.write_backlogged():
                    self._spawn(node, self._drain_later(node, lock, conn))
                return
        self._spawn(node, self._write_later(node, lock, conn, batches))

    def stop(self) -> list[asyncio.Task[None]]:
        """Answers from now on are dropped (the sender fails what was in flight);
        the waiting writes' tasks, for the caller to cancel."""
        self._stopped = True
        return list(self.tasks)

    def _spawn(self, node: int, write: Coroutine[Any, Any, None]) -> None:
        self._waiting[node] = self._waiting.get(node, 0) + 1
        task = asyncio.get_running_loop().create_task(write)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _write_later(
        self, node: int, lock: asyncio.Lock, conn: BrokerConnection, batches: list[ProducerBatch]
    ) -> None:
        written = False
        try:
            async with lock:
                try:
                    await build_payloads(batches)
                except Exception as exc:  # noqa: BLE001 - a codec failure: fail, never hang
                    written = True
                    self._failed(conn, batches, exc)
                    return
                written = True
                self._write(conn, batches)
                await conn.drain()
        finally:
            self._waiting[node] -= 1
            if not written:  # cancelled by stop() before it was written: nothing will answer
                self.requests[node] -= 1

    async def _drain_later(self, node: int, lock: asyncio.Lock, conn: BrokerConnection) -> None:
        """Hold the node's next requests while its socket's write buffer is full."""
        try:
            async with lock:
                await conn.drain()
        finally:
            self._waiting[node] -= 1

    def _write(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """Write the request of ``batches`` (built); what ends it goes to ``answered``."""
        try:
            if self._metrics is not None:
                self._metrics.batches_sent(batches, time.monotonic())
            body = produce_body(
                batches,
                transactional_id=self._transactional_id,
                acks=self._acks,
                timeout_ms=self._timeout_ms,
            )
            version = None
            if self._txn is not None:
                # Produce v12 adds the partition to the transaction: only under v2.
                version = choose_version(PRODUCE.key, conn.version_for(PRODUCE), v2=self._txn.v2)
            fut = conn.send(PRODUCE, body, version=version, expect_response=self._acks != 0)
        except Exception as exc:  # noqa: BLE001 - e.g. an encoder bug: fail, never hang
            self._failed(conn, batches, exc)
        else:
            fut.add_done_callback(partial(self._on_response, conn, batches, time.monotonic()))

    def _failed(self, conn: BrokerConnection, batches: list[ProducerBatch], exc: Exception) -> None:
        """``exc`` kept the request from being written: it ends with that error,
        after this pass, as any answer would (never within the sender's pass)."""
        failure = exc
        if not isinstance(exc, errors.KafkaError):
            self._log.error(
                "produce request to %r failed", conn, exc_info=exc, extra={"broker": conn.node_id}
            )
            failure = errors.KafkaError(f"produce request failed: {exc!r}")
        asyncio.get_running_loop().call_soon(self._end, conn, batches, failure)

    def _on_response(
        self,
        conn: BrokerConnection,
        batches: list[ProducerBatch],
        sent_at: float,
        fut: asyncio.Future[ProduceResponse | None],
    ) -> None:
        outcome: Outcome
        if fut.cancelled():
            outcome = errors.ConnectionLostError(f"the Produce request to {conn!r} was cancelled")
        else:
            outcome = fut.exception() or fut.result()
        try:
            if self._metrics is not None and isinstance(outcome, ProduceResponse):
                now = time.monotonic()
                self._metrics.produce_response(
                    conn.node_id, (now - sent_at) * 1000, outcome.throttle_time_ms, now
                )
        finally:
            self._end(conn, batches, outcome)

    def _end(self, conn: BrokerConnection, batches: list[ProducerBatch], outcome: Outcome) -> None:
        self.requests[conn.node_id] -= 1
        if not self._stopped:  # else the sender has failed what was in flight
            self._answered(conn, batches, outcome)
