"""Produce encode and decode: generated message classes vs the hand-written fast codec.

The generated ``ProduceRequest``/``ProduceResponse`` (aioproducer/protocol/generated,
straight-line code per version) against ``protocol/produce_codec.py`` (the hand
twin of the Produce schema) on the same request body and response frame, the
request both copied into one buffer and as buffers holding the record sets by
reference (``encode_chunks``, what the connection writes): a few
topics and partitions, 16 KiB record sets (``--record-size``), an answer without errors (the usual
one). Prints microseconds per call and the ratio generated / hand (below 1:
the generated code is faster).

    python benchmarks/generated_messages.py [--topics 2] [--partitions 4]
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable

from aioproducer.protocol import produce_codec
from aioproducer.protocol.generated import ProduceRequest, ProduceResponse
from aioproducer.protocol.generated import produce as pr


def _per_call(fn: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Microseconds per call, the best of ``repeat`` runs."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def _request(
    topics: int, partitions: int, size: int
) -> tuple[dict[str, object], ProduceRequest]:
    records = bytes(size)
    body = {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [
            {"name": f"topic-{t}", "partition_data": [
                {"index": p, "records": records} for p in range(partitions)
            ]}
            for t in range(topics)
        ],
    }
    message = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[
            pr.TopicProduceData(
                name=f"topic-{t}",
                partition_data=[pr.PartitionProduceData(index=p, records=records) for p in range(partitions)],
            )
            for t in range(topics)
        ],
    )
    return body, message


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
    body, message = _request(args.topics, args.partitions, args.record_size)
    print(f"{args.topics} topics x {args.partitions} partitions, {args.record_size} B record sets")
    print(f"{'':24}{'hand us':>10}{'generated us':>14}{'ratio':>8}")
    for version in (7, 9, 11):
        frame = _response(args.topics, args.partitions, version)
        assert produce_codec.decode_produce_body(frame, 0, version) is not None

        def hand_encode(version: int = version) -> None:
            out = bytearray()
            produce_codec.encode_produce_body(body, out, version)

        def gen_encode(version: int = version) -> None:
            message.encode_into(bytearray(), version)

        def hand_chunks(version: int = version) -> None:
            produce_codec.produce_body_chunks(body, bytearray(), version)

        def gen_chunks(version: int = version) -> None:
            message.encode_chunks(bytearray(), version)

        def hand_decode(version: int = version, frame: bytes = frame) -> None:
            produce_codec.decode_produce_body(frame, 0, version)

        def gen_decode(version: int = version, frame: bytes = frame) -> None:
            ProduceResponse.decode(frame, version)

        hand_out, gen_out = bytearray(), bytearray()
        produce_codec.encode_produce_body(body, hand_out, version)
        message.encode_into(gen_out, version)
        assert hand_out == gen_out, "the two encoders disagree"
        for what, hand, gen in (
            ("encode request", hand_encode, gen_encode),
            ("encode by reference", hand_chunks, gen_chunks),
            ("decode response", hand_decode, gen_decode),
        ):
            h = _per_call(hand, args.number)
            g = _per_call(gen, args.number)
            print(f"v{version:<3}{what:<21}{h:>10.2f}{g:>14.2f}{g / h:>8.2f}")


if __name__ == "__main__":
    main()
