"""The sender's producer id: when to ask for one, which broker to ask, and the asking.

An idempotent producer needs an id (and epoch) before it stamps a batch, and a
new one to get out of a broken sequence state (KIP-360). A
:class:`~aioproducer.engine.sender.Sender` holds one :class:`ProducerIds`,
which owns the request in flight and the last refusal; the sequences
(:class:`~aioproducer.engine.idempotence.SequenceState`) and the requests the
sender has out stay the sender's, read here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from .. import errors
from ..protocol.apis import INIT_PRODUCER_ID
from ..protocol.generated import InitProducerIdRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..config import ProducerConfig
    from ..net.client import KafkaClient
    from ..telemetry.logs import ClientLogger
    from .accumulator import RecordAccumulator, TopicPartition
    from .idempotence import SequenceState

__all__ = ["ProducerIds"]

# Answers that mean "ask again in a moment" while a coordinator loads or moves,
# and how long they are retried before each failure is a WARNING.
_COORDINATOR_BUSY = (
    errors.CoordinatorLoadInProgressError,
    errors.CoordinatorNotAvailableError,
    errors.NotCoordinatorError,
)
_QUIET_COORDINATOR_RETRIES_S = 5.0


def _refused_for_good(exc: BaseException | None) -> bool:
    """A producer id refusal that retrying with these settings and ACLs cannot change."""
    return exc is not None and (
        errors.is_authentication_failure(exc)
        or isinstance(exc, errors.ClusterAuthorizationFailedError)
    )


class ProducerIds:
    """When a sender asks for its producer id, which broker it asks, and the asking."""

    __slots__ = (
        "_abort_queued",
        "_acc",
        "_client",
        "_config",
        "_in_flight_by_tp",
        "_log",
        "_seq",
        "_wakeup",
        "_write_locks",
        "error",
        "failing_since",
        "task",
    )

    def __init__(
        self,
        seq: SequenceState,
        config: ProducerConfig,
        client: KafkaClient,
        acc: RecordAccumulator,
        log: ClientLogger,
        *,
        in_flight_by_tp: dict[TopicPartition, int],
        write_locks: dict[int, asyncio.Lock],
        wakeup: Callable[[], None],
        abort_queued: Callable[[BaseException], None],
    ) -> None:
        self._seq = seq
        self._config = config
        self._client = client
        self._acc = acc
        self._log = log
        # The sender's: batches in flight per partition, and the brokers it
        # has produced to (the keys of its per-broker write locks).
        self._in_flight_by_tp = in_flight_by_tp
        self._write_locks = write_locks
        self._wakeup = wakeup
        self._abort_queued = abort_queued
        #: The request under way (or done), awaited by the sender's stop.
        self.task: asyncio.Task[None] | None = None
        #: Why the last request failed; None once one succeeded.
        self.error: BaseException | None = None
        #: When the failures in a row began (``time.monotonic()``).
        self.failing_since = 0.0

    def start(self) -> None:
        """Ask for an id now, in a task of its own (see :meth:`due`)."""
        self.task = asyncio.get_running_loop().create_task(self._init_producer_id())

    def due(self) -> bool:
        """Whether to ask for a producer id now: at start, or for a bump (KIP-360).

        A bump waits only until the partitions due for the new id have nothing
        in flight (their batches are renumbered, and a sequence the broker may
        be handling must not be reused); requests elsewhere, even ones stuck on
        an unresponsive broker, do not hold it up.
        """
        if self.task is not None and not self.task.done():
            return False
        seq = self._seq
        if not seq.ready:
            # Refused for want of an ACL: ask again for records that wait (the
            # ACL may have been granted since), not on every pass while idle.
            return not _refused_for_good(self.error) or self._acc.queued_batches() > 0
        return seq.bump_needed and not any(
            self._in_flight_by_tp.get(tp) for tp in seq.waiting_for_id()
        )

    def _node(self) -> int:
        """The broker to ask: the least loaded one this sender talks to (a stalled
        broker holds its requests), else any known one (Java's leastLoadedNode)."""
        best: int | None = None
        load = 0
        for node in self._write_locks:  # brokers this sender has produced to
            if node not in self._client.snapshot.brokers:
                continue
            conn = self._client.connections.ready_connection(node)
            if conn is not None and (best is None or conn.in_flight < load):
                best, load = node, conn.in_flight
        return self._client.connections.any_node() if best is None or load else best

    async def _init_producer_id(self) -> None:
        """Get a producer id: at start, and as the way out of a broken sequence state.

        The version is the highest both sides speak. Brokers hand an idempotent
        (non-transactional) producer a fresh id whatever id and epoch it sends
        (Kafka's coordinator ignores them; Tansu refuses v0-v2 and refuses to
        bump), so the request carries none: a new id restarts every partition
        the producer renumbers at 0, while batches kept on the old id are still
        deduplicated against it (KIP-360).
        """
        seq = self._seq
        timeout = self._config.request_timeout_ms / 1000
        try:
            node = self._node()
            conn = await self._client.connections.connection(node, timeout)
            body = InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout_ms=self._config.transaction_timeout_ms,
            )
            response = await conn.request(INIT_PRODUCER_ID, body)
            errors.raise_for_code(response.error_code, f"InitProducerId from broker {node}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - retried after a backoff; batches expire meanwhile
            now = time.monotonic()
            if self.error is None:
                self.failing_since = now
            self.error = exc
            # A coordinator still loading (a broker just started) answers so
            # for a moment: Java retries it quietly; a WARNING only if it lasts.
            transient = (
                isinstance(exc, _COORDINATOR_BUSY)
                and now - self.failing_since < _QUIET_COORDINATOR_RETRIES_S
            )
            self._log.log(
                logging.DEBUG if transient else logging.WARNING,
                "could not get a producer id: %s",
                exc,
            )
            if _refused_for_good(exc):
                # Refused by TLS or SASL, or not authorized: nothing queued can
                # be sent until the settings or the ACLs change, so fail it now
                # rather than at its deadline (Java's Sender fails the batches
                # on CLUSTER_AUTHORIZATION_FAILED and starts over uninitialized).
                self._abort_queued(exc)
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)
        else:
            self.error = None
            reason = seq.bump_reason
            renumbered = seq.reset(response.producer_id, response.producer_epoch)
            self._log.info(
                "producer id %s epoch %s%s",
                seq.producer_id,
                seq.epoch,
                f" ({len(renumbered)} pending batches renumbered after: {reason})"
                if reason
                else "",
            )
        finally:
            self._wakeup()
