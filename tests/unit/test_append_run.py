"""RecordBatchBuilder.append_run writes exactly what a loop of append() writes."""

from __future__ import annotations

import random

import pytest

from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilder, parse_record_batches


def _columns(seed: int, n: int) -> tuple[list[bytes | None], list[bytes | None]]:
    rand = random.Random(seed)
    # Lengths around the one- and two-byte varint limits, and nulls.
    sizes = [0, 1, 63, 64, 100, 8191, 8192, 20_000]
    values = [None if rand.random() < 0.1 else rand.randbytes(rand.choice(sizes)) for _ in range(n)]
    keys = [None if rand.random() < 0.2 else rand.randbytes(rand.choice(sizes[:5])) for _ in range(n)]
    return values, keys


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("headers", [None, [("trace", b"abc"), ("none", None)]])
@pytest.mark.parametrize("batch_size", [300, 16_384, 1 << 20])
def test_append_run_matches_append_records_and_fill(keyed: bool, headers, batch_size: int) -> None:
    values, keys = _columns(batch_size, 400)
    run_keys = keys if keyed else None
    by_run = RecordBatchBuilder(batch_size=batch_size, codec=Codec.LZ4)
    one_by_one = RecordBatchBuilder(batch_size=batch_size, codec=Codec.LZ4)
    # A record already in the batch, with a later timestamp: negative deltas.
    by_run.append(5_000, b"k", b"first")
    one_by_one.append(5_000, b"k", b"first")
    taken = by_run.append_run(4_990, values, 10, 400, run_keys, headers)
    expected = 0
    for i in range(10, 400):
        if one_by_one.append(4_990, keys[i] if keyed else None, values[i], headers) is None:
            break
        expected += 1
    assert taken == expected
    assert by_run.record_count == one_by_one.record_count == taken + 1
    assert by_run.build(producer_id=7, producer_epoch=1, base_sequence=3) == one_by_one.build(
        producer_id=7, producer_epoch=1, base_sequence=3
    )
    (batch,) = parse_record_batches(by_run.build())
    assert [r.value for r in batch.records[1:]] == values[10 : 10 + taken]
    assert batch.max_timestamp == 5_000


def test_the_first_record_of_an_empty_batch_always_fits() -> None:
    builder = RecordBatchBuilder(batch_size=100)
    assert builder.append_run(1, [b"x" * 500, b"y"], 0, 2) == 1
    assert builder.append_run(1, [b"y"], 0, 1) == 0  # full now
