"""Produce request bodies and responses read back per batch: bytes in, outcomes out."""

from __future__ import annotations

import asyncio

from aioproducer import errors
from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.produce_request import (
    OFFLOAD_COMPRESSION_BYTES,
    build_payloads,
    build_small_payloads,
    partition_outcomes,
    produce_body,
)
from aioproducer.engine.retry import Written
from aioproducer.protocol.apis import PRODUCE
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.framing import decode_response, encode_response
from aioproducer.protocol.generated import ProduceResponse
from aioproducer.protocol.generated.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from aioproducer.protocol.record_parsing import parse_record_batches

VERSION = 8  # the first version with record_errors and error_message


def _batch(topic: str, partition: int, *values: bytes) -> ProducerBatch:
    batch = ProducerBatch(
        topic, partition, codec=Codec.NONE, batch_size=16384, now=0.0, delivery_timeout=120.0
    )
    for value in values:
        assert batch.try_append(1000, None, value, None, len(value) + 1) is not None
    return batch


def _response(partitions: dict[str, list[PartitionProduceResponse]]) -> ProduceResponse:
    """A Produce response as a broker would send it, decoded by the client's codec."""
    body = ProduceResponse(
        responses=[
            TopicProduceResponse(name=topic, partition_responses=parts)
            for topic, parts in partitions.items()
        ],
    )
    frame = encode_response(PRODUCE, VERSION, 7, body)
    return decode_response(PRODUCE, VERSION, frame[4:])


def _part(
    index: int, error_code: int = 0, base_offset: int = -1, **extra: object
) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=error_code,
        base_offset=base_offset,
        log_start_offset=0,
        **extra,  # type: ignore[arg-type]
    )


def test_body_groups_built_batches_by_topic() -> None:
    batches = [_batch("a", 0, b"x"), _batch("b", 1, b"y"), _batch("a", 2, b"z")]
    asyncio.run(build_payloads(batches))
    body = produce_body(batches, transactional_id=None, acks=-1, timeout_ms=30000)
    assert [t.name for t in body.topic_data] == ["a", "b"]
    assert [p.index for p in body.topic_data[0].partition_data] == [0, 2]
    records = body.topic_data[1].partition_data[0].records
    assert records is not None
    (parsed,) = parse_record_batches(records)
    assert [r.value for r in parsed.records] == [b"y"]


def test_payload_is_built_once_and_kept_for_retries() -> None:
    batch = _batch("a", 0, b"x")
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 5, 1, 10
    asyncio.run(build_payloads([batch]))
    first = batch.payload
    batch.base_sequence = 99
    asyncio.run(build_payloads([batch]))
    assert batch.payload is first
    (parsed,) = parse_record_batches(first)
    assert (parsed.producer_id, parsed.base_sequence) == (5, 10)


def test_large_compressed_batches_are_left_to_build_off_the_loop() -> None:
    small = _batch("a", 0, b"x")
    large = ProducerBatch(
        "a",
        1,
        codec=Codec.GZIP,
        batch_size=4 * OFFLOAD_COMPRESSION_BYTES,
        now=0.0,
        delivery_timeout=120.0,
    )
    value = bytes(range(256)) * 64
    while large.builder.size_in_bytes < OFFLOAD_COMPRESSION_BYTES:
        assert large.try_append(1000, None, value, None, len(value) + 1) is not None
    assert build_small_payloads([small, large]) == [large]
    assert small.payload is not None and large.payload is None
    assert build_small_payloads([small]) is None  # built already: nothing left
    asyncio.run(build_payloads([small, large]))
    (parsed,) = parse_record_batches(large.payload)
    assert [r.value for r in parsed.records] == [value] * large.record_count


def test_outcomes_in_request_order_with_errors_and_what_was_written() -> None:
    ok, refused, duplicate_seq, missing = (
        _batch("t", 0, b"a"),
        _batch("t", 1, b"b"),
        _batch("t", 2, b"c"),
        _batch("u", 0, b"d"),
    )
    response = _response(
        {
            "t": [
                _part(2, error_code=45),  # OUT_OF_ORDER_SEQUENCE_NUMBER
                _part(0, base_offset=41),
                _part(
                    1,
                    error_code=87,
                    record_errors=[  # INVALID_RECORD
                        BatchIndexAndErrorMessage(
                            batch_index=0, batch_index_error_message="bad timestamp"
                        )
                    ],
                    error_message="one record refused",
                ),
            ]
        }
    )
    outcomes = list(partition_outcomes([ok, refused, duplicate_seq, missing], response))
    assert [o.batch for o in outcomes] == [ok, refused, duplicate_seq, missing]
    assert outcomes[0].error is None and outcomes[0].base_offset == 41
    assert outcomes[0].written is None
    assert isinstance(outcomes[1].error, errors.KafkaError) and outcomes[1].error.code == 87
    assert "one record refused" in str(outcomes[1].error)
    assert "record 0: bad timestamp" in str(outcomes[1].error)
    assert outcomes[1].written is Written.NO
    assert outcomes[2].written is Written.REFUSED_SEQUENCE
    assert isinstance(outcomes[3].error, errors.CorruptResponseError)
    assert "u-0" in str(outcomes[3].error)
