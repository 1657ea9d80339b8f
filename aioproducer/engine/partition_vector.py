"""Kafka's murmur2 partitioning for a whole Arrow key column at once, in numpy.

The bulk path imports this module only when keys arrive as a pyarrow
binary-like array (binary, string, large_binary, large_string, or a chunked
array of them); without numpy (pyarrow 18+ does not need it) the bulk path
hashes key by key instead. The hashes are computed from the array's offsets
and data buffers: no key becomes a Python object.

The result is exactly :func:`aioproducer.engine.partitioner.partition_for_key` of
every key (Java's ``Utils.toPositive(Utils.murmur2(key)) % numPartitions``):
every step of the arithmetic is the partitioner module's own (``murmur2_start``,
``murmur2_word``, ``murmur2_tail``, ``murmur2_finish``, ``partition_for_hash``),
applied to uint32 arrays, which wrap modulo 2**32 like Java's int; this module
only arranges the keys' bytes into those arrays. murmur2 is sequential within a
key, so the vector runs across keys: step ``j`` mixes the ``j``-th
little-endian 4-byte word of every key that has one into that key's hash (keys
sorted longest first, so the keys still going are a prefix), then the 1-3 tail
bytes and the final mix are applied to all keys at once. Once fewer than :data:`_VECTOR_MIN_KEYS` keys still have words left (a
few keys much longer than the rest), a numpy step would cost more than it
saves, and those keys are hashed one by one with the per-key function.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from .partitioner import (
    murmur2,
    murmur2_finish,
    murmur2_start,
    murmur2_tail,
    murmur2_word,
    partition_for_hash,
)

__all__ = ["arrow_key_partitions", "murmur2_arrow"]

# Fewer keys than this still mixing words: finish them one by one in Python.
_VECTOR_MIN_KEYS = 8


def _key_buffers(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, n + 1 of them; data as uint8) of a binary-like Arrow array."""
    import pyarrow as pa

    t = arr.type
    dtype: np.dtype[Any]
    if pa.types.is_binary(t) or pa.types.is_string(t):
        dtype = np.dtype("<i4")
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        dtype = np.dtype("<i8")
    else:
        raise TypeError(
            "keys must be a binary or string Arrow array (binary, string, large_binary, "
            f"large_string), got one of type {t}"
        )
    _validity, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=dtype, count=arr.offset + len(arr) + 1)
    offsets = offsets[arr.offset :].astype(np.int64)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return offsets, data


def _word_at(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each byte position ``pos`` of ``data``."""
    word: np.ndarray = data[pos].astype(np.uint32)
    word |= data[pos + 1].astype(np.uint32) << 8
    word |= data[pos + 2].astype(np.uint32) << 16
    word |= data[pos + 3].astype(np.uint32) << 24
    return word


def _murmur2_buffers(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """murmur2 (unsigned) of every key ``data[offsets[i]:offsets[i + 1]]``."""
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    n = len(starts)
    h: np.ndarray = murmur2_start(lengths.astype(np.uint32))
    words = lengths >> 2
    long_keys: list[int] = []
    if n and words.max() > 0:
        # Longest first: the keys with a j-th word are the first still[j] of them.
        order = np.argsort(-words, kind="stable")
        sorted_starts = starts[order]
        still = (n - np.cumsum(np.bincount(words))).tolist()  # still[j]: keys with > j words
        hs = h[order]
        j = 0
        while j < len(still) and still[j] >= _VECTOR_MIN_KEYS:
            k = still[j]
            hs[:k] = murmur2_word(hs[:k], _word_at(data, sorted_starts[:k] + 4 * j))
            j += 1
        h[order] = hs
        if j < len(still):
            long_keys = order[: still[j]].tolist()
    tail = starts + (lengths & ~3)
    extra = lengths & 3
    sel = np.nonzero(extra)[0]
    if len(sel):
        # The 1-3 bytes after the last word, little-endian (0 past the key's end).
        t = np.zeros(len(sel), np.uint32)
        for size, shift in ((3, 16), (2, 8), (1, 0)):
            has = extra[sel] >= size
            t[has] |= data[tail[sel][has] + (size - 1)].astype(np.uint32) << np.uint32(shift)
        h[sel] = murmur2_tail(h[sel], t)
    h = murmur2_finish(h)
    for i in long_keys:
        # The few keys much longer than the rest: hashed whole, one at a time.
        h[i] = murmur2(data[starts[i] : starts[i] + lengths[i]].tobytes()) & 0xFFFFFFFF
    return h


def murmur2_arrow(arr: Any) -> np.ndarray:
    """Kafka's murmur2 of every element of a binary-like Arrow array, as uint32.

    Nulls hash as empty keys; callers mask them (they are not keyed records).
    """
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        parts = [murmur2_arrow(chunk) for chunk in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    if len(arr) == 0:
        return np.zeros(0, np.uint32)
    return _murmur2_buffers(*_key_buffers(arr))


def arrow_key_partitions(arr: Any, num_partitions: int) -> array[int]:
    """``partition_for_key(key, num_partitions)`` of every key; -1 where the key is null."""
    hashes = murmur2_arrow(arr)
    parts = partition_for_hash(hashes, num_partitions).astype(np.int32)
    if arr.null_count:
        parts[np.asarray(arr.is_null(), dtype=bool)] = -1
    out = array("i")
    out.frombytes(parts.astype("=i4").tobytes())
    return out
