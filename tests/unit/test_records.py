"""Record batch v2: golden bytes from other clients, and round-trip properties."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches
from aioproducer.protocol.records import (
    RECORD_BATCH_OVERHEAD,
    CorruptBatchError,
    RecordBatchBuilder,
    RecordBatchBuilderPy,
    estimate_record_size,
    restamp_producer_state,
)
from tests.support.builders import builder_cls  # noqa: F401 - a fixture: each builder twin
from tests.golden.frames import (
    GOLDEN_DIR,
    REQUEST,
    RESPONSE,
    init_producer_id_response,
    load_frames,
    produce_request_batches,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
GOLDEN_FILES = [(f"librdkafka_idempotent_{c}.frames", "librdkafka", c) for c in CODECS] + [
    ("kafka_python_idempotent_none.frames", "kafka-python", "none")
]
_PLE = slice(12, 16)  # partitionLeaderEpoch: outside the CRC, set by the broker (KIP-101)


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def expected_records(client: str) -> list[tuple[int, bytes | None, bytes | None, list]]:
    data = json.loads((GOLDEN_DIR / "records.json").read_text())[client]
    return [
        (
            r["timestamp"],
            _unhex(r["key"]),
            _unhex(r["value"]),
            [(k, _unhex(v)) for k, v in r["headers"]],
        )
        for r in data
    ]


def golden_batch(filename: str) -> tuple[bytes, tuple[int, int]]:
    """The single record batch produced in a capture, and the broker-assigned (pid, epoch)."""
    frames = load_frames(GOLDEN_DIR / filename)
    produce = [f for f in frames if f.direction == REQUEST and f.api_key == 0]
    assert len(produce) == 1
    (batch_entry,) = produce_request_batches(produce[0])
    topic, partition, raw = batch_entry
    assert (topic, partition) == ("golden", 0)
    (init,) = [f for f in frames if f.direction == RESPONSE and f.api_key == 22]
    error, pid, epoch = init_producer_id_response(init)
    assert error == 0
    return raw, (pid, epoch)


def build_batch(records, codec: Codec = Codec.NONE, **state: int) -> bytes:
    builder = RecordBatchBuilder(codec=codec, batch_size=1 << 30)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    return builder.build(**state)


# -- golden bytes ------------------------------------------------------------


@pytest.mark.parametrize(("filename", "client", "codec"), GOLDEN_FILES)
def test_golden_batches_parse(filename: str, client: str, codec: str) -> None:
    raw, (pid, epoch) = golden_batch(filename)
    (batch,) = parse_record_batches(raw)
    expected = expected_records(client)
    assert batch.codec == Codec[codec.upper()]
    assert batch.magic == 2
    assert not batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == 0
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, 0)
    assert batch.base_offset == 0
    assert batch.last_offset_delta == len(expected) - 1
    assert batch.base_timestamp == expected[0][0]
    assert batch.max_timestamp == max(r[0] for r in expected)
    got = [(r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records]
    assert got == expected
    assert [r.offset for r in batch.records] == list(range(len(expected)))


@pytest.mark.parametrize(
    "filename", ["librdkafka_idempotent_none.frames", "kafka_python_idempotent_none.frames"]
)
def test_rebuild_uncompressed_golden_batch_byte_for_byte(filename: str) -> None:
    raw, (pid, epoch) = golden_batch(filename)
    client = "librdkafka" if filename.startswith("librdkafka") else "kafka-python"
    ours = build_batch(
        expected_records(client), producer_id=pid, producer_epoch=epoch, base_sequence=0
    )
    # Only normalisation: partitionLeaderEpoch. librdkafka and kafka-python send 0,
    # the Java producer (and we) send -1; brokers overwrite it on append (KIP-101)
    # and it lies before the CRC-covered range, so the CRC must still match.
    assert struct.unpack(">i", ours[_PLE])[0] == -1
    assert ours[:12] + raw[_PLE] + ours[16:] == raw


@pytest.mark.parametrize("codec", CODECS[1:])
def test_librdkafka_compressed_records_section_matches_ours(codec: str) -> None:
    raw, (pid, epoch) = golden_batch(f"librdkafka_idempotent_{codec}.frames")
    ours = build_batch(
        expected_records("librdkafka"), producer_id=pid, producer_epoch=epoch, base_sequence=0
    )
    from aioproducer.protocol.compression import decompress

    theirs_section = decompress(Codec[codec.upper()], raw[RECORD_BATCH_OVERHEAD:])
    assert theirs_section == ours[RECORD_BATCH_OVERHEAD:]
    # Header fields other than attributes, length and CRC agree too.
    assert raw[23:61] == ours[23:61]
    # And our own compressed build of the same records reads back identically.
    (mine,) = parse_record_batches(
        build_batch(expected_records("librdkafka"), Codec[codec.upper()], producer_id=pid)
    )
    (golden,) = parse_record_batches(raw)
    assert mine.records == golden.records


# -- builder behaviour -------------------------------------------------------


def test_first_record_always_fits_then_batch_size_is_enforced(builder_cls: Any) -> None:
    builder = builder_cls(batch_size=100)
    assert builder.append(1, b"k", b"x" * 500) == 0
    assert builder.append(2, b"k", b"v") is None
    assert builder.record_count == 1
    builder = builder_cls(batch_size=200)
    deltas = []
    while (delta := builder.append(1000, None, b"v" * 20)) is not None:
        deltas.append(delta)
    assert deltas == list(range(len(deltas)))
    assert builder.size_in_bytes <= 200
    assert len(builder.build()) == builder.size_in_bytes


def test_size_in_bytes_is_exact_when_uncompressed(builder_cls: Any) -> None:
    builder = builder_cls()
    assert builder.size_in_bytes == RECORD_BATCH_OVERHEAD
    builder.append(5, b"key", b"value", [("h", b"v")])
    builder.append(3, None, None)
    assert builder.size_in_bytes == len(builder.build())
    assert (builder.base_timestamp, builder.max_timestamp) == (5, 5)


@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(-1, 300)), min_size=1, max_size=30),
    st.integers(100, 2000),
)
def test_has_room_for_agrees_with_append(
    builder_cls: Any,
    sizes: list[tuple[int, int]],
    batch_size: int,
) -> None:
    builder = builder_cls(batch_size=batch_size)
    for i, (klen, vlen) in enumerate(sizes):
        value = None if vlen < 0 else b"v" * vlen
        room = builder.has_room_for(klen, vlen, None, timestamp_ms=1000 + i)
        conservative = builder.has_room_for(klen, vlen, None)
        accepted = builder.append(1000 + i, b"k" * klen, value) is not None
        assert room == accepted
        assert not conservative or accepted


def test_build_is_repeatable_and_seals(builder_cls: Any) -> None:
    builder = builder_cls(codec=Codec.ZSTD)
    builder.append(10, b"k", b"v" * 100)
    first = builder.build(producer_id=7, producer_epoch=1, base_sequence=3)
    assert builder.build(producer_id=7, producer_epoch=1, base_sequence=3) == first
    other = builder.build(producer_id=8, producer_epoch=2, base_sequence=9)
    assert other[RECORD_BATCH_OVERHEAD:] == first[RECORD_BATCH_OVERHEAD:]
    assert builder.is_sealed
    with pytest.raises(RuntimeError):
        builder.append(11, None, b"late")
    assert not builder.has_room_for(0, 0, None)
    with pytest.raises(ValueError):
        builder_cls().build()


@pytest.mark.parametrize("codec", list(Codec))
def test_a_rebuild_with_new_producer_state_is_a_valid_batch(builder_cls: Any, codec: Codec) -> None:
    builder = builder_cls(codec=codec, batch_size=1 << 20)
    values = [bytes([i]) * (50 + i) for i in range(40)]
    for i, value in enumerate(values):
        builder.append(
            1_000 + i, None if i % 3 else b"key", value, [("h", b"v")] if i % 5 == 0 else None
        )
    for pid, epoch, seq in ((7, 1, 3), (8, 2, 2**31 - 1), (-1, -1, -1)):
        raw = bytes(builder.build(producer_id=pid, producer_epoch=epoch, base_sequence=seq))
        (batch,) = parse_record_batches(raw)  # checks the CRC and the batch length
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
        assert [r.value for r in batch.records] == values
        if codec == Codec.NONE:
            assert len(raw) == builder.size_in_bytes


def test_an_uncompressed_batch_is_built_once_per_producer_state(builder_cls: Any) -> None:
    """The same state again: the same object (the pure twin's own buffer, the
    compiled twin's one copy of its buffer, which it then frees)."""
    builder = builder_cls()
    builder.append(10, b"k", b"v" * 100)
    first = builder.build(producer_id=7, producer_epoch=1, base_sequence=3)
    assert first is builder.build(producer_id=7, producer_epoch=1, base_sequence=3)
    assert len(first) == builder.size_in_bytes
    kept = bytes(first)
    other = bytes(builder.build(producer_id=8, producer_epoch=1, base_sequence=3))
    assert other[RECORD_BATCH_OVERHEAD:] == kept[RECORD_BATCH_OVERHEAD:] and other != kept


def test_the_package_builder_is_the_compiled_one_when_built() -> None:
    from aioproducer.protocol import records

    assert (RecordBatchBuilder is RecordBatchBuilderPy) == (not records.COMPILED)


def test_transactional_attribute_and_producer_state(builder_cls: Any) -> None:
    builder = builder_cls(is_transactional=True, codec=Codec.GZIP)
    builder.append(1, None, b"v")
    raw = builder.build(producer_id=42, producer_epoch=5, base_sequence=2**31 - 1)
    (batch,) = parse_record_batches(raw)
    assert batch.attributes == 0x10 | Codec.GZIP
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 5, 2**31 - 1)
    assert batch.partition_leader_epoch == -1


# -- parser ------------------------------------------------------------------


def test_concatenated_batches_and_truncated_tail() -> None:
    one = build_batch([(1, b"a", b"1", [])])
    two = build_batch([(2, b"b", b"2", []), (3, None, b"3", [])], Codec.LZ4)
    assert len(parse_record_batches(one + two)) == 2
    for cut in range(1, len(two)):
        batches = parse_record_batches(bytearray(one + two[:cut]))
        assert [b.records[0].key for b in batches] == [b"a"]
    assert parse_record_batches(b"") == []
    assert parse_record_batches(memoryview(one))[0].records[0].value == b"1"


def test_bad_magic_is_reported() -> None:
    raw = bytearray(build_batch([(1, b"a", b"1", [])]))
    raw[16] = 1
    with pytest.raises(CorruptBatchError, match="magic 1"):
        parse_record_batches(raw)


def test_malformed_record_is_reported() -> None:
    raw = bytearray(build_batch([(1, b"a", b"1", [])]))
    raw[RECORD_BATCH_OVERHEAD] = 0x7E  # record length far past the end
    raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptBatchError, match="malformed record"):
        parse_record_batches(raw)
    raw = bytearray(build_batch([(1, b"a", b"1", [])]))
    raw[57:61] = struct.pack(">i", 2)  # declares two records, holds one
    raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptBatchError):
        parse_record_batches(raw)


# -- properties --------------------------------------------------------------

_opt_bytes = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=20), _opt_bytes), max_size=4)
_record = st.tuples(st.integers(0, 2**42), _opt_bytes, _opt_bytes, _headers)
_records = st.lists(_record, min_size=1, max_size=25)
_codecs = st.sampled_from(list(Codec))
_state = st.tuples(
    st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(_records, _codecs, _state, st.booleans())
def test_build_parse_round_trip(
    builder_cls: Any, records, codec: Codec, state, transactional: bool
) -> None:
    builder = builder_cls(codec=codec, batch_size=1 << 30, is_transactional=transactional)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    pid, epoch, seq = state
    (batch,) = parse_record_batches(
        builder.build(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    )
    assert [(r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (ts, key, value, list(headers)) for ts, key, value, headers in records
    ]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == state
    assert batch.codec == codec and batch.is_transactional == transactional
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert batch.last_offset_delta == len(records) - 1


@settings(max_examples=60)
@given(_records, _codecs, _state, _state)
def test_restamp_keeps_records_and_crc_valid(records, codec: Codec, before, after) -> None:
    raw = build_batch(
        records, codec, producer_id=before[0], producer_epoch=before[1], base_sequence=before[2]
    )
    restamped = restamp_producer_state(
        raw, producer_id=after[0], producer_epoch=after[1], base_sequence=after[2]
    )
    assert restamped[RECORD_BATCH_OVERHEAD:] == raw[RECORD_BATCH_OVERHEAD:]  # not recompressed
    (batch,) = parse_record_batches(restamped)  # verifies the CRC
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == after
    assert batch.records == parse_record_batches(raw)[0].records
    assert restamped == build_batch(
        records, codec, producer_id=after[0], producer_epoch=after[1], base_sequence=after[2]
    )


@settings(max_examples=100)
@given(_records, st.data())
def test_corrupted_byte_fails_crc(records, data) -> None:
    raw = bytearray(build_batch(records))
    index = data.draw(st.integers(17, len(raw) - 1))  # the CRC field and what it covers
    raw[index] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptBatchError, match="CRC"):
        parse_record_batches(raw)
    if index < 21:  # only the stored CRC changed: the batch is otherwise intact
        assert len(parse_record_batches(raw, verify_crc=False)[0].records) == len(records)


@settings(max_examples=150)
@given(_record, st.integers(0, 100_000), st.integers(-(2**40), 2**40))
def test_estimate_record_size_is_an_upper_bound(record, preceding: int, ts_spread: int) -> None:
    ts, key, value, headers = record
    estimate = estimate_record_size(
        None if key is None else len(key), -1 if value is None else len(value), headers
    )
    # Alone in a batch:
    builder = RecordBatchBuilder()
    builder.append(ts, key, value, headers)
    assert builder.size_in_bytes <= estimate
    # After many records (wide offset delta) with a far-off timestamp (wide timestamp
    # delta). The pure twin's count is a plain attribute: set, it pretends that many
    # records came before (only sizes matter).
    builder = RecordBatchBuilderPy(batch_size=1 << 30)
    builder.append(ts, None, None)
    builder.record_count = preceding + 1
    before = builder.size_in_bytes
    builder.append(ts + ts_spread, key, value, headers)
    assert builder.size_in_bytes - before + RECORD_BATCH_OVERHEAD <= estimate
