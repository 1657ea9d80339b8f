"""The compression codec table: every codec round-trips, and levels are checked at construction."""

from __future__ import annotations

import pytest

from aioproducer import Producer
from aioproducer.errors import ConfigurationError
from aioproducer.protocol.compression import (
    CODECS,
    Codec,
    codec_from_name,
    compress,
    decompress,
)

DATA = b"kafka record batch body " * 200


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_every_codec_is_in_the_table_and_round_trips(codec: Codec) -> None:
    spec = CODECS[codec]
    assert codec_from_name(spec.name.upper()) is codec
    assert decompress(codec, compress(codec, DATA)) == DATA


@pytest.mark.parametrize(
    ("compression", "level", "words"),
    [
        ("gzip", 42, "gzip level must be in -1..9"),
        ("gzip", -2, "gzip level must be in -1..9"),
        ("zstd", 23, "zstd level must be in ..22"),
        ("lz4", "3", "must be an int"),
        ("zstd", True, "must be an int"),
    ],
)
def test_a_level_the_codec_refuses_is_a_configuration_error(
    compression: str, level: object, words: str
) -> None:
    with pytest.raises(ConfigurationError, match=words):
        Producer("localhost:9092", compression=compression, compression_level=level)


@pytest.mark.parametrize(
    ("compression", "level"),
    [
        ("gzip", -1),
        ("gzip", 9),
        ("zstd", 22),
        ("zstd", -5),
        ("lz4", 17),
        ("snappy", 5),
        ("none", 3),
    ],
)
def test_levels_the_codec_accepts_still_construct(compression: str, level: int) -> None:
    Producer("localhost:9092", compression=compression, compression_level=level)
    codec = codec_from_name(compression)
    assert decompress(codec, compress(codec, DATA, level)) == DATA


def test_unknown_codec_id_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown compression codec"):
        compress(7, DATA)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown compression codec"):
        decompress(7, DATA)  # type: ignore[arg-type]
