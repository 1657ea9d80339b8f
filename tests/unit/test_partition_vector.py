"""The vectorized murmur2 over Arrow key columns agrees with the per-key function and Java."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.extras import require

pa = require("pyarrow", extra="spark")
require("numpy", extra="spark")

from aioproducer.engine import partition_vector as partition_vector
from aioproducer.engine.partition_vector import arrow_key_partitions, murmur2_arrow
from aioproducer.engine.partitioner import murmur2, partition_for_key
from tests.unit.test_partitioner import JAVA_MURMUR2

BINARY_TYPES = [pa.binary(), pa.large_binary()]
STRING_TYPES = [pa.string(), pa.large_string()]


def expected(keys: list[bytes | None], n: int) -> list[int]:
    return [-1 if k is None else partition_for_key(k, n) for k in keys]


@pytest.mark.parametrize("arrow_type", BINARY_TYPES + STRING_TYPES)
def test_java_vectors(arrow_type: pa.DataType) -> None:
    keys = [k for k, _ in JAVA_MURMUR2]
    column = [k.decode() for k in keys] if arrow_type in STRING_TYPES else keys
    hashes = murmur2_arrow(pa.array(column, arrow_type)).tolist()
    assert hashes == [h & 0xFFFFFFFF for _, h in JAVA_MURMUR2]
    for n in (1, 3, 7, 100, 2**31 - 1):
        assert arrow_key_partitions(pa.array(column, arrow_type), n).tolist() == [
            (h & 0x7FFFFFFF) % n for _, h in JAVA_MURMUR2
        ]


# Keys of every tail length (0-3 bytes past the last word), empty keys and nulls.
_keys = st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=80)


@settings(max_examples=300, deadline=None)
@given(
    keys=_keys,
    arrow_type=st.sampled_from(BINARY_TYPES),
    n=st.integers(1, 5000),
    cut=st.tuples(st.integers(0, 80), st.integers(0, 80)),
)
def test_binary_columns_match_the_per_key_partition(
    keys: list[bytes | None], arrow_type: pa.DataType, n: int, cut: tuple[int, int]
) -> None:
    arr = pa.array(keys, arrow_type)
    assert arrow_key_partitions(arr, n).tolist() == expected(keys, n)
    # A slice starts at a non-zero offset into the same buffers.
    lo, hi = sorted(cut)
    assert arrow_key_partitions(arr.slice(lo, hi - lo), n).tolist() == expected(keys[lo:hi], n)
    # A chunked array: the chunks' results in order.
    chunked = pa.chunked_array([arr.slice(lo), arr.slice(0, hi)], arrow_type)
    assert arrow_key_partitions(chunked, n).tolist() == expected(keys[lo:] + keys[:hi], n)


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=60),
    arrow_type=st.sampled_from(STRING_TYPES),
    n=st.integers(1, 64),
)
def test_string_columns_hash_their_utf8_bytes(
    keys: list[str | None], arrow_type: pa.DataType, n: int
) -> None:
    raw = [None if k is None else k.encode() for k in keys]
    assert arrow_key_partitions(pa.array(keys, arrow_type), n).tolist() == expected(raw, n)


def test_non_ascii_and_unsigned_bytes() -> None:
    keys = ["é", "日本語", "🙂🙂", "ü" * 9, "\x00", "a\x00b"]
    raw = [k.encode() for k in keys] + [bytes([255] * i) for i in range(12)]
    hashes = murmur2_arrow(pa.array(raw, pa.binary())).tolist()
    assert hashes == [murmur2(k) & 0xFFFFFFFF for k in raw]
    assert arrow_key_partitions(pa.array(keys), 13).tolist() == expected(raw[:6], 13)


@pytest.mark.parametrize("long_keys", [1, 3, partition_vector._VECTOR_MIN_KEYS, 40])
def test_a_few_long_keys_among_short_ones(long_keys: int) -> None:
    # Below _VECTOR_MIN_KEYS keys still going, the longest are hashed one by one.
    short = [b"k%d" % i for i in range(200)]
    long_ = [bytes((i * 7 + j) % 256 for j in range(1000 + i)) for i in range(long_keys)]
    keys = short[:50] + long_ + short[50:] + [b"mid-length-%d" % i for i in range(30)]
    arr = pa.array(keys, pa.large_binary())
    assert arrow_key_partitions(arr, 97).tolist() == expected(keys, 97)


def test_empty_and_all_null_columns() -> None:
    assert arrow_key_partitions(pa.array([], pa.binary()), 3).tolist() == []
    assert arrow_key_partitions(pa.chunked_array([], pa.string()), 3).tolist() == []
    assert arrow_key_partitions(pa.array([None, None], pa.binary()), 3).tolist() == [-1, -1]
    assert arrow_key_partitions(pa.array([b"", None, b""], pa.binary()), 5).tolist() == [
        partition_for_key(b"", 5),
        -1,
        partition_for_key(b"", 5),
    ]


def test_a_non_binary_column_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="binary or string Arrow array"):
        arrow_key_partitions(pa.array([1, 2, 3]), 3)


def test_importing_the_producer_imports_neither_numpy_nor_pyarrow() -> None:
    code = (
        "import sys, aioproducer, aioproducer.bulk.appender, aioproducer.producer\n"
        "print(sorted(m for m in ('numpy', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_public_function_is_the_partitioners_choice_per_key() -> None:
    import pyarrow as pa

    import aioproducer

    keys = [b"a", None, b"order-17", b"", "caf\u00e9".encode()]
    got = list(aioproducer.arrow_key_partitions(pa.array(keys, pa.binary()), 7))
    assert got == [-1 if k is None else partition_for_key(k, 7) for k in keys]
