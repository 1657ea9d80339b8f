"""The bulk API of :class:`~aioproducer.Producer`: the work of ``enqueue_many``.

:class:`BulkAPI` is a part the producer holds; ``Producer.enqueue_many`` and
``Producer.send_many`` delegate to it. The work is :class:`~aioproducer.bulk.appender.BulkAppender`'s (one
encoding pass over a column of records, one future per call), and, with
interceptors configured, :func:`~aioproducer.bulk.intercept.intercepted_enqueue_many`
runs the hooks once per record around it.

Invariants: bad input raises at once and buffers nothing; the call's future
resolves exactly once, to a BulkResult or a BulkSendError naming the failed
records; a call stopped part way (an error, or cancelled) reports which
records it buffered: always a prefix (see :class:`~aioproducer.types.BulkProgress`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..bulk.intercept import intercepted_enqueue_many
from ..types import BulkProgress, BulkResult

if TYPE_CHECKING:
    from ..engine.interceptors import InterceptorChain
    from .running import Running
    from .serializer_prepare import SerializerBinding

__all__ = ["BulkAPI"]


class BulkAPI:
    """Bulk calls of a producer: its running parts, serializers and interceptors."""

    __slots__ = ("_check_open", "_interceptors", "_run", "_serializers")

    def __init__(
        self,
        run: Callable[[], Running],
        check_open: Callable[[], None],
        serializers: SerializerBinding,
        interceptors: InterceptorChain | None,
    ) -> None:
        self._run = run
        self._check_open = check_open
        self._serializers = serializers
        self._interceptors = interceptors

    async def enqueue_many(
        self,
        topic: str,
        values: Any,
        keys: Any,
        headers: Any,
        partition: Any,
        timestamp_ms: Any,
        progress: BulkProgress | None,
    ) -> asyncio.Future[BulkResult]:
        """``Producer.enqueue_many``: claims ``progress`` and fills it, cancelled or not."""
        if progress is None:
            progress = BulkProgress()
        elif not isinstance(progress, BulkProgress):
            raise TypeError(f"progress must be a BulkProgress, got {type(progress).__name__}")
        progress.claim()
        try:
            return await self._enqueue_many(
                topic, values, keys, headers, partition, timestamp_ms, progress
            )
        except asyncio.CancelledError as exc:
            progress.attach(exc)
            raise

    async def _enqueue_many(
        self,
        topic: str,
        values: Any,
        keys: Any,
        headers: Any,
        partition: Any,
        timestamp_ms: Any,
        progress: BulkProgress,
    ) -> asyncio.Future[BulkResult]:
        bulk = self._run().bulk
        prep = self._serializers.prep
        serializers = self._serializers.key, self._serializers.value
        if prep is not None:
            # Schema-aware serializers: the schema id of the topic, once per call,
            # before any record is serialized or buffered.
            await prep.prepare(topic)
            self._check_open()
            serializers = prep.bound(topic)
        enqueue = functools.partial(bulk.enqueue_many, serializers=serializers, progress=progress)
        if self._interceptors is not None:
            return await intercepted_enqueue_many(
                self._interceptors,
                enqueue,
                topic,
                values,
                keys,
                headers,
                partition,
                timestamp_ms,
                serializers,
                progress,
            )
        return await enqueue(topic, values, keys, headers, partition, timestamp_ms)
