"""The bulk API of :class:`~aioproducer.Producer`: ``enqueue_many`` and ``send_many``.

:class:`BulkProducerMixin` holds the two public methods; ``Producer``
inherits them. The work is :class:`~aioproducer.bulk.appender.BulkAppender`'s (one
encoding pass over a column of records, one future per call), and, with
interceptors configured, :func:`~aioproducer.bulk.intercept.intercepted_enqueue_many`
runs the hooks once per record around it.

Invariants: bad input raises at once and buffers nothing; the call's future
resolves exactly once, to a BulkResult or a BulkSendError naming the failed
records.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from .bulk.intercept import intercepted_enqueue_many
from .bulk.result import BulkResult

if TYPE_CHECKING:
    from .bulk.appender import BulkAppender
    from .config import ProducerConfig
    from .interceptors import InterceptorChain
    from .serializer_prepare import SerializerPreparation

__all__ = ["BulkProducerMixin"]


class BulkProducerMixin:
    """Bulk methods of :class:`~aioproducer.Producer`; not used on its own."""

    if TYPE_CHECKING:  # what Producer provides, for type checkers
        config: ProducerConfig
        _bulk: BulkAppender | None
        _interceptors: InterceptorChain | None
        _prep: SerializerPreparation | None

        def _check_open(self) -> None: ...

    async def enqueue_many(
        self, topic: str, values: Any, *, keys: Any = None, headers: Any = None,
        partition: Any = None, timestamp_ms: Any = None,
    ) -> asyncio.Future[BulkResult]:
        """Buffer many records of ``topic`` in one pass; one future for all (see :mod:`.bulk`).

        ``values``/``keys``: lists of bytes-like or None, or pyarrow binary arrays.
        The future resolves to a BulkResult, or fails with BulkSendError naming
        the failed records. Bad input raises at once and buffers nothing.
        Configured interceptors see every record (see :mod:`.bulk.intercept`).
        """
        self._check_open()
        assert self._bulk is not None
        serializers = (self.config.key_serializer, self.config.value_serializer)
        if self._prep is not None:
            # Schema-aware serializers: the schema id of the topic, once per call,
            # before any record is serialized or buffered.
            await self._prep.prepare(topic)
            self._check_open()
            serializers = self._prep.bound(topic)
        if self._interceptors is not None:
            return await intercepted_enqueue_many(
                self._interceptors,
                functools.partial(self._bulk.enqueue_many, serializers=serializers),
                topic, values, keys, headers, partition, timestamp_ms, serializers,
            )
        return await self._bulk.enqueue_many(
            topic, values, keys, headers, partition, timestamp_ms, serializers=serializers
        )

    async def send_many(self, topic: str, values: Any, **columns: Any) -> BulkResult:
        """:meth:`enqueue_many`, then wait for every record's acknowledgement."""
        return await (await self.enqueue_many(topic, values, **columns))
