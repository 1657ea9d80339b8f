"""The sender's producer id: when to ask for one, which broker to ask, and the asking.

An idempotent producer needs an id (and epoch) before it stamps a batch, and a
new one to get out of a broken sequence state (KIP-360). This mixin holds that
part of :class:`~aioproducer.engine.sender.Sender`; its state (``_seq``,
``_pid_error``, ``_pid_task``...) is the sender's.
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
    from ..config import ProducerConfig
    from ..logs import ClientLogger
    from ..net.client import KafkaClient
    from .accumulator import RecordAccumulator, TopicPartition
    from .idempotence import SequenceState

__all__ = ["ProducerIdMixin"]

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


class ProducerIdMixin:
    """Producer id acquisition for :class:`~aioproducer.engine.sender.Sender`."""

    _seq: SequenceState | None
    _pid_error: BaseException | None
    _pid_failing_since: float
    _pid_task: asyncio.Task[None] | None
    _config: ProducerConfig
    _client: KafkaClient
    _acc: RecordAccumulator
    _log: ClientLogger
    _in_flight_by_tp: dict[TopicPartition, int]
    _write_locks: dict[int, asyncio.Lock]

    def wakeup(self) -> None:  # provided by the sender
        raise NotImplementedError

    def abort_queued(self, exc: BaseException) -> None:  # provided by the sender
        raise NotImplementedError

    def _producer_id_due(self, seq: SequenceState) -> bool:
        """Whether to ask for a producer id now: at start, or for a bump (KIP-360).

        A bump waits only until the partitions due for the new id have nothing
        in flight (their batches are renumbered, and a sequence the broker may
        be handling must not be reused); requests elsewhere, even ones stuck on
        an unresponsive broker, do not hold it up.
        """
        if self._pid_task is not None and not self._pid_task.done():
            return False
        if not seq.ready:
            # Refused for want of an ACL: ask again for records that wait (the
            # ACL may have been granted since), not on every pass while idle.
            return not _refused_for_good(self._pid_error) or self._acc.queued_batches() > 0
        return seq.bump_needed and not any(
            self._in_flight_by_tp.get(tp) for tp in seq.waiting_for_id()
        )

    def _producer_id_node(self) -> int:
        """The broker to ask: the least loaded one this sender talks to (a stalled
        broker holds its requests), else any known one (Java's leastLoadedNode)."""
        best: int | None = None
        load = 0
        for node in self._write_locks:  # brokers this sender has produced to
            if node not in self._client.snapshot.brokers:
                continue
            conn = self._client.ready_connection(node)
            if conn is not None and (best is None or conn.in_flight < load):
                best, load = node, conn.in_flight
        return self._client.any_node() if best is None or load else best

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
        assert seq is not None
        timeout = self._config.request_timeout_ms / 1000
        try:
            node = self._producer_id_node()
            conn = await self._client.connection(node, timeout)
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
            if self._pid_error is None:
                self._pid_failing_since = now
            self._pid_error = exc
            # A coordinator still loading (a broker just started) answers so
            # for a moment: Java retries it quietly; a WARNING only if it lasts.
            transient = (
                isinstance(exc, _COORDINATOR_BUSY)
                and now - self._pid_failing_since < _QUIET_COORDINATOR_RETRIES_S
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
                self.abort_queued(exc)
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)
        else:
            self._pid_error = None
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
            self.wakeup()

    # -- shutdown ----------------------------------------------------------
