"""Resolving the record futures of an acknowledged batch: the pure reference of the C kernel.

:func:`resolve_pure` has the C kernel ``resolve_futures``'s signature
(``aioproducer/_speedups/_kernels.c``) and is its readable twin: it gives
futures ``start`` to ``stop`` of a batch their :class:`RecordMetadata`. A batch
resolves its futures a slice at a time (:meth:`.batch.ProducerBatch.complete`),
so that a large batch never holds the event loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["future_deltas", "resolve_pure"]


def future_deltas(count: int, spans: Iterable[Any]) -> list[int]:
    """Offset delta of each of ``count`` per-record futures when bulk spans sit among them.

    A span (a run of bulk records without futures) with ``futures_before`` j
    and ``count`` n shifts every future from the j-th on by n offsets.
    """
    deltas = []
    runs = iter(spans)
    span = next(runs, None)
    skipped = 0
    for j in range(count):
        while span is not None and span.futures_before <= j:
            skipped += span.count
            span = next(runs, None)
        deltas.append(j + skipped)
    return deltas


def resolve_pure(
    futures: list[Any], start: int, stop: int, metadata: Any, topic: str, partition: int,
    base_offset: int, deltas: list[int] | None, log_append_time_ms: int,
    timestamps: Sequence[int], sizes: Sequence[int], skipped: Any,
) -> None:
    """Set the result of ``futures[start:stop]``: a ``metadata`` tuple for each record.

    Offsets run from ``base_offset`` (-1 for every record with acks=0), through
    ``deltas`` when given; timestamps are the records' own unless the broker
    appended at ``log_append_time_ms``; ``sizes`` hold each record's packed key
    and value sizes. A future whose ``set_result`` raises one of ``skipped``
    (cancelled by its caller, or its loop closed) is passed: the record is
    written all the same.
    """
    new = tuple.__new__  # skips NamedTuple's Python-level __new__: this loop is hot
    if base_offset < 0:
        offsets: Iterable[int] = itertools.repeat(-1, stop - start)
    elif deltas is None:
        offsets = range(base_offset + start, base_offset + stop)
    else:
        # Lazily, one per record as the compiled twin: a bad delta fails only
        # once the records before it are resolved.
        offsets = (base_offset + d for d in deltas[start:stop])
    stamps: Iterable[int] = (
        itertools.repeat(log_append_time_ms, stop - start)
        if log_append_time_ms >= 0
        else timestamps[start:stop]
    )
    last: object = None  # no packed value equals it, -1 included
    key_size = value_size = -1
    for fut, offset, ts, packed in zip(futures[start:stop], offsets, stamps, sizes[start:stop]):
        if packed != last:  # unpacked only when it changes: records often share sizes
            last = packed
            key_size, value_size = (packed >> 32) - 1, (packed & 0xFFFFFFFF) - 1
        try:
            fut.set_result(new(metadata, (topic, partition, offset, ts, key_size, value_size)))
        except skipped:
            pass
