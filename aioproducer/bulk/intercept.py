"""Interceptors on the bulk path: every record of ``enqueue_many`` meets the hooks.

A producer with interceptors hands each record of a bulk call to ``on_send``
(as :class:`~aioproducer.types.ProducerRecord`, before serialization,
like ``enqueue``), then buffers what the hooks returned as one bulk call, and
calls ``on_acknowledgement`` once per record when the call settles. This is
the per-record price of hooks (a Python object per record each way), paid
only when hooks are configured; without them the bulk path never gets here.

A bulk call goes to one topic, so a hook that moves a record to another topic
fails the call before anything is buffered (each record's ``on_acknowledgement``
then gets that error, as when ``enqueue`` itself raises). A call cancelled
after buffering part of its records (see :mod:`.progress`) acknowledges each
record from the call's future all the same: the buffered ones with their real
outcome, the rest with :class:`~aioproducer.errors.CallCancelledError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..engine.interceptors import InterceptorChain, failed_metadata
from ..types import BulkProgress, BulkResult, BulkSendError, ProducerRecord
from .input import bytes_column, is_arrow_array

__all__ = ["intercepted_enqueue_many"]

Serializer = Callable[[Any], Any] | None
EnqueueMany = Callable[[str, Any, Any, Any, Any, Any], Awaitable["asyncio.Future[BulkResult]"]]


def _as_list(column: Any, what: str, topic: str, serializer: Serializer) -> list[Any]:
    if is_arrow_array(column):
        # String arrays give bytes, and an Arrow column with a serializer is
        # refused, exactly as without hooks.
        return bytes_column(column, what, serializer, topic)
    if isinstance(column, (str, bytes, bytearray, memoryview)) or not isinstance(column, Sequence):
        raise TypeError(
            f"{what} must be a list or an Arrow binary array, got {type(column).__name__}"
        )
    return list(column)  # objects stay as given: the serializers run after the hooks


def _per_record(column: Any, n: int, one_for_all: bool) -> list[Any]:
    if one_for_all:
        return [column] * n
    values = list(column)
    if len(values) != n:
        raise ValueError(f"a column has {len(values)} entries for {n} values")
    return values


def _records(
    topic: str,
    values: Any,
    keys: Any,
    headers: Any,
    partition: Any,
    timestamp_ms: Any,
    serializers: tuple[Serializer, Serializer],
) -> list[ProducerRecord]:
    vals = _as_list(values, "values", topic, serializers[1])
    n = len(vals)
    keys_ = [None] * n if keys is None else _as_list(keys, "keys", topic, serializers[0])
    if len(keys_) != n:
        raise ValueError(f"keys has {len(keys_)} entries for {n} values")
    common = headers is None or (
        len(headers) > 0 and isinstance(headers[0], tuple) and isinstance(headers[0][0], str)
    )
    hdrs = _per_record(headers, n, common)
    parts = _per_record(partition, n, partition is None or isinstance(partition, int))
    stamps = _per_record(timestamp_ms, n, timestamp_ms is None or isinstance(timestamp_ms, int))
    return [
        ProducerRecord(topic, v, k, p, ts, None if h is None else list(h))
        for v, k, h, p, ts in zip(vals, keys_, hdrs, parts, stamps)
    ]


def _column(records: list[ProducerRecord], field: str) -> list[Any] | None:
    """The field of every record, or None when no record sets it (keeps the fast paths)."""
    column = [getattr(r, field) for r in records]
    return column if any(x is not None for x in column) else None


async def intercepted_enqueue_many(
    chain: InterceptorChain,
    enqueue_many: EnqueueMany,
    topic: str,
    values: Any,
    keys: Any,
    headers: Any,
    partition: Any,
    timestamp_ms: Any,
    serializers: tuple[Serializer, Serializer] = (None, None),
    progress: BulkProgress | None = None,
) -> asyncio.Future[BulkResult]:
    """``enqueue_many`` with ``chain``'s hooks run for every record.

    ``serializers``: the producer's (key, value) serializers, which run after the hooks.
    ``progress``: the one ``enqueue_many`` keeps up to date, if the caller needs it.
    """
    given = _records(topic, values, keys, headers, partition, timestamp_ms, serializers)
    records = [chain.on_send(r) for r in given]
    try:
        moved = next((i for i, r in enumerate(records) if r.topic != topic), None)
        if moved is not None:
            raise ValueError(
                f"an interceptor moved record {moved} to topic {records[moved].topic!r}; "
                f"a bulk call sends to one topic ({topic!r}): nothing of this call was buffered"
            )
        future = await enqueue_many(
            topic,
            [r.value for r in records],
            _column(records, "key"),
            _column(records, "headers"),
            _column(records, "partition"),
            _column(records, "timestamp_ms"),
        )
    except BaseException as exc:
        partial = None if progress is None else progress.future
        if partial is not None:
            # Stopped after buffering some records: those are on their way, and
            # the call's future will say how each one ended.
            partial.add_done_callback(lambda fut: _acknowledge(chain, records, fut))
        else:
            for record in records:
                chain.on_acknowledgement(failed_metadata(record), exc)
        raise
    future.add_done_callback(lambda fut: _acknowledge(chain, records, fut))
    return future


def _acknowledge(
    chain: InterceptorChain, records: list[ProducerRecord], future: asyncio.Future[BulkResult]
) -> None:
    """One ``on_acknowledgement`` per record, with its metadata or its error."""
    if future.cancelled():
        # The caller stopped waiting; each record's outcome is unknown here.
        for record in records:
            chain.on_acknowledgement(failed_metadata(record), asyncio.CancelledError())
        return
    exc = future.exception()
    result = (
        future.result() if exc is None else exc.result if isinstance(exc, BulkSendError) else None
    )
    for i, record in enumerate(records):
        if result is None:
            chain.on_acknowledgement(failed_metadata(record), exc)
            continue
        try:
            metadata = result[i]
        except Exception as error:  # noqa: BLE001 - the record's own failure
            chain.on_acknowledgement(failed_metadata(record), error)
        else:
            chain.on_acknowledgement(metadata, None)
