"""Compression codecs: formats on the wire, round trips, and librdkafka's output."""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.protocol.compression import Codec, codec_from_name, compress, decompress
from aioproducer.protocol.records import RECORD_BATCH_OVERHEAD
from tests.unit.test_records import golden_batch

XERIAL_MAGIC = b"\x82SNAPPY\x00"
SAMPLE = b"".join(b"record %d with some repetitive payload; " % i for i in range(3000))


def test_codec_ids_match_batch_attributes() -> None:
    assert [(c.name, int(c)) for c in Codec] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("none", Codec.NONE),
        ("GZIP", Codec.GZIP),
        ("Snappy", Codec.SNAPPY),
        ("lz4", Codec.LZ4),
        ("zstd", Codec.ZSTD),
    ],
)
def test_codec_from_name(name: str, codec: Codec) -> None:
    assert codec_from_name(name) is codec


def test_codec_from_name_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="none, gzip, snappy, lz4, zstd"):
        codec_from_name("brotli")


@settings(max_examples=50)
@given(st.sampled_from(list(Codec)), st.binary(max_size=5000), st.sampled_from([None, 1]))
def test_round_trip(codec: Codec, data: bytes, level: int | None) -> None:
    assert decompress(codec, compress(codec, data, level)) == data


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_large_and_buffer_types(codec: Codec) -> None:
    data = SAMPLE * 3  # > 32 KiB xerial blocks and 64 KiB lz4 blocks
    packed = compress(codec, bytearray(data))
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data


def test_gzip_is_a_deterministic_gzip_member() -> None:
    packed = compress(Codec.GZIP, SAMPLE)
    assert packed[:3] == b"\x1f\x8b\x08"
    assert packed == compress(Codec.GZIP, SAMPLE)
    assert len(compress(Codec.GZIP, SAMPLE, 1)) >= len(compress(Codec.GZIP, SAMPLE, 9))


def test_snappy_writes_xerial_framing() -> None:
    data = SAMPLE * 3
    packed = compress(Codec.SNAPPY, data)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(packed)
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks_too() -> None:
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(SAMPLE))) == SAMPLE


def test_lz4_writes_the_frame_format() -> None:
    packed = compress(Codec.LZ4, SAMPLE)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic (KIP-57)
    assert lz4.frame.decompress(packed) == SAMPLE


def test_zstd_reads_frames_without_content_size() -> None:
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    assert zstandard.frame_content_size(streamed) == -1
    assert decompress(Codec.ZSTD, streamed) == SAMPLE
    assert decompress(Codec.ZSTD, compress(Codec.ZSTD, SAMPLE, 19)) == SAMPLE


@pytest.mark.parametrize("codec", [Codec.ZSTD, Codec.GZIP, Codec.LZ4, Codec.SNAPPY])
def test_codecs_are_safe_from_threads(codec: Codec) -> None:
    inputs = [SAMPLE[i * 997 :] for i in range(64)]
    with ThreadPoolExecutor(8) as pool:
        packed = list(pool.map(lambda d: compress(codec, d), inputs))
        unpacked = list(pool.map(lambda p: decompress(codec, p), packed))
    assert unpacked == inputs


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_raises_value_error(codec: Codec) -> None:
    with pytest.raises(ValueError):
        decompress(codec, b"\x00not compressed data at all\xff" * 3)


def test_truncated_xerial_stream_raises_value_error() -> None:
    packed = compress(Codec.SNAPPY, SAMPLE)
    with pytest.raises(ValueError):
        decompress(Codec.SNAPPY, packed[:-10])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompress_librdkafka_batches(codec: str) -> None:
    """librdkafka writes raw snappy and zstd frames without content size."""
    raw, _ = golden_batch(f"librdkafka_idempotent_{codec}.frames")
    plain, _ = golden_batch("librdkafka_idempotent_none.frames")
    records = decompress(Codec[codec.upper()], raw[RECORD_BATCH_OVERHEAD:])
    assert records == plain[RECORD_BATCH_OVERHEAD:]
