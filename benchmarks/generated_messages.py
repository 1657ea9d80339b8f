"""Produce encode and decode with the generated message classes.

The generated ``ProduceRequest``/``ProduceResponse`` (aioproducer/protocol/generated,
straight-line code per version) on one request body and one response frame: the
request copied into one buffer and as buffers holding the record sets by
reference (``encode_chunks``, what the connection writes), the answer decoded.
A few topics and partitions, 16 KiB record sets (``--record-size``), an answer
without errors (the usual one). Prints microseconds per call, and per partition,
for each Produce version the client sends most.

    python benchmarks/generated_messages.py [--topics 2] [--partitions 4]
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable

from aioproducer.protocol.generated import ProduceRequest, ProduceResponse
from aioproducer.protocol.generated import produce as pr


def _per_call(fn: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Microseconds per call, the best of ``repeat`` runs."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def _request(topics: int, partitions: int, size: int) -> ProduceRequest:
    records = bytes(size)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            pr.TopicProduceData(
                name=f"topic-{t}",
                partition_data=[
                    pr.PartitionProduceData(index=p, records=records) for p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
    )


def _response(topics: int, partitions: int, version: int) -> bytes:
    return ProduceResponse(
        responses=[
            pr.TopicProduceResponse(
                name=f"topic-{t}",
                partition_responses=[
                    pr.PartitionProduceResponse(index=p, base_offset=1000 * p, log_start_offset=0)
                    for p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
    ).encode(version)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--topics", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-size", type=int, default=16384, help="bytes per record set")
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    message = _request(args.topics, args.partitions, args.record_size)
    count = args.topics * args.partitions
    print(f"{args.topics} topics x {args.partitions} partitions, {args.record_size} B record sets")
    print(f"{'':24}{'us/call':>10}{'us/partition':>14}")
    for version in (7, 9, 11):
        frame = _response(args.topics, args.partitions, version)
        decoded = ProduceResponse.decode(frame, version)
        assert len(decoded.responses) == args.topics, "the response does not round-trip"

        def encode(version: int = version) -> None:
            message.encode_into(bytearray(), version)

        def chunks(version: int = version) -> None:
            message.encode_chunks(bytearray(), version)

        def decode(version: int = version, frame: bytes = frame) -> None:
            ProduceResponse.decode(frame, version)

        for what, fn in (
            ("encode request", encode),
            ("encode by reference", chunks),
            ("decode response", decode),
        ):
            us = _per_call(fn, args.number)
            print(f"v{version:<3}{what:<21}{us:>10.2f}{us / count:>14.3f}")


if __name__ == "__main__":
    main()
