"""What goes into a Produce request, and what its answer says about each batch.

The sender drains batches and hands them here: :func:`build_payloads` turns
each into its record batch bytes (KIP-98, stamped with the producer state it
was given), :func:`produce_body` groups them by topic into the request body,
and :func:`partition_outcomes` reads the response back into one outcome per
batch; :func:`leader_hints` reads the new leaders a refusal names (KIP-951). Applying the outcomes (completing futures, retrying, failing) stays in
the sender, the one place where they take effect.

Invariants: a batch's bytes are built once and kept across retries (a retry
resends the same records; only a new producer state restamps them); a batch
the response does not mention gets an error, never silence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import NamedTuple

from .. import errors
from ..net.cluster import BrokerInfo
from ..protocol.compression import Codec
from ..protocol.generated import ProduceRequest, ProduceResponse
from ..protocol.generated.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    TopicProduceData,
)
from .batch import ProducerBatch
from .retry import Written, written_after

__all__ = [
    "OFFLOAD_COMPRESSION_BYTES",
    "BatchOutcome",
    "build_payloads",
    "build_small_payloads",
    "leader_hints",
    "partition_outcomes",
    "produce_body",
]

# Compressing a batch at least this large runs in a worker thread: the codecs
# release the GIL, and the event loop keeps serving other tasks meanwhile.
OFFLOAD_COMPRESSION_BYTES = 64 * 1024


def build_small_payloads(batches: list[ProducerBatch]) -> list[ProducerBatch] | None:
    """Build, here, every batch that has no bytes yet, but those to compress
    off the loop: returned (None when there are none) for :func:`build_payloads`.
    The sender calls this first, so a request with no such batch costs no coroutine."""
    offload = None
    for batch in batches:
        if batch.payload is not None:
            continue
        if (
            batch.builder.codec != Codec.NONE
            and batch.builder.size_in_bytes >= OFFLOAD_COMPRESSION_BYTES
        ):
            if offload is None:
                offload = []
            offload.append(batch)
        else:
            batch.build()
    return offload


async def build_payloads(batches: list[ProducerBatch]) -> None:
    """Build the bytes of every batch that has none yet, with its producer state;
    large compressed batches in a worker thread (the codecs release the GIL)."""
    offload = build_small_payloads(batches)
    if offload:
        loop = asyncio.get_running_loop()
        for batch in offload:
            await loop.run_in_executor(None, batch.build)


def produce_body(
    batches: list[ProducerBatch], *, transactional_id: str | None, acks: int, timeout_ms: int
) -> ProduceRequest:
    """The Produce request carrying ``batches`` (built), grouped by topic."""
    topic_data: dict[str, list[PartitionProduceData]] = {}
    for batch in batches:
        parts = topic_data.get(batch.topic)
        if parts is None:
            parts = topic_data[batch.topic] = []
        parts.append(PartitionProduceData(index=batch.partition, records=batch.payload))
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(name=topic, partition_data=parts)
            for topic, parts in topic_data.items()
        ],
    )


class BatchOutcome(NamedTuple):
    """What a Produce response says about one batch of the request."""

    batch: ProducerBatch
    error: errors.KafkaError | None
    # Whether the leader may hold the batch after this answer; None when it
    # says nothing new (no error, or no mention of the partition).
    written: Written | None
    base_offset: int
    log_append_time_ms: int


def partition_outcomes(
    batches: list[ProducerBatch], response: ProduceResponse
) -> Iterator[BatchOutcome]:
    """One outcome per batch, in request order, from a decoded Produce response."""
    results: dict[tuple[str, int], PartitionProduceResponse] = {}
    for topic in response.responses:
        name = topic.name
        for answer in topic.partition_responses:
            results[(name, answer.index)] = answer
    for batch in batches:
        part = results.get((batch.topic, batch.partition))
        if part is None:
            missing = errors.CorruptResponseError(
                f"produce response does not mention {batch.topic}-{batch.partition}"
            )
            yield BatchOutcome(batch, missing, None, -1, -1)
            continue
        code = part.error_code
        if not code:
            yield BatchOutcome(batch, None, None, part.base_offset, part.log_append_time_ms)
            continue
        detail = part.error_message or ""
        record_errors = part.record_errors
        if record_errors:
            detail += " " + "; ".join(
                f"record {e.batch_index}: {e.batch_index_error_message}" for e in record_errors
            )
        error = errors.error_for_code(code)(
            f"{batch.topic}-{batch.partition}: {detail.strip()}".rstrip(": ")
        )
        yield BatchOutcome(
            batch, error, written_after(code), part.base_offset, part.log_append_time_ms
        )


# Refusals that mean "not the leader (any more)": with Produce v10+, the broker
# names the partition's current leader in them (KIP-951).
_LEADER_MOVED_CODES = frozenset(
    {errors.NotLeaderOrFollowerError.code, errors.FencedLeaderEpochError.code}
)


def leader_hints(
    response: ProduceResponse,
) -> tuple[dict[tuple[str, int], tuple[int, int]], list[BrokerInfo]]:
    """The ``(leader, leader_epoch)`` a Produce v10+ response names per refused
    partition, and the addresses of those leaders; empty for older versions."""
    leaders: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code not in _LEADER_MOVED_CODES:
                continue  # a hint comes only with these refusals: most answers stop here
            hint = part.current_leader  # -1/-1 when absent (below v10, or not told)
            if hint.leader_id >= 0 and hint.leader_epoch >= 0:
                leaders[(topic.name, part.index)] = (hint.leader_id, hint.leader_epoch)
    brokers = (
        [BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in response.node_endpoints]
        if leaders
        else []
    )
    return leaders, brokers
