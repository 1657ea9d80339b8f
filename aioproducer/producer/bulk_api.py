"""The bulk API of :class:`~aioproducer.Producer`: ``enqueue_many`` and ``send_many``.

:class:`BulkProducerMixin` holds the two public methods; ``Producer``
inherits them. The work is :class:`~aioproducer.bulk.appender.BulkAppender`'s (one
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
from typing import TYPE_CHECKING, Any

from ..bulk.intercept import intercepted_enqueue_many
from ..types import BulkProgress, BulkResult

if TYPE_CHECKING:
    from ..config import ProducerConfig
    from ..interceptors import InterceptorChain
    from .running import Running
    from .serializer_prepare import SerializerBinding

__all__ = ["BulkProducerMixin"]


class BulkProducerMixin:
    """Bulk methods of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        config: ProducerConfig
        _interceptors: InterceptorChain | None
        _serializers: SerializerBinding

        def _check_open(self) -> None: ...
        def _run(self) -> Running: ...

    async def enqueue_many(
        self, topic: str, values: Any, *, keys: Any = None, headers: Any = None,
        partition: Any = None, timestamp_ms: Any = None, progress: BulkProgress | None = None,
    ) -> asyncio.Future[BulkResult]:
        """Buffer many records of ``topic`` in one pass; one future for all (see :mod:`.bulk`).

        ``values``/``keys``: lists of bytes-like or None, or pyarrow binary arrays.
        The future resolves to a BulkResult, or fails with BulkSendError naming
        the failed records. Bad input raises at once and buffers nothing.
        Configured interceptors see every record (see :mod:`.bulk.intercept`).

        Records go in in call order, waiting for buffer memory or metadata
        between slices (at most ``max_block_ms``). If the producer closes, the
        transaction moves on (commit, abort) or the wait runs out part way, the
        call returns its future and the records not buffered fail there
        (``result.errors[None]``). If the call is cancelled part way, records
        ``0 .. k - 1`` stay buffered and are delivered, and the
        ``CancelledError`` carries a :class:`~aioproducer.types.BulkProgress`
        (``exc.bulk_progress``; ``BulkProgress.of(exc)`` finds it behind a
        ``TimeoutError`` too) with ``buffered == k`` and the call's future; pass
        ``progress=BulkProgress()`` to hold it whatever becomes of the
        exception. Resend ``values[k:]``: nothing is sent twice.
        """
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
        self, topic: str, values: Any, keys: Any, headers: Any, partition: Any,
        timestamp_ms: Any, progress: BulkProgress,
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
                self._interceptors, enqueue,
                topic, values, keys, headers, partition, timestamp_ms, serializers, progress,
            )
        return await enqueue(topic, values, keys, headers, partition, timestamp_ms)

    async def send_many(
        self, topic: str, values: Any, *, progress: BulkProgress | None = None, **columns: Any
    ) -> BulkResult:
        """:meth:`enqueue_many`, then wait for every record's acknowledgement.

        Cancelled while buffering, as :meth:`enqueue_many`. Cancelled while
        waiting for the acknowledgements (every record buffered), the records
        are still delivered: the ``CancelledError`` carries the progress
        (``buffered == len(values)``) whose ``future`` gives their outcome.
        """
        if progress is None:
            progress = BulkProgress()
        future = await self.enqueue_many(topic, values, progress=progress, **columns)
        try:
            # Shielded: cancelling the caller must not cancel the call's future,
            # which still reports the records on their way.
            return await asyncio.shield(future)
        except asyncio.CancelledError as exc:
            progress.attach(exc)
            raise
