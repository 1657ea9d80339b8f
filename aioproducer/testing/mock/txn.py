"""Producer ids and transaction state of the mock cluster (KIP-98).

One :class:`TransactionCoordinator` serves the whole cluster (FindCoordinator
points clients at some broker, but the state is shared, as if that broker
owned every transaction). Transitions complete synchronously: EndTxn writes
its markers before answering, so the PrepareCommit/PrepareAbort states and the
CONCURRENT_TRANSACTIONS answers they cause in Kafka never appear.

Fencing follows Kafka's TransactionCoordinator: a request carrying an older
epoch than the transactional id's current one is PRODUCER_FENCED, mapped to
INVALID_PRODUCER_EPOCH for request versions older than the one that
introduced PRODUCER_FENCED (KIP-588). Transaction timeouts are not enforced.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable

from ... import errors
from .log import code_of

__all__ = ["Transaction", "TransactionCoordinator", "TxnStatus"]

NONE = 0
PRODUCER_FENCED = code_of(errors.ProducerFencedError)
INVALID_EPOCH = code_of(errors.InvalidProducerEpochError)
INVALID_MAPPING = code_of(errors.InvalidProducerIdMappingError)
INVALID_TXN_STATE = code_of(errors.InvalidTxnStateError)
INVALID_TIMEOUT = code_of(errors.InvalidTransactionTimeoutError)

# Kafka's transaction.max.timeout.ms default (15 minutes).
MAX_TRANSACTION_TIMEOUT_MS = 900_000
_MAX_EPOCH = 32767
# First request version that may carry PRODUCER_FENCED (KIP-588), per API key.
_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 2}

# EndTxn calls this with (producer id, partitions, commit) to write markers.
MarkerWriter = Callable[[int, Iterable[tuple[str, int]], bool], None]


class TxnStatus(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclasses.dataclass
class Transaction:
    """The coordinator's record of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnStatus = TxnStatus.EMPTY
    # The producer id and epoch before the last bump: an InitProducerId that
    # names them retries a bump whose answer was lost (KIP-360).
    last_producer_id: int = -1
    last_epoch: int = -1
    partitions: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    groups: set[str] = dataclasses.field(default_factory=set)
    # (group, topic, partition) -> offset, committed with the transaction.
    pending_offsets: dict[tuple[str, str, int], int] = dataclasses.field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"Transaction({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, {self.status.value}, partitions={len(self.partitions)})"
        )


def fenced_code(api_key: int, version: int) -> int:
    """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions that predate it."""
    return PRODUCER_FENCED if version >= _FENCED_SINCE.get(api_key, 0) else INVALID_EPOCH


class TransactionCoordinator:
    """Issues producer ids and keeps every transactional id's state."""

    def __init__(self, write_markers: MarkerWriter, first_producer_id: int = 1000) -> None:
        self._write_markers = write_markers
        self._next_pid = first_producer_id
        #: Current epoch of every producer id this cluster issued.
        self.epochs: dict[int, int] = {}
        self.by_id: dict[str, Transaction] = {}
        self._by_pid: dict[int, Transaction] = {}
        #: Offsets committed through transactions: group -> {(topic, partition): offset}.
        self.committed_offsets: dict[str, dict[tuple[str, int], int]] = {}

    def __repr__(self) -> str:
        return (
            f"TransactionCoordinator(producer_ids={len(self.epochs)}, "
            f"transactions={len(self.by_id)})"
        )

    def _new_pid(self) -> int:
        pid = self._next_pid
        self._next_pid += 1
        self.epochs[pid] = 0
        return pid

    def transaction_of(self, producer_id: int) -> Transaction | None:
        return self._by_pid.get(producer_id)

    # -- InitProducerId ----------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        version: int,
    ) -> tuple[int, int, int]:
        """Answer InitProducerId: (error code, producer id, epoch)."""
        if transactional_id is None:
            # Kafka's coordinator ignores the id/epoch an idempotent producer
            # sends (v3+, KIP-360) and always hands out a fresh producer id.
            pid = self._new_pid()
            return NONE, pid, 0
        if timeout_ms <= 0 or timeout_ms > MAX_TRANSACTION_TIMEOUT_MS:
            return INVALID_TIMEOUT, -1, -1
        txn = self.by_id.get(transactional_id)
        if txn is None:
            pid = self._new_pid()
            txn = Transaction(transactional_id, pid, 0, timeout_ms)
            self.by_id[transactional_id] = txn
            self._by_pid[pid] = txn
            return NONE, pid, 0
        if producer_id >= 0 and (
            producer_id != txn.producer_id or producer_epoch != txn.producer_epoch
        ):
            if (producer_id, producer_epoch) == (txn.last_producer_id, txn.last_epoch):
                # The bump this request asks for was made and its answer lost:
                # answer the current id and epoch again, without a new bump
                # (Kafka's TransactionMetadata.prepareIncrementProducerEpoch).
                return NONE, txn.producer_id, txn.producer_epoch
            return fenced_code(22, version), -1, -1
        # A new session for the id: abort what the previous one left open and
        # bump the epoch, which fences that previous producer.
        if txn.status is TxnStatus.ONGOING:
            self._complete(txn, commit=False)
        error, pid, epoch = self._bump(txn.producer_id)
        if pid != txn.producer_id:
            del self._by_pid[txn.producer_id]
            self._by_pid[pid] = txn
        if producer_id >= 0:
            txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.producer_epoch
        else:  # a new session, not a bump: there is no retry to recognise
            txn.last_producer_id, txn.last_epoch = -1, -1
        txn.producer_id, txn.producer_epoch, txn.timeout_ms = pid, epoch, timeout_ms
        txn.status = TxnStatus.EMPTY
        return error, pid, epoch

    def _bump(self, producer_id: int) -> tuple[int, int, int]:
        epoch = self.epochs[producer_id] + 1
        if epoch >= _MAX_EPOCH:
            # Epoch exhausted: Kafka hands out a fresh producer id instead.
            return NONE, self._new_pid(), 0
        self.epochs[producer_id] = epoch
        return NONE, producer_id, epoch

    # -- checks shared by the transactional APIs ---------------------------

    def check(
        self, api_key: int, version: int, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[int, Transaction | None]:
        """Validate a transactional request's id, producer id and epoch."""
        txn = self.by_id.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return INVALID_MAPPING, None
        if epoch != txn.producer_epoch:
            return fenced_code(api_key, version), None
        return NONE, txn

    def add_partitions(self, txn: Transaction, partitions: Iterable[tuple[str, int]]) -> None:
        txn.partitions.update(partitions)
        txn.status = TxnStatus.ONGOING

    def add_offsets(self, txn: Transaction, group_id: str) -> None:
        txn.groups.add(group_id)
        txn.status = TxnStatus.ONGOING

    def txn_offset_commit(
        self, txn: Transaction, group_id: str, offsets: dict[tuple[str, int], int]
    ) -> int:
        """Stage offsets; Kafka requires AddOffsetsToTxn for the group first."""
        if group_id not in txn.groups:
            return INVALID_TXN_STATE
        for (topic, partition), offset in offsets.items():
            txn.pending_offsets[(group_id, topic, partition)] = offset
        return NONE

    def end_txn(self, txn: Transaction, commit: bool) -> int:
        """Commit or abort ``txn``; a retried EndTxn of a finished one succeeds again."""
        if txn.status is TxnStatus.ONGOING:
            self._complete(txn, commit)
            return NONE
        if txn.status is TxnStatus.COMPLETE_COMMIT and commit:
            return NONE
        if txn.status is TxnStatus.COMPLETE_ABORT and not commit:
            return NONE
        return INVALID_TXN_STATE

    def end_txn_v2(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> tuple[int, int, int]:
        """EndTxn v5 (KIP-890 part 2): (error code, producer id, epoch to use next).

        Every commit or abort bumps the epoch (a new producer id once it is
        exhausted). A retry carrying the epoch before that bump, of the same
        outcome, gets the current id and epoch again.
        """
        txn = self.by_id.get(transactional_id)
        if txn is None:
            return INVALID_MAPPING, -1, -1
        if (producer_id, epoch) == (txn.last_producer_id, txn.last_epoch):
            done = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
            if txn.status is done:
                return NONE, txn.producer_id, txn.producer_epoch
            return INVALID_TXN_STATE, -1, -1
        code, current = self.check(26, 5, transactional_id, producer_id, epoch)
        if current is None:
            return code, -1, -1
        if not commit and txn.status is not TxnStatus.ONGOING:
            # Kafka 4's coordinator under v2 aborts a transaction with nothing
            # open too (an empty abort, no markers) and bumps the epoch: a client
            # may have added a partition it never sent to.
            self._complete(txn, commit=False)
            code = NONE
        else:
            code = self.end_txn(txn, commit)
        if code != NONE:
            return code, -1, -1
        _, pid, new_epoch = self._bump(txn.producer_id)
        if pid != txn.producer_id:
            del self._by_pid[txn.producer_id]
            self._by_pid[pid] = txn
        txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.producer_epoch
        txn.producer_id, txn.producer_epoch = pid, new_epoch
        return NONE, pid, new_epoch

    def _complete(self, txn: Transaction, commit: bool) -> None:
        self._write_markers(txn.producer_id, sorted(txn.partitions), commit)
        if commit:
            for (group, topic, partition), offset in txn.pending_offsets.items():
                self.committed_offsets.setdefault(group, {})[(topic, partition)] = offset
        txn.partitions.clear()
        txn.groups.clear()
        txn.pending_offsets.clear()
        txn.status = TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT
