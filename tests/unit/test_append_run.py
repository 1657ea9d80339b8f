"""RecordBatchBuilder.append_run writes exactly what a loop of append() writes."""

from __future__ import annotations

import random

import pytest

from typing import Any

from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches
from tests.support.builders import builder_cls  # noqa: F401 - a fixture: each builder twin


def _columns(seed: int, n: int) -> tuple[list[bytes | None], list[bytes | None]]:
    rand = random.Random(seed)
    # Lengths around the one- and two-byte varint limits, and nulls.
    sizes = [0, 1, 63, 64, 100, 8191, 8192, 20_000]
    values = [None if rand.random() < 0.1 else rand.randbytes(rand.choice(sizes)) for _ in range(n)]
    keys = [
        None if rand.random() < 0.2 else rand.randbytes(rand.choice(sizes[:5])) for _ in range(n)
    ]
    return values, keys


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("headers", [None, [("trace", b"abc"), ("none", None)]])
@pytest.mark.parametrize("batch_size", [300, 16_384, 1 << 20])
def test_append_run_matches_append_records_and_fill(
    builder_cls: Any,
    keyed: bool,
    headers,
    batch_size: int,
) -> None:
    values, keys = _columns(batch_size, 400)
    run_keys = keys if keyed else None
    by_run = builder_cls(batch_size=batch_size, codec=Codec.LZ4)
    one_by_one = builder_cls(batch_size=batch_size, codec=Codec.LZ4)
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


def test_the_first_record_of_an_empty_batch_always_fits(builder_cls: Any) -> None:
    builder = builder_cls(batch_size=100)
    assert builder.append_run(1, [b"x" * 500, b"y"], 0, 2) == 1
    assert builder.append_run(7, [b"y"], 0, 1) == 0  # full now
    assert builder.max_timestamp == 1  # a run that added nothing leaves the batch as it was


@pytest.mark.parametrize("length", [0, 100, 9000])
@pytest.mark.parametrize("headers", [None, [("trace", b"abc")]])
@pytest.mark.parametrize("first", [None, 5_000])
@pytest.mark.parametrize("batch_size", [200, 1 << 20])
@pytest.mark.parametrize("kind", ["bytes", "views"])
def test_a_run_of_one_value_length_matches_append(
    builder_cls: Any,
    length: int,
    headers,
    first: int | None,
    batch_size: int,
    kind: str,
) -> None:
    """The pure twin's uniform-length encoder (no per-record loop) writes what
    append() writes, across the offset-delta varint widths (64 and 8,192
    records) and when full; so does the compiled twin, which has no such path."""
    rand = random.Random(length)
    values: list[Any] = [rand.randbytes(length) for _ in range(9_000 if length < 1000 else 200)]
    if kind == "views":  # what an Arrow column's values are: slices of one buffer
        values = [memoryview(v) for v in values]
    lengths = [length] * len(values)
    by_run = builder_cls(batch_size=batch_size)
    one_by_one = builder_cls(batch_size=batch_size)
    if first is not None:  # a record already there, with a later timestamp
        by_run.append(first, b"k", b"first")
        one_by_one.append(first, b"k", b"first")
    taken = 0
    n = len(values)
    for start, stop in ((0, 50), (50, n // 3), (n // 3, n)):  # runs continue a batch
        got = by_run.append_run(4_990, values, start, stop, None, headers, lengths=lengths)
        taken += got
        if got < stop - start:
            break
    expected = 0
    for value in values:
        if one_by_one.append(4_990, None, value, headers) is None:
            break
        expected += 1
    assert taken == expected
    assert taken > 0 or first is not None  # an empty batch takes its first record, however large
    assert by_run.build(producer_id=7, producer_epoch=1, base_sequence=3) == one_by_one.build(
        producer_id=7, producer_epoch=1, base_sequence=3
    )
    (batch,) = parse_record_batches(by_run.build())
    skip = 0 if first is None else 1
    assert [r.value for r in batch.records[skip:]] == values[:taken]


def test_mixed_lengths_or_nulls_take_the_general_encoder(builder_cls: Any) -> None:
    values = [b"aa", b"bb", None, b"cc"]
    lengths = [2, 2, -1, 2]
    by_run = builder_cls()
    assert by_run.append_run(1, values, 0, 4, lengths=lengths) == 4
    (batch,) = parse_record_batches(by_run.build())
    assert [r.value for r in batch.records] == values


@pytest.mark.parametrize("lie", ["shorter", "longer", "hint-too-short"])
def test_lengths_are_a_hint_never_trusted(builder_cls: Any, lie: str) -> None:
    """Values whose lengths are not the hint's are encoded as they are."""
    values = [b"x" * 10] * 40
    lengths = {"shorter": [5] * 40, "longer": [20] * 40, "hint-too-short": [10] * 3}[lie]
    builder = builder_cls()
    assert builder.append_run(1, values, 0, 40, lengths=lengths) == 40
    (batch,) = parse_record_batches(bytes(builder.build()))
    assert [r.value for r in batch.records] == values


def test_a_failed_run_leaves_the_batch_as_it_was(builder_cls: Any) -> None:
    builder = builder_cls()
    builder.append(1, None, b"kept")
    before = (builder.size_in_bytes, builder.record_count)
    with pytest.raises(TypeError, match=r"values\[2\]"):
        builder.append_run(1, [b"a", b"b", 3], 0, 3)
    assert (builder.size_in_bytes, builder.record_count) == before
    (batch,) = parse_record_batches(bytes(builder.build()))
    assert [r.value for r in batch.records] == [b"kept"]
