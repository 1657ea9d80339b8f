"""Transactions v1 or v2 (KIP-890): the pure decisions that depend on it.

A cluster whose finalized ``transaction.version`` feature (KIP-584, read from
ApiVersions v3+) is 2 or more runs transactions v2:

* Produce v12: the partition leader adds the partition to the transaction
  itself, so the client sends no AddPartitionsToTxn for produce partitions;
* TxnOffsetCommit v5: the group coordinator adds the offsets partition, so no
  AddOffsetsToTxn either;
* EndTxn v5: the coordinator bumps the epoch at every commit or abort and
  answers with the producer id and epoch to use next (a new producer id at
  epoch 0 when the epoch would overflow). The client adopts them and starts
  every partition's sequence again at 0.

Under transactions v1 a transactional producer stays below those versions:
Produce v11 at most (v11 only announces that the client understands
TRANSACTION_ABORTABLE, KIP-890 part 1), EndTxn and TxnOffsetCommit v4 at most.
A producer that is not transactional may use any Produce version: v12 changes
nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import errors

__all__ = [
    "FEATURE",
    "choose_version",
    "end_txn_identity",
    "transaction_v2_enabled",
]

FEATURE = "transaction.version"

# The highest version of each API that keeps v1 semantics (Java's
# LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 and the EndTxn/TxnOffsetCommit
# builders' caps), and the lowest version that v2 needs.
_LAST_V1 = {0: 11, 26: 4, 28: 4}  # Produce, EndTxn, TxnOffsetCommit
_FIRST_V2 = {0: 12, 26: 5, 28: 5}


def transaction_v2_enabled(finalized_features: Mapping[str, int]) -> bool:
    """Whether the cluster runs transactions v2 (absent feature: v1, e.g. Kafka 3.x)."""
    return finalized_features.get(FEATURE, 0) >= 2


def choose_version(api_key: int, negotiated: int, *, v2: bool) -> int:
    """The version to send of ``api_key`` given the broker's ``negotiated`` one.

    Under v2, the broker must speak the first v2 version: anything older would
    silently lose the implicit partition registration or the epoch bump.
    """
    if api_key not in _LAST_V1:
        return negotiated
    if not v2:
        return min(negotiated, _LAST_V1[api_key])
    if negotiated < _FIRST_V2[api_key]:
        raise errors.UnsupportedVersionError(
            f"the cluster finalized {FEATURE} 2 but the broker speaks only v{negotiated} "
            f"of API {api_key} (v{_FIRST_V2[api_key]} needed)"
        )
    return negotiated


def end_txn_identity(
    current: tuple[int, int], response_id: int, response_epoch: int
) -> tuple[int, int] | None:
    """The producer id and epoch to adopt after an EndTxn, or None to keep ``current``.

    EndTxn v5 answers with them (the epoch one higher, or a new producer id
    at epoch 0 after an overflow); older versions answer -1 (the defaults).
    """
    if response_id < 0 or response_epoch < 0:
        return None
    if (response_id, response_epoch) == current:
        return None
    return response_id, response_epoch
