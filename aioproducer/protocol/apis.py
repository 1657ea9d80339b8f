"""Every API this client speaks, as Kafka's generated request/response classes.

An :class:`Api` pairs the generated request and response classes of one API key
(``protocol/generated``, from Kafka 4.4's JSON specs) with the version range the
client sends. That range lies within the classes' ``MIN_VERSION``-``MAX_VERSION``
(what Kafka 4.4 defines); where it stops below, the comment says which semantics
of the newer versions the client does not implement. Versions are negotiated per
broker from its ApiVersions answer (:func:`negotiate_version`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .generated import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "APIS_BY_KEY",
    "API_VERSIONS",
    "COORDINATOR_KEY_GROUP",
    "COORDINATOR_KEY_TRANSACTION",
    "END_TXN",
    "FIND_COORDINATOR",
    "INIT_PRODUCER_ID",
    "METADATA",
    "PRODUCE",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "TXN_OFFSET_COMMIT",
    "Api",
    "negotiate_version",
]

Req = TypeVar("Req")
Resp = TypeVar("Resp")

# FindCoordinator key types (Java's ``FindCoordinatorRequest.CoordinatorType``).
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1


@dataclass(frozen=True)
class Api(Generic[Req, Resp]):
    """One API key: its generated classes and the versions this client sends."""

    name: str
    request: type[Req]
    response: type[Resp]
    min_version: int
    max_version: int

    def __post_init__(self) -> None:
        cls: Any = self.request
        if not cls.MIN_VERSION <= self.min_version <= self.max_version <= cls.MAX_VERSION:
            raise ValueError(
                f"{self.name}: v{self.min_version}-{self.max_version} outside the spec"
            )

    @property
    def key(self) -> int:
        return int(self.request.API_KEY)  # type: ignore[attr-defined]  # generated ClassVar

    @property
    def flexible_from(self) -> int:
        return int(self.request.FLEXIBLE_FROM)  # type: ignore[attr-defined]  # generated ClassVar

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses always use header v0, even in flexible versions,
        # so that a client can read one before knowing what the broker speaks.
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, v{self.min_version}-{self.max_version})"


# v4 lets a supported feature's min version be 0 (KAFKA-17011; the client reads
# only the finalized levels, never a supported range); v5 checks the cluster and
# node ids and may answer REBOOTSTRAP_REQUIRED (KIP-1242), which the client does not do.
API_VERSIONS: Api[ApiVersionsRequest, ApiVersionsResponse] = Api(
    "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, 0, 4
)
# v13 adds a top-level error code: REBOOTSTRAP_REQUIRED rebootstraps, any other
# fails the refresh (KIP-1102, ``net/client``). 13 is Kafka 4.4's newest.
METADATA: Api[MetadataRequest, MetadataResponse] = Api(
    "Metadata", MetadataRequest, MetadataResponse, 1, 13
)
# v3 is the first carrying record batch v2 (magic 2, KIP-98); v13 names topics by
# id (KIP-516), which the client does not track. v12 only under transactions v2
# (``engine/transaction_version.choose_version``).
PRODUCE: Api[ProduceRequest, ProduceResponse] = Api(
    "Produce", ProduceRequest, ProduceResponse, 3, 12
)
# v0 knows group coordinators only; v5 declares that the client handles
# TRANSACTION_ABORTABLE (KIP-890: the transaction becomes abortable, as in Java's
# FindCoordinatorHandler); v6 adds share groups (KIP-932), which a producer never asks for.
FIND_COORDINATOR: Api[FindCoordinatorRequest, FindCoordinatorResponse] = Api(
    "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, 1, 5
)
# v5 declares that the client handles TRANSACTION_ABORTABLE (KIP-890: an open
# transaction becomes abortable, an init_transactions() may be called again); v6
# adds keeping a prepared transaction across a restart (KIP-939, unstable in 4.4),
# which the client does not do.
INIT_PRODUCER_ID: Api[InitProducerIdRequest, InitProducerIdResponse] = Api(
    "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, 0, 5
)
# v4+ is broker to broker (KIP-890; Java's ``AddPartitionsToTxnRequest.Builder.forClient``).
ADD_PARTITIONS_TO_TXN: Api[AddPartitionsToTxnRequest, AddPartitionsToTxnResponse] = Api(
    "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 3
)
ADD_OFFSETS_TO_TXN: Api[AddOffsetsToTxnRequest, AddOffsetsToTxnResponse] = Api(
    "AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4
)
END_TXN: Api[EndTxnRequest, EndTxnResponse] = Api("EndTxn", EndTxnRequest, EndTxnResponse, 0, 5)
# v6 names topics by id only (KIP-1319), which the client does not track.
TXN_OFFSET_COMMIT: Api[TxnOffsetCommitRequest, TxnOffsetCommitResponse] = Api(
    "TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5
)
SASL_HANDSHAKE: Api[SaslHandshakeRequest, SaslHandshakeResponse] = Api(
    "SaslHandshake", SaslHandshakeRequest, SaslHandshakeResponse, 0, 1
)
SASL_AUTHENTICATE: Api[SaslAuthenticateRequest, SaslAuthenticateResponse] = Api(
    "SaslAuthenticate", SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2
)

APIS_BY_KEY: dict[int, Api[Any, Any]] = {
    api.key: api
    for api in (
        API_VERSIONS,
        METADATA,
        PRODUCE,
        FIND_COORDINATOR,
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        SASL_HANDSHAKE,
        SASL_AUTHENTICATE,
    )
}


def negotiate_version(api: Api[Any, Any], broker_min: int, broker_max: int) -> int | None:
    """The highest version both sides implement, or None when the ranges miss."""
    high = min(api.max_version, broker_max)
    if high < max(api.min_version, broker_min):
        return None
    return high
