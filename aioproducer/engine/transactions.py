"""Kafka transactions (KIP-98): the state machine and the coordinator round trips.

A transactional producer finds its transaction coordinator (FindCoordinator
with key type 1), gets a producer id and epoch for its ``transactional_id``
(InitProducerId, which also fences any older producer with the same id), and
then, per transaction: registers each partition before its first batch
(AddPartitionsToTxn), optionally the consumer group's offsets
(AddOffsetsToTxn + TxnOffsetCommit), and ends with EndTxn commit or abort.

States and who moves between them::

    UNINITIALIZED --init()--> READY --begin()--> IN_TRANSACTION
    IN_TRANSACTION --commit()--> READY          (flushes first)
    IN_TRANSACTION | ABORTABLE_ERROR --abort()--> READY
    IN_TRANSACTION --prepare()--> PREPARED      (flushes first; two-phase commit)
    PREPARED --complete()--> READY
    any --fenced / fatal error--> FATAL_ERROR   (the producer must be closed)

Two-phase commit (:mod:`.two_phase`): ``prepare()`` leaves the transaction
open and describes it; any producer completes it later. Its own producer
completes it with ``complete_prepared``, then moves to a new epoch so that no
replay of that completion can end a later transaction.

Every failure (abortable or fatal) wakes the sender, which then fails the
transaction's queued batches at once (Java's abortUndrainedBatches).

A batch that fails inside a transaction makes it ABORTABLE_ERROR: commit then
raises and the user aborts and carries on. So does TRANSACTION_ABORTABLE (120,
KIP-890 part 1) from the broker. Every wait on the coordinator is bounded by
``max_block_ms``.

Transactions v2 (KIP-890 part 2, ``transaction_version.py``), chosen from the
cluster's finalized ``transaction.version`` at init and re-checked after each
transaction: no AddPartitionsToTxn nor AddOffsetsToTxn (the brokers add the
partitions implicitly), and EndTxn hands back the next epoch, adopted with every
sequence back at 0.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from .. import errors
from ..net.client import KafkaClient
from ..protocol.apis import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    COORDINATOR_KEY_GROUP,
    COORDINATOR_KEY_TRANSACTION,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    Api,
)
from ..telemetry.logs import ClientLogger
from .idempotence import SequenceState
from .transaction_version import end_txn_identity, transaction_v2_enabled
from .two_phase import CompletedOutcomes, PreparedTransaction, not_completed_error
from .txn_coordinator import CoordinatorLink
from .txn_offsets import offset_commit_topics, offsets_to_retry
from .txn_requests import (
    add_offsets_request,
    add_partitions_request,
    bump_epoch_request,
    end_txn_request,
    init_producer_id_request,
    offset_commit_request,
    partitions_added,
)

__all__ = ["PreparedTransaction", "TransactionManager", "TxnState"]

Req = TypeVar("Req")
Resp = TypeVar("Resp")

log = logging.getLogger("aioproducer.engine.transactions")
TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    PREPARED = "prepared"
    FATAL_ERROR = "fatal error"


# States abort() leaves: ABORTING too, when an abort that timed out is retried.
_ABORTABLE = frozenset(
    {TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.COMMITTING, TxnState.ABORTING}
)
# The coordinator forgot the id (transactional.id.expiration.ms), or another producer took it.
_UNMAPPED = errors.InvalidProducerIdMappingError


class TransactionManager:
    def __init__(
        self,
        client: KafkaClient,
        seq: SequenceState,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        max_block_ms: int,
        retry_backoff_ms: int,
        wake_sender: Callable[[], None] | None = None,
    ) -> None:
        """``wake_sender`` is called when the sender has something to do at once:
        AddPartitionsToTxn has answered (it waits for that before draining those
        partitions), or the transaction failed (its queued batches fail now,
        Java's abortUndrainedBatches, instead of at their linger)."""
        self._client = client
        # The unit tests drive the state machine with no client at all.
        self._log = ClientLogger(log, getattr(client, "client_id", None) or "aioproducer")
        self._seq = seq
        self.transactional_id = transactional_id
        self._timeout_ms = transaction_timeout_ms
        self._max_block = max_block_ms / 1000
        self.state = TxnState.UNINITIALIZED
        self.error: BaseException | None = None
        # COMMITTING for a prepare (two-phase commit), not a commit: nobody holds
        # its PreparedTransaction yet, so close aborts it.
        self.preparing = False
        self._link = CoordinatorLink(
            client, self._log, transactional_id, self._max_block, retry_backoff_ms / 1000
        )
        self._added: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._add_task: asyncio.Task[None] | None = None
        self._offsets_added = False
        # An AddPartitionsToTxn or AddOffsetsToTxn was sent whose answer may not
        # have come: the coordinator may hold the transaction open, so its end
        # sends EndTxn even with nothing surely added.
        self._maybe_registered = False
        # The last end()'s EndTxn was answered (what follows it may still fail).
        self.end_answered = False
        # A batch with sequence numbers failed: renumber on a new epoch at abort.
        self.epoch_bump_needed = False
        # The coordinator forgot the id: an abort has no transaction to end.
        self._id_unmapped = False
        self._wake_sender = wake_sender
        # Transactions v2 (KIP-890 part 2) for the current transaction.
        self.v2 = False
        # Outcomes of this producer's own two-phase transactions (replays).
        self._completed = CompletedOutcomes(transactional_id)

    @property
    def requests_sent(self) -> Mapping[str, int]:
        """Requests sent to coordinators, by API name (observability, tests)."""
        return self._link.requests_sent

    def __repr__(self) -> str:
        return f"<TransactionManager {self.transactional_id!r} {self.state.value} partitions={len(self._added)}>"

    @property
    def producer_identity(self) -> tuple[int, int]:
        """The producer id and epoch in use (under v2 the epoch grows at every EndTxn)."""
        return self._seq.producer_id, self._seq.epoch

    # -- checks used on the send path (pure) -------------------------------

    def check_can_send(self) -> None:
        if self.state is TxnState.IN_TRANSACTION:
            return
        if self.state is TxnState.FATAL_ERROR:
            raise self._fatal()
        if self.state is TxnState.ABORTABLE_ERROR:
            raise errors.IllegalStateError(
                f"the transaction failed ({self.error}); call abort_transaction() before sending"
            )
        if self.state is TxnState.PREPARED:
            raise errors.IllegalStateError(
                "the transaction was prepared: complete it with complete_transaction() "
                "before sending"
            )
        raise errors.IllegalStateError(
            f"cannot send outside a transaction (state: {self.state.value}); "
            "call begin_transaction() first"
        )

    def _nothing_registered(self) -> bool:
        """Nothing of the transaction can be open on the coordinator (a registration
        whose answer never came may have opened it)."""
        return not (self._added or self._offsets_added or self._maybe_registered)

    def voids_batches(self) -> bool:
        """No batch of the transaction may go out, nor report success: it failed
        (abortable, or the producer is fenced) or is being aborted, and the
        abort marker voids what it wrote (Java's Sender.maybeAbortBatches). A
        batch put back for a retry while the user's abort waits fails too."""
        return self.error is not None or self.state is TxnState.ABORTING

    def void_error(self) -> BaseException:
        """What a record of a transaction that :meth:`voids_batches` fails with."""
        if isinstance(self.error, errors.ProducerFencedError):
            return self.error
        return errors.TransactionAbortedError(
            "the transaction was aborted, which voids this record"
            if self.error is None
            else f"the transaction failed, which voids this record: {self.error}"
        )

    def partition_added(self, tp: TopicPartition) -> bool:
        return tp in self._added

    def add_partition(self, tp: TopicPartition) -> None:
        """Register ``tp`` in the current transaction before its first batch goes out.

        Raises (as :meth:`check_can_send`) unless a transaction is open: a
        partition added outside one would leave a record outside any transaction.
        """
        if self.state is not TxnState.IN_TRANSACTION:
            self.check_can_send()
        if tp in self._added or tp in self._pending:
            return
        if self.v2:
            # The partition leader adds it on the first Produce v12 (KIP-890).
            self._added.add(tp)
            return
        self._pending.add(tp)
        if self._add_task is None or self._add_task.done():
            self._add_task = asyncio.get_running_loop().create_task(self._add_partitions())

    def unadded(self) -> set[TopicPartition]:
        return self._pending

    def batch_failed(self, exc: BaseException) -> BaseException:
        """A batch of this transaction failed: the transaction can only be aborted.

        Returns the error the batch's records get. PRODUCER_FENCED is fatal.
        INVALID_PRODUCER_EPOCH from a partition leader is abortable, as in Java
        (KIP-588): the coordinator bumped the epoch (the transaction outlived
        ``transaction_timeout_ms``, or a newer producer took the id); the abort
        tells which (PRODUCER_FENCED to a zombie, else a new epoch). Under v2
        this is how a zombie first hears of it: its Produce v12 meets the newer
        epoch (KIP-890).
        """
        if not isinstance(exc, errors.KafkaError):
            code, detail = None, ""
        else:
            code, detail = exc.code, exc.message or ""
        if code == errors.ProducerFencedError.code:
            if self.state is TxnState.FATAL_ERROR and exc is self.error:
                return errors.ProducerFencedError(str(exc))  # already recorded (void_error)
            fenced = errors.ProducerFencedError(
                f"transactional id {self.transactional_id!r}; {detail}"
            )
            self._to_fatal(fenced)
            return errors.ProducerFencedError(str(fenced))
        if code == errors.InvalidProducerEpochError.code:
            self.epoch_bump_needed = True
            exc = errors.InvalidProducerEpochError(
                f"transactional id {self.transactional_id!r}: the coordinator moved to a newer "
                f"epoch (the transaction ran past transaction_timeout_ms, or a newer producer "
                f"with this id started); abort the transaction. {detail}".rstrip()
            )
        elif code == errors.InvalidProducerIdMappingError.code:
            # Abortable, as in Java (abortableErrorIfPossible): the abort skips EndTxn and
            # asks InitProducerId for a new producer id (KIP-360), or is fenced.
            self.epoch_bump_needed = self._id_unmapped = True
            exc = errors.InvalidProducerIdMappingError(
                f"transactional id {self.transactional_id!r} is no longer mapped to producer id "
                f"{self._seq.producer_id}: it expired (transactional.id.expiration.ms) or a newer "
                f"producer took it; abort the transaction, which gets a new producer id. {detail}"
            )
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.state = TxnState.ABORTABLE_ERROR
            self.error = exc
            self._wake()
        return exc

    def _to_fatal(self, exc: BaseException) -> None:
        self.state = TxnState.FATAL_ERROR
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        if self._wake_sender is not None:
            self._wake_sender()

    def _fatal(self) -> BaseException:
        exc = self.error
        if isinstance(exc, errors.ProducerFencedError):
            return errors.ProducerFencedError(str(exc))
        return errors.IllegalStateError(f"the producer hit a fatal error and must be closed: {exc}")

    # -- user operations -----------------------------------------------------

    async def init(self) -> None:
        if self.state is not TxnState.UNINITIALIZED:
            raise errors.IllegalStateError(
                f"init_transactions() already called (state: {self.state.value})"
            )
        deadline = time.monotonic() + self._max_block
        body = init_producer_id_request(self.transactional_id, self._timeout_ms)
        response = await self._coordinator_request(INIT_PRODUCER_ID, body, deadline)
        self._seq.reset(response.producer_id, response.producer_epoch)
        self.state = TxnState.READY
        self.v2 = transaction_v2_enabled(self._client.connections.finalized_features)
        self._log.info(
            "transactional id %r: producer id %s epoch %s (transactions v%d)",
            self.transactional_id,
            response.producer_id,
            response.producer_epoch,
            2 if self.v2 else 1,
        )

    def begin(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self._fatal()
        if self.state is not TxnState.READY:
            hint = " call init_transactions() first" if self.state is TxnState.UNINITIALIZED else ""
            raise errors.IllegalStateError(
                f"cannot begin a transaction in state {self.state.value}.{hint}"
            )
        self.state = TxnState.IN_TRANSACTION

    async def _await_partitions_added(self, deadline: float) -> None:
        if self._add_task is not None and not self._add_task.done():
            try:
                await asyncio.wait_for(
                    asyncio.shield(self._add_task), max(0.0, deadline - time.monotonic())
                )
            except asyncio.TimeoutError:
                raise errors.KafkaTimeoutError(
                    f"partitions were still being added to the transaction after "
                    f"{self._max_block * 1000:.0f} ms"
                ) from None
        if self.state is TxnState.FATAL_ERROR:  # fenced while partitions were being added
            raise self._fatal()

    async def end(self, commit: bool, *, fresh_epoch: bool = False) -> None:
        """EndTxn for the current transaction; the caller has flushed or aborted batches.

        ``fresh_epoch``: once EndTxn has answered, go on with a new epoch even
        under v1 (see :meth:`complete_prepared`).
        """
        deadline = time.monotonic() + self._max_block
        await self._await_partitions_added(deadline)
        ended_on_same_epoch = self.end_answered = False
        surely = bool(self._added or self._offsets_added)
        # An expired id has no transaction to end (Java's beginCompletingTransaction).
        if (surely or self._maybe_registered) and not (self._id_unmapped and not commit):
            pid, epoch = self._seq.producer_id, self._seq.epoch
            body = end_txn_request(self.transactional_id, pid, epoch, commit)
            next_identity = (-1, -1)  # below v5 the answer names none
            try:
                response = await self._coordinator_request(END_TXN, body, deadline)
                next_identity = (response.producer_id, response.producer_epoch)
            except errors.InvalidTxnStateError:
                if surely:
                    raise
                # no registration had reached it: nothing was open
            self.end_answered = True
            identity = end_txn_identity((pid, epoch), *next_identity)
            if identity is not None:
                # EndTxn v5 bumped the epoch (or, past the last epoch, gave
                # a new producer id): every sequence starts again at 0.
                if identity[0] != self._seq.producer_id:
                    self._log.info(
                        "transactional id %r: epoch exhausted, new producer id %s",
                        self.transactional_id,
                        identity[0],
                    )
                self._seq.reset(*identity)
                self.epoch_bump_needed = False
            else:
                ended_on_same_epoch = True
        # Java re-reads the feature at the end of each transaction; moving to
        # v2 needs a fresh epoch first (its clientSideEpochBumpRequired).
        was_v2 = self.v2
        self.v2 = transaction_v2_enabled(self._client.connections.finalized_features)
        upgraded = self.v2 and not was_v2
        if (
            (not commit and self.epoch_bump_needed)
            or upgraded
            or (fresh_epoch and ended_on_same_epoch)
        ):
            # Sequences of a failed batch were never acknowledged: continue on a
            # new epoch with every partition's sequence back at 0 (KIP-360).
            await self._bump_epoch(deadline)
        self._to_ready()

    async def _bump_epoch(self, deadline: float) -> None:
        """InitProducerId naming the current producer id and epoch: the same
        producer goes on with the next epoch (KIP-360); fatal if fenced."""
        body = bump_epoch_request(
            self.transactional_id, self._timeout_ms, self._seq.producer_id, self._seq.epoch
        )
        response = await self._coordinator_request(INIT_PRODUCER_ID, body, deadline)
        self._seq.reset(response.producer_id, response.producer_epoch)
        self.epoch_bump_needed = False

    def _to_ready(self) -> None:
        self._added.clear()
        self._pending.clear()
        self._offsets_added = False
        self._maybe_registered = False
        self._id_unmapped = False
        self.error = None
        self.preparing = False
        self.state = TxnState.READY

    def start_commit(self, *, prepare: bool = False) -> None:
        """Move to COMMITTING (for a commit, or for a ``prepare``), or raise why not."""
        if self.state is TxnState.FATAL_ERROR:
            raise self._fatal()
        if self.state is TxnState.ABORTABLE_ERROR:
            raise errors.IllegalStateError(
                f"cannot commit: the transaction failed ({self.error}); call abort_transaction()"
            )
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            raise errors.IllegalStateError(
                f"cannot commit in state {self.state.value}: no transaction was begun"
            )
        # COMMITTING again: a commit that timed out is being retried.
        self.state = TxnState.COMMITTING
        self.preparing = prepare

    def start_abort(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self._fatal()
        if self.state not in _ABORTABLE:
            raise errors.IllegalStateError(
                f"cannot abort in state {self.state.value}: no transaction was begun"
            )
        self.state = TxnState.ABORTING

    async def prepare(self) -> PreparedTransaction:
        """Leave the flushed transaction open and describe it (two-phase commit).

        The caller has flushed it (state COMMITTING, every record acknowledged).
        """
        if self.state is not TxnState.COMMITTING:
            self.start_commit(prepare=True)  # raises what keeps it from being prepared
        await self._await_partitions_added(time.monotonic() + self._max_block)
        if self.state is not TxnState.COMMITTING:  # a registration failed meanwhile
            self.start_commit(prepare=True)
        self.state = TxnState.PREPARED
        return PreparedTransaction(
            self.transactional_id,
            self._seq.producer_id,
            self._seq.epoch,
            2 if self.v2 else 1,
            empty=self._nothing_registered(),
        )

    def matches(self, prepared: PreparedTransaction) -> bool:
        """Whether ``prepared`` is this manager's own prepared transaction.

        An empty one (nothing to end on the broker, so no new epoch after it)
        shares its identity with the next transaction under v1: it matches only
        an empty prepared transaction, where completing either is the same."""
        return (
            self.state is TxnState.PREPARED
            and prepared.transactional_id == self.transactional_id
            and (prepared.producer_id, prepared.producer_epoch) == self.producer_identity
            and prepared.empty == self._nothing_registered()
        )

    def completed_outcome(self, prepared: PreparedTransaction) -> bool | None:
        """True (committed) or False (aborted) if ``prepared`` is one of this
        producer's own two-phase transactions it completed; None otherwise."""
        return self._completed.of(prepared)

    async def complete_prepared(self, commit: bool) -> None:
        """Commit or abort this producer's own prepared transaction (state PREPARED).

        Under v1 every later transaction of this producer would share the
        prepared one's producer id and epoch: a replayed completion of it (a
        retried commit message) would end whichever transaction is open then.
        So after EndTxn the producer goes on with a new epoch (an InitProducerId
        bump, KIP-360), as EndTxn v5 does by itself under v2 (KIP-890), and a
        replay meets a fenced epoch. A transaction that is gone (ended the other
        way, or aborted by a newer producer or the coordinator's timeout)
        raises TransactionNotCompletedError; the producer then goes on with a
        new epoch, or is fenced (FATAL_ERROR) if a newer producer took its id.
        """
        identity = self.producer_identity
        empty = self._nothing_registered()
        try:
            await self.end(commit, fresh_epoch=True)
        except (errors.ProducerFencedError, errors.InvalidTxnStateError, _UNMAPPED) as exc:
            if self.end_answered:
                # Completed as asked; only the new epoch was refused (a newer
                # producer took the id meanwhile): this producer is fenced now.
                self._log.warning("completed the prepared transaction, then: %s", exc)
                if not empty:
                    self._completed.remember(identity, commit)
                return
            ended_otherwise = isinstance(exc, errors.InvalidTxnStateError)
            if ended_otherwise:
                self._completed.remember(identity, not commit)
            try:
                await self._bump_epoch(time.monotonic() + self._max_block)
            except errors.KafkaError as bump_exc:
                after = f"; this producer cannot go on ({bump_exc}): close it"
            else:
                self._to_ready()
                after = "; this producer goes on with a new epoch"
            raise not_completed_error(
                self.transactional_id,
                identity,
                commit,
                ended_otherwise,
                isinstance(exc, _UNMAPPED),
                after,
            ) from exc
        if not empty:  # an empty one ends nothing: completing it again is harmless
            self._completed.remember(identity, commit)

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
        """Add consumer offsets to the transaction (consume-transform-produce)."""
        self.check_can_send()
        deadline = time.monotonic() + self._max_block
        txn_id, pid, epoch = self.transactional_id, self._seq.producer_id, self._seq.epoch
        self._maybe_registered = True
        if not self.v2:
            # Under v2 TxnOffsetCommit v5 adds the offsets partition (KIP-890).
            body = add_offsets_request(txn_id, pid, epoch, group_id)
            await self._coordinator_request(ADD_OFFSETS_TO_TXN, body, deadline)
        self._offsets_added = True
        topics = offset_commit_topics(offsets)
        while topics:
            response = await self._request_to_coordinator_of(
                TXN_OFFSET_COMMIT,
                offset_commit_request(txn_id, group_id, pid, epoch, topics),
                group_id,
                COORDINATOR_KEY_GROUP,
                deadline,
            )
            topics, failure = offsets_to_retry(response, topics, group_id)
            if failure is not None:
                raise self.batch_failed(failure)  # an expired id's error explains itself
            if topics:
                await self._link.sleep_before(deadline)

    # -- background: AddPartitionsToTxn -------------------------------------

    async def _add_partitions(self) -> None:
        deadline = time.monotonic() + self._max_block
        try:
            while self._pending and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                body = add_partitions_request(
                    self.transactional_id, self._seq.producer_id, self._seq.epoch, self._pending
                )
                self._maybe_registered = True
                response = await self._coordinator_request(ADD_PARTITIONS_TO_TXN, body, deadline)
                added, retry, refused = partitions_added(response)
                self._pending.difference_update(added)
                self._added.update(added)
                if refused is not None:
                    raise refused
                if retry:
                    await self._link.sleep_before(deadline)
        except Exception as exc:  # noqa: BLE001 - recorded on the transaction
            self._log.warning("adding partitions to the transaction failed: %s", exc)
            self.batch_failed(exc)
        finally:
            self._wake()

    # -- coordinator plumbing -------------------------------------------------

    async def _coordinator_request(
        self, api: Api[Req, Resp], body: Req | Callable[[int], Req], deadline: float
    ) -> Resp:
        return await self._request_to_coordinator_of(
            api, body, self.transactional_id, COORDINATOR_KEY_TRANSACTION, deadline
        )

    async def _request_to_coordinator_of(
        self,
        api: Api[Req, Resp],
        body: Req | Callable[[int], Req],
        key: str,
        key_type: int,
        deadline: float,
    ) -> Resp:
        """A coordinator round trip (:class:`CoordinatorLink`) whose fencing or
        TRANSACTION_ABORTABLE answer becomes this transaction's state."""
        try:
            return await self._link.request(api, body, key, key_type, deadline, v2=self.v2)
        except errors.ProducerFencedError as exc:
            self._to_fatal(exc)
            raise self._fatal() from None
        except errors.TransactionAbortableError as exc:
            # KIP-890 part 1: the user aborts this transaction and goes on.
            self.batch_failed(exc)
            raise
        except _UNMAPPED as exc:
            raise self.batch_failed(exc) from None
