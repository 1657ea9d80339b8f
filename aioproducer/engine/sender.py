"""The sender: one event-loop task that moves batches from the accumulator to brokers.

It reads top to bottom::

    while running:
        fail batches past their delivery timeout
        ready = accumulator.ready(now, leaders)          # pure
        ask for metadata if some leader is unknown
        drain ready nodes that have a connection and room in flight
        for each node: start one Produce request
        sleep until woken (new batch, response, connection attempt ended,
        metadata refreshed, flush) or the next deadline (linger, retry or
        reconnect backoff, throttle, expiry); never polls

Each Produce request ends in :meth:`Sender._apply`, the one place where batch
outcomes take effect: complete the futures, put the batch back at the front of
its partition to retry, or fail it; then release its buffer memory.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import errors
from ..config import ProducerConfig
from ..net.client import KafkaClient
from ..net.connection import BrokerConnection
from ..protocol.generated import ProduceResponse
from ..telemetry.logs import ClientLogger
from .accumulator import RecordAccumulator, TopicPartition
from .batch import ProducerBatch
from .buffer_pool import BufferPool
from .idempotence import SequenceState, held_in_order
from .produce_request import leader_hints, partition_outcomes
from .producer_id import ProducerIds
from .request_writer import Outcome, RequestWriter
from .retry import Action, RetryConfig, classify, expired_in_flight, expiry_error
from .sender_alarm import SenderAlarm
from .transactions import TransactionManager

if TYPE_CHECKING:
    from ..telemetry.producer_metrics import ProducerMetrics

__all__ = ["Sender"]

log = logging.getLogger("aioproducer.engine.sender")


class Sender:
    """The one task that sends a producer's batches and applies the answers."""

    def __init__(
        self,
        config: ProducerConfig,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        seq: SequenceState | None = None,
        txn: TransactionManager | None = None,
        metrics: ProducerMetrics | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._log = ClientLogger(log, client.connections.client_id or "aioproducer")
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
        # No batch in flight has a delivery deadline before this. A lower
        # bound, not kept exact: a batch leaving the set does not raise it,
        # so a pass looks through the set only once the bound is reached.
        self._in_flight_earliest = math.inf
        # Rung by wakeup(); the loop sleeps on it between passes.
        self._alarm = SenderAlarm()
        # The last pass held a sendable batch back for requests in flight (its
        # node at max_in_flight, its partition muted), or a batch was put back
        # since: the end of a request wakes the loop (_pass_due_after_request).
        self._held_for_requests = False
        self._running = True
        self._task: asyncio.Task[None] | None = None
        #: Loop passes so far: the loop runs on events and deadlines, not on a timer.
        self.passes = 0
        # A connection attempt that ends or a metadata refresh may make a node ready.
        client.connections.add_listener(self.wakeup)
        # A record waiting for memory makes full batches sendable at once.
        pool.listen(self.wakeup)
        self._rand = random.Random()
        # Idempotence (KIP-98): producer id, epoch and sequences; None when off.
        self._seq = seq
        # Transactions (KIP-98): partitions join the transaction before their
        # first batch, and a failure makes the transaction abortable instead of
        # bumping the epoch.
        self._txn = txn
        self._in_flight_by_tp: dict[TopicPartition, int] = {}
        # Produce requests, written per node in the order they were started.
        self._writer = RequestWriter(
            acks=self._acks,
            transactional_id=config.transactional_id,
            timeout_ms=config.request_timeout_ms,
            txn=txn,
            metrics=metrics,
            log=self._log,
            answered=self._answered,
        )
        self._next_stranded_check = 0.0
        # The last error each partition's batches were answered with, cleared
        # by an acknowledgement: a batch that expires while queued behind
        # retries, or in flight, says what kept its partition from progressing.
        self._last_error: dict[TopicPartition, BaseException] = {}
        # Idempotent only: a transactional producer's id comes from its TransactionManager.
        self._pid: ProducerIds | None = None
        if seq is not None and txn is None:
            self._pid = ProducerIds(
                seq,
                config,
                client,
                accumulator,
                self._log,
                in_flight_by_tp=self._in_flight_by_tp,
                write_locks=self._writer.locks,
                wakeup=self.wakeup,
                abort_queued=self.abort_queued,
            )

    def __repr__(self) -> str:
        return (
            f"<Sender in_flight_batches={len(self._in_flight)} requests={self.requests_in_flight}>"
        )

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="aioproducer-sender")

    def wakeup(self) -> None:
        self._alarm.ring()

    def batch_opened(self, batch: ProducerBatch) -> bool:
        """A record opened ``batch``: see that the loop passes by the time it can be sent.

        A loop asleep until then is left alone; one asleep until later has its
        timer brought forward. A pass now would only set that timer: in a web
        service such passes (a task step, a future, a timer each) were over half.
        Returns whether a pass is due now (the batch before it is full, or this
        one is sendable at once): then the caller's next record yields to it first.
        """
        alarm = self._alarm
        until = alarm.asleep_until
        if until is None:
            alarm.ring()
            return True
        when = self._acc.sendable_from(
            batch, self._client.snapshot.leader_for, memory_exhausted=self._pool.exhausted
        )
        now = time.monotonic()
        if until <= when:
            return alarm.woken or until <= now  # rung, or its timer is due: a pass comes
        if when <= now:
            alarm.ring()
            return True
        alarm.bring_forward(when, now)
        return alarm.woken

    @property
    def requests_in_flight(self) -> int:
        """Produce requests started and not yet answered (Java's requests-in-flight)."""
        return sum(self._writer.requests.values())

    # -- the loop ----------------------------------------------------------

    async def _run(self) -> None:
        while self._running:
            self.passes += 1
            try:
                delay = self._run_once(time.monotonic())
            except Exception:  # noqa: BLE001 - logged; the loop must go on or records hang
                self._log.exception("unexpected error in the sender loop")
                delay = 0.1
            if delay > 0 and not self._alarm.woken:
                await self._alarm.sleep(delay)
            else:
                await asyncio.sleep(0)
            self._alarm.woken = False

    def _run_once(self, now: float) -> float:
        """One pass: expire, drain, send. Returns seconds until the next pass."""
        self._held_for_requests = True  # should the pass fail, every request's end wakes the loop
        held_for_requests = False
        self._expire(now)
        self._fail_queued_of_failed_txn()
        snapshot = self._client.snapshot
        ready = self._acc.ready(now, snapshot.leader_for, memory_exhausted=self._pool.exhausted)
        if ready.unknown_leader_topics:
            for topic in ready.unknown_leader_topics:
                self._client.add_topic(topic)
            self._client.request_update()
        delay = ready.next_check
        seq = self._seq
        if seq is not None:
            if not seq.ready:
                ready.nodes.clear()  # no producer id yet: nothing can be stamped
            if self._pid is not None and self._pid.due():
                self._pid.start()
        conns: dict[int, BrokerConnection] = {}
        connections = self._client.connections
        for node in list(ready.nodes):
            conn = connections.ready_connection(node)
            refused = connections.authentication_failure(node) if conn is None else None
            if refused is not None:
                # TLS or SASL refused us: waiting out the delivery timeout
                # would not change the answer (Java fails these batches too).
                ready.nodes.discard(node)
                for batch in self._acc.take_partitions(ready.partitions.get(node, ())):
                    self._finish(batch, refused)
                continue
            if conn is None:
                # Woken when the connection attempt ends; else at the end of
                # a reconnect backoff or a throttle (KIP-219).
                ready.nodes.discard(node)
                delay = min(delay, connections.not_ready_until(node) - now)
            elif self._writer.requests.get(node, 0) >= self._max_in_flight:
                ready.nodes.discard(node)  # a request that ends wakes the loop
                held_for_requests = True
            else:
                conns[node] = conn
        if conns and self._fail_queued_of_failed_txn():
            conns.clear()  # a refusal above failed the transaction: nothing more of it goes out
        if conns:
            muted: set[TopicPartition] = set(self._muted) if self._max_in_flight == 1 else set()
            if seq is not None:
                muted.update(held_in_order(seq, self._acc.retried_heads(), self._in_flight_by_tp))
            if self._txn is not None:
                muted.update(
                    tp
                    for tps in ready.partitions.values()
                    for tp in tps
                    if not self._txn.partition_added(tp)
                )
            held_for_requests = held_for_requests or bool(muted)
            drained = self._acc.drain(now, ready, self._config.max_request_size, muted)
            for node, batches in drained.items():
                self._start_request(conns[node], batches)
            if drained and self._acc.has_queued():
                # A drain takes one batch per partition: look again at once for
                # the next ones rather than wait for an enqueue or an answer.
                # (With nothing left queued, the next pass waits for an event:
                # an enqueue, an answer or a deadline already in ``delay``.)
                delay = 0.0
        self._held_for_requests = held_for_requests
        deadline = min(self._acc.next_expiry(), self._in_flight_earliest)
        return max(0.0, min(delay, deadline - now, 1.0))

    def _expire(self, now: float) -> None:
        """Fail batches past delivery_timeout_ms, queued or in flight (KIP-91)."""
        expired = self._acc.expired(now)
        earliest = None
        if now >= self._in_flight_earliest:
            # Those past their deadline go (_finish takes them out of the
            # set); the bound becomes the earliest deadline of the rest.
            late, earliest = expired_in_flight(self._in_flight, now)
            expired += late
        if self._acc.incomplete and now >= self._next_stranded_check:
            # Belt and braces: a batch neither queued nor in flight (only a bug
            # could strand one) still fails at its deadline instead of hanging flush().
            self._next_stranded_check = now + 1.0
            expired += self._acc.stranded(now, set(expired))
        for batch in expired:
            tp = (batch.topic, batch.partition)
            exc = expiry_error(
                batch.record_count,
                tp,
                now - batch.created,
                self._config.delivery_timeout_ms,
                batch.in_flight,
                self._last_error.get(tp),
                None if self._pid is None else self._pid.error,
            )
            self._finish(batch, exc)
        if earliest is not None:
            self._in_flight_earliest = earliest

    # -- one request -------------------------------------------------------

    def _start_request(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        for batch in batches:
            batch.start_attempt()
            self._in_flight.add(batch)
            if batch.deadline < self._in_flight_earliest:
                self._in_flight_earliest = batch.deadline
            tp = (batch.topic, batch.partition)
            self._in_flight_by_tp[tp] = self._in_flight_by_tp.get(tp, 0) + 1
            if self._seq is not None:
                self._seq.stamp(batch)
            if self._max_in_flight == 1:
                self._muted.add(tp)
        self._writer.start(conn, batches)

    def _answered(
        self, conn: BrokerConnection, batches: list[ProducerBatch], outcome: Outcome
    ) -> None:
        """A request ended (:class:`RequestWriter`): its response, None with acks=0
        (the broker never answers), or what ended it. Every batch takes an outcome."""
        unanswered = set(batches)  # those _apply has not taken yet
        try:
            if isinstance(outcome, BaseException):
                # Lost, timed out, undecodable: the broker may or may not have written each.
                if not isinstance(outcome, errors.KafkaError):
                    outcome = errors.KafkaError(f"produce request failed: {outcome!r}")
                self._apply_all(batches, outcome, unanswered)
            elif outcome is None:
                now = time.monotonic()
                for batch in batches:
                    unanswered.discard(batch)
                    self._apply(batch, None, -1, -1, now)
            else:
                self._apply_response(batches, outcome, conn.node_id, unanswered)
        except Exception as exc:  # noqa: BLE001 - a batch must never be stranded
            self._log.exception(
                "handling the produce response from %r failed",
                conn,
                extra={"broker": conn.node_id},
            )
            self._apply_all(
                [b for b in batches if b in unanswered],
                errors.CorruptResponseError(f"produce response handling failed: {exc!r}"),
            )
        finally:
            if self._pass_due_after_request():
                self.wakeup()

    def _pass_due_after_request(self) -> bool:
        """Whether a request that ended may let the sender do something now.

        Only a queued batch that waited for requests in flight (its node had no
        room, its partition was muted) or was put back (a retry, the parts of a
        split), a producer id that waits for its partitions' requests to end
        (KIP-360), or a stop can use a pass. (A transaction that fails wakes
        the sender itself.) Any other queued batch is lingering, and the loop
        already sleeps no longer than its linger. A service whose handlers each
        ``await send()`` would otherwise wake the sender after every answer.
        """
        if not self._running or (self._held_for_requests and self._acc.has_queued()):
            return True
        seq = self._seq
        return seq is not None and (not seq.ready or seq.bump_needed)

    def _fail_queued_of_failed_txn(self) -> bool:
        """Fail the queued batches if the transaction failed or is being aborted
        (:meth:`TransactionManager.voids_batches`); whether it did."""
        txn = self._txn
        if txn is None or not txn.voids_batches():
            return False
        if self._acc.queued_batches():
            self.abort_queued(txn.void_error())
        return True

    def _apply_response(
        self,
        batches: list[ProducerBatch],
        response: ProduceResponse,
        node: int,
        unanswered: set[ProducerBatch],
    ) -> None:
        now = time.monotonic()
        leaders, brokers = leader_hints(response)
        if leaders:
            # KIP-951: the refusal names the new leader; the retries go there
            # at once instead of after a metadata round trip.
            self._client.apply_leader_hints(leaders, brokers)
        for batch, error, written, base_offset, log_append_time in partition_outcomes(
            batches, response
        ):
            unanswered.discard(batch)
            maybe_written = None if written is None else written.maybe_written
            self._apply(batch, error, base_offset, log_append_time, now, node, maybe_written)

    def _apply_all(
        self,
        batches: Iterable[ProducerBatch],
        exc: BaseException,
        unanswered: set[ProducerBatch] | None = None,
    ) -> None:
        """The request failed as a whole (connection lost, timed out, undecodable):
        the broker may or may not have written each batch. Each batch applied
        leaves ``unanswered``."""
        now = time.monotonic()
        for batch in batches:
            if unanswered is not None:
                unanswered.discard(batch)
            self._apply(batch, exc, -1, -1, now, maybe_written=True)

    def _apply(
        self,
        batch: ProducerBatch,
        error: BaseException | None,
        base_offset: int,
        log_append_time: int,
        now: float,
        sent_to: int | None = None,
        maybe_written: bool | None = None,
    ) -> None:
        """Make one batch's outcome take effect. The only place outcomes apply.

        ``sent_to`` is the node that answered: a batch to retry whose partition
        is led elsewhere by now goes there without a backoff (Java's
        ``hasLeaderChangedForTheOngoingRetry``, KIP-951). ``maybe_written``:
        see :meth:`ProducerBatch.answered`.
        """
        tp = (batch.topic, batch.partition)
        self._in_flight.discard(batch)
        self._muted.discard(tp)
        self._in_flight_by_tp[tp] -= 1
        if not self._in_flight_by_tp[tp]:
            del self._in_flight_by_tp[tp]
        batch.answered(maybe_written)
        if error is None:
            self._last_error.pop(tp, None)
        else:
            self._last_error[tp] = error
        if batch.decided:  # failed while in flight (expired, aborted): nothing left to do
            return
        if error is None:  # what classify() decides for a success, without its arguments
            self._complete(batch, base_offset, log_append_time)
            return
        seq = self._seq
        outcome = classify(
            error,
            attempts=batch.attempts,
            config=self._retry,
            rand=self._rand.random(),
            idempotent=seq is not None,
            first_pending=seq is None or seq.is_first_pending(batch),
            # A batch holding bulk records (spans, no per-record futures) fails whole.
            splittable=batch.record_count > 1 and not batch.maybe_written and not batch.spans,
            batch_bytes=None if batch.payload is None else len(batch.payload),
        )
        if outcome.action is Action.SPLIT:
            self._split(batch, now)
            return
        if outcome.refresh_metadata:
            self._client.request_update()
        if outcome.bump_epoch and self._txn is not None:
            # A transactional producer does not renumber on its own: the
            # transaction fails and the user aborts it.
            self._finish(batch, error)
            return
        if outcome.bump_epoch and seq is not None:
            seq.request_bump(f"{tp[0]}-{tp[1]}: {error}", tp)
        if outcome.action is Action.COMPLETE:
            self._complete(batch, base_offset, log_append_time)
        elif outcome.action is Action.RETRY:
            backoff = outcome.backoff
            if sent_to is not None and self._client.snapshot.leader_for(*tp) not in (None, sent_to):
                backoff = 0.0
            self._log.debug(
                "retrying %r after %s in %.3fs",
                batch,
                error,
                backoff,
                extra={"partition": f"{tp[0]}-{tp[1]}"},
            )
            if self._metrics is not None:
                self._metrics.retried(batch.topic, batch.record_count, now)
            self._acc.reenqueue(batch, now, backoff)
            self._held_for_requests = True  # its backoff: a pass sets the timer
        else:
            self._finish(batch, outcome.error)

    def _split(self, batch: ProducerBatch, now: float) -> None:
        """Retry the records of a batch refused as too large in smaller batches (KIP-126)."""
        parts = self._acc.split(batch)
        self._log.info(
            "%s-%s: a batch of %d records was too large for the broker; retrying it as %d batches",
            batch.topic,
            batch.partition,
            batch.record_count,
            len(parts),
            extra={"partition": f"{batch.topic}-{batch.partition}"},
        )
        if self._seq is not None and batch.base_sequence >= 0:
            self._seq.split(batch, parts)
        self._acc.reenqueue_split(parts, now)
        self._held_for_requests = True

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        """The broker wrote ``batch``: its futures say where, unless its transaction
        failed or is aborting since: the abort voids it, so they fail (Java reports them)."""
        txn = self._txn
        if txn is not None and txn.voids_batches():
            self._finish(batch, txn.void_error(), acknowledged=True)
            return
        batch.complete(base_offset, log_append_time)
        self._finish(batch, None)

    def _finish(
        self, batch: ProducerBatch, error: BaseException | None, *, acknowledged: bool = False
    ) -> None:
        """Settle ``batch`` (futures, sequences, memory); ``acknowledged``: written, yet failed."""
        seq = self._seq if batch.base_sequence >= 0 else None
        if error is not None and not batch.decided:
            if self._txn is not None:
                error = self._txn.batch_failed(error)
            error = errors.delivery_error(
                error, acknowledged or batch.maybe_written or batch.in_flight
            )
            if acknowledged:
                if seq is not None:
                    seq.acknowledged(batch)
            elif seq is not None:
                if self._txn is not None:
                    # Its sequences will never be acknowledged: a transactional
                    # producer renumbers on a new epoch when the user aborts.
                    self._txn.epoch_bump_needed = True
                else:
                    # Still in flight (expired), or answered in a way that leaves
                    # the append possible: the broker may hold its sequences.
                    seq.failed(batch, may_have_landed=batch.maybe_written or batch.in_flight)
            batch.fail(error)
            if self._metrics is not None:
                self._metrics.failed(batch.topic, batch.record_count, time.monotonic())
        elif error is None and seq is not None:
            seq.acknowledged(batch)
        if seq is not None:
            seq.finished(batch)  # whatever path got here, the batch is no longer pending
        self._in_flight.discard(batch)
        self._acc.finished(batch)
        if batch.reserved:
            self._pool.release(batch.release_reserved())

    # -- shutdown ------------------------------------------------------------

    def abort_queued(self, exc: BaseException) -> None:
        """Fail the batches not yet sent (a transaction is being aborted)."""
        for batch in self._acc.take_all():
            self._finish(batch, exc)

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
        requests = self._writer.stop()
        if self._pid is not None and self._pid.task is not None:
            requests.append(self._pid.task)
        for task in requests:
            task.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
