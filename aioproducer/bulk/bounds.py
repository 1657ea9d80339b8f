"""What each record of a bulk call reserves of ``buffer_memory``, as running totals.

A bulk call reserves memory per slice of records and charges each batch for
the records it took, so it needs sums over ranges of records many times. They
come from one array of running totals: ``totals[i]`` is what records
``0..i-1`` reserve, and records ``a..b-1`` reserve ``totals[b] - totals[a]``,
with no pass over the records per sum.

:func:`fill_counting` writes a run of consecutive positions (a run of records
in one batch holds consecutive positions in its partition's stream).

Both have compiled twins (``aioproducer._speedups``); the functions named
``*_pure`` are the reference the twins are proven equal to.
"""

from __future__ import annotations

from array import array
from itertools import accumulate

from .. import errors
from .._speedups import kernels
from ..protocol.records import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD, headers_size
from .input import BulkColumns

__all__ = ["BULK_RECORD_OVERHEAD", "fill_counting", "record_reservations"]

# Record bound on top of key, value (-1 when null) and headers: the per-record
# path's, fixed fields at their widest and 5-byte varint lengths.
_RECORD_BOUND = MAX_RECORD_OVERHEAD + 12
# What the call keeps per record until its result is dropped (partition,
# position, key and value sizes in arrays): counted in buffer_memory too.
BULK_RECORD_OVERHEAD = 32


def reservations_pure(
    fixed: int,
    value_lengths: array[int],
    key_lengths: array[int] | None,
    limit: int,
    header_sizes: list[int] | None = None,
) -> tuple[array[int], int]:
    """Running totals of each record's reservation, from 0 (``n + 1`` entries),
    and the first record whose reservation exceeds ``limit`` (-1: none).

    A record reserves ``fixed`` plus its value's and key's lengths (-1 when
    null), plus its headers' size when they vary by record; without keys the
    null key's -1 is folded in as ``fixed - 1``.
    """
    if key_lengths is None:
        sizes = [fixed - 1 + v for v in value_lengths]
    else:
        sizes = [fixed + v + k for v, k in zip(value_lengths, key_lengths)]
    if header_sizes is not None:
        sizes = [s + h for s, h in zip(sizes, header_sizes)]
    over = -1
    if sizes and max(sizes) > limit:
        over = next(i for i, s in enumerate(sizes) if s > limit)
    return array("q", accumulate(sizes, initial=0)), over


def record_reservations(cols: BulkColumns, max_request_size: int, buffer_memory: int) -> array[int]:
    """The call's running totals; RecordTooLargeError names the first record too big.

    One pass over the records in the common case (no per-record headers):
    this runs before the call's first yield.
    """
    fixed = _RECORD_BOUND + BULK_RECORD_OVERHEAD
    if cols.header_sizes is None:
        fixed += headers_size(cols.common_headers)
    # A record alone in a batch takes its reservation - BULK_RECORD_OVERHEAD +
    # RECORD_BATCH_OVERHEAD bytes: neither a request nor the buffer can be smaller.
    limit = BULK_RECORD_OVERHEAD + min(
        max_request_size - RECORD_BATCH_OVERHEAD, buffer_memory - BULK_RECORD_OVERHEAD
    )
    if kernels is not None and cols.header_sizes is None:
        totals = array("q", [0]) * (cols.count + 1)
        index = kernels.reservations(totals, fixed, cols.value_lengths, cols.key_lengths, limit)
    else:
        totals, index = reservations_pure(
            fixed, cols.value_lengths, cols.key_lengths, limit, cols.header_sizes
        )
    if index >= 0:
        bound = totals[index + 1] - totals[index] - BULK_RECORD_OVERHEAD + RECORD_BATCH_OVERHEAD
        which = "max_request_size" if bound > max_request_size else "buffer_memory"
        raise errors.RecordTooLargeError(
            f"record {index} is {bound} bytes when serialized, larger than {which} "
            f"({max_request_size if which == 'max_request_size' else buffer_memory}); "
            "nothing of this call was buffered"
        )
    return totals


def fill_counting_pure(out: array[int], start: int, count: int, first: int) -> None:
    """``out[start + j] = first + j`` for ``j`` in ``range(count)``; IndexError
    when that range is not inside ``out`` (a slice assignment would grow it)."""
    if start < 0 or count < 0 or start + count > len(out):
        raise IndexError("fill_counting: range outside the array")
    out[start : start + count] = array("q", range(first, first + count))


fill_counting = fill_counting_pure if kernels is None else kernels.fill_counting
