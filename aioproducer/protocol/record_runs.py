"""Encoding a run of unkeyed records whose values all have one length.

The common bulk case (fixed-size payloads, no keys, the call's timestamp and
headers on every record) needs no per-record arithmetic: in a v2 record

    length | attributes | timestamp delta | offset delta | key (null) | value length | value | headers

only the offset delta and the value differ from one record to the next, and
the record's length changes only where the offset delta's varint grows a byte
(at delta 64 and 8192). So the bytes before each value are one prefix per
offset delta, kept in a small cache, and the run is encoded by interleaving
three lists at C speed and joining them once, with no Python loop per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .varint import encode_uvarint

__all__ = ["encode_uniform_run", "encode_unkeyed_loop", "plain_run"]

_NULL_KEY = b"\x01"  # zigzag(-1): a null key
# Offset-delta widths: deltas below 64 take one varint byte, below 8192 two.
_ONE_BYTE, _TWO_BYTES = 64, 8192
_CACHE_LIMIT = 16  # distinct (record head, value length) pairs kept
_PLAIN = {bytes, bytearray, memoryview}
# Tuples, not lists: a tuple of bytes is untracked by the cyclic garbage
# collector after its first pass, so full collections skip the cached entries
# (up to 16 x 8,192) instead of walking each of them every time.
_PREFIXES: dict[tuple[bytes, bytes], tuple[bytes, ...]] = {}
# The offset-delta varints of one and two bytes, looked up instead of encoded.
_DELTAS: tuple[bytes, ...] = tuple(encode_uvarint(d << 1) for d in range(_TWO_BYTES))


def _prefixes(lead: bytes, tail: bytes, first: int, stop: int) -> Sequence[bytes]:
    """``lead + varint(delta) + tail`` for each offset delta in ``[first, stop)``."""
    if stop > _TWO_BYTES:  # batches past 8,192 records: not worth caching
        return [lead + encode_uvarint(d << 1) + tail for d in range(first, stop)]
    deltas = _DELTAS
    key = (lead, tail)
    cached = _PREFIXES.get(key)
    if cached is None and first not in (0, _ONE_BYTE):
        # A run continuing a batch with a timestamp delta of its own (a later
        # call): such a head rarely comes back, so build just what is needed.
        # (A batch's own records reach this head at delta 0, or at 64 where the
        # offset delta's varint grows and so does the record's length prefix.)
        return [lead + deltas[d] + tail for d in range(first, stop)]
    if cached is None or len(cached) < stop:
        if cached is None and len(_PREFIXES) >= _CACHE_LIMIT:
            _PREFIXES.clear()
        have: tuple[bytes, ...] = () if cached is None else cached
        end = min(_TWO_BYTES, max(stop, 2 * len(have), 256))
        cached = have + tuple(lead + deltas[d] + tail for d in range(len(have), end))
        _PREFIXES[key] = cached
    return cached[first:stop]


def plain_run(values: Sequence[Any], start: int, stop: int, length: int) -> bool:
    """Whether ``values[start:stop]`` are all plain bytes of ``length`` bytes.

    Plain: what ``len()`` and ``bytes.join`` read alike, and whose reading runs
    none of the caller's code (bytes, bytearray, or a contiguous memoryview of
    single bytes), in a list (sliced without running code). Only then is a run
    encoded by :func:`encode_uniform_run`; the ``lengths`` a caller passes are
    a hint, checked here, never trusted.
    """
    if type(values) is not list:
        return False
    chunk = values[start:stop]
    if len(chunk) != stop - start:
        return False
    kinds = set(map(type, chunk))
    if not kinds <= _PLAIN:
        return False
    if memoryview in kinds and not all(
        v.ndim == 1 and v.itemsize == 1 and v.c_contiguous for v in chunk if type(v) is memoryview
    ):
        return False
    return set(map(len, chunk)) == {length}


def encode_uniform_run(
    parts: list[bytes | bytearray | memoryview],
    values: Sequence[bytes | bytearray | memoryview],
    start: int,
    stop: int,
    value_length: int,
    head: bytes,
    headers: bytes,
    count: int,
    room: int,
) -> int:
    """Append the encodings of ``values[start:stop]`` to ``parts`` while they fit.

    Every value is ``value_length`` bytes (not null). ``head`` is the
    attributes byte and timestamp delta, ``headers`` the encoded header
    section, ``count`` the batch's record count so far (the first offset
    delta) and ``room`` the bytes left under ``batch_size``; the first record
    of an empty batch always fits. Returns how many records were encoded.
    """
    vpre = encode_uvarint(value_length << 1)
    tail = _NULL_KEY + vpre
    fixed = len(head) + len(tail) + value_length + len(headers)
    i = start
    while i < stop:
        if count < _ONE_BYTE:
            limit, delta_size = _ONE_BYTE, 1
        elif count < _TWO_BYTES:
            limit, delta_size = _TWO_BYTES, 2
        else:
            limit, delta_size = 1 << 20, 3  # 3-byte deltas cover every batch under 2**20 records
        body = fixed + delta_size
        lpre = encode_uvarint(body << 1)
        size = body + len(lpre)
        wanted = min(stop - i, limit - count)
        k = min(wanted, room // size)
        if k <= 0:
            if count:
                break
            k = 1  # the first record of a batch is taken whatever its size
        seg: list[bytes | bytearray | memoryview] = [headers] * (3 * k)
        seg[0::3] = _prefixes(lpre + head, tail, count, count + k)
        seg[1::3] = values[i : i + k]
        parts.extend(seg)
        room -= k * size
        count += k
        i += k
        if k < wanted:
            break
    return i - start


def encode_unkeyed_loop(
    parts: list[Any],
    values: Sequence[Any],
    indices: Iterable[Any],
    fixed: bytes,
    hdr: bytes,
    count: int,
    room: int,
    table: Sequence[bytes],
    plain_at: Callable[[Any, str, Any], Any],
) -> int:
    """Unkeyed records of any lengths, one by one, while they fit in ``room``: the new count.

    Everything but the offset delta and the value is constant; a value's
    length prefix is recomputed only when the length changes. ``plain_at``
    reads a value that is not exactly bytes (and names it in its error);
    ``table`` holds the varints below its length.
    """
    limit = len(table)
    base_size = len(fixed) + len(hdr)  # ``fixed``: the attributes and timestamp delta
    extend = parts.extend
    tail, vsize, last_len = _NULL_KEY, 0, -2
    for i in indices:
        value = values[i]
        if value is None:
            vlen = -1
        else:
            if type(value) is not bytes:
                value = plain_at(value, "values", i)
            vlen = len(value)
        if vlen != last_len:
            last_len = vlen
            if vlen < 0:
                tail, vsize = _NULL_KEY + _NULL_KEY, 2
            else:
                vpre = table[vlen << 1] if vlen << 1 < limit else encode_uvarint(vlen << 1)
                tail, vsize = _NULL_KEY + vpre, 1 + len(vpre) + vlen
        off = table[count << 1] if count << 1 < limit else encode_uvarint(count << 1)
        size = base_size + len(off) + vsize
        lpre = table[size << 1] if size << 1 < limit else encode_uvarint(size << 1)
        size += len(lpre)
        if size > room and count:
            break
        room -= size
        extend((lpre, fixed, off, tail, value or b"", hdr))
        count += 1
    return count
