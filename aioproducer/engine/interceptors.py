"""Producer hooks, after Java's ``ProducerInterceptor``.

An interceptor is any object with one or both of:

* ``on_send(record: ProducerRecord) -> ProducerRecord``, called in
  ``enqueue`` before the key and value are serialized; it may return a changed
  record (another partition, extra headers);
* ``on_acknowledgement(metadata: RecordMetadata, error: BaseException | None)``,
  called once per record when it is acknowledged or fails (also when
  ``enqueue`` itself fails, with offset -1), from the event loop.

Hooks run in the order given. A hook that raises never breaks delivery: as in
Java, the exception is logged (at most one line per hook and method every
``LOG_INTERVAL`` seconds, with how many were suppressed) and counted
(``interceptor-error-total`` in ``producer.metrics()``), and ``on_send``
carries on with the record the failing hook was given. Hooks must be quick:
they run on the event loop for every record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..telemetry.logs import ClientLogger, RateLimiter
from ..types import ProducerInterceptor, ProducerRecord, RecordMetadata
from .record_handle import RecordHandle

__all__ = [
    "InterceptorChain",
    "ProducerInterceptor",
    "ProducerRecord",
    "failed_metadata",
    "intercepted_enqueue",
]

LOG_INTERVAL = 10.0


class InterceptorChain:
    """Runs the configured hooks, isolating the producer from their failures."""

    def __init__(
        self,
        interceptors: Sequence[Any],
        logger: ClientLogger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send_hooks = [h for h in interceptors if callable(getattr(h, "on_send", None))]
        self._ack_hooks = [
            h for h in interceptors if callable(getattr(h, "on_acknowledgement", None))
        ]
        self._log = logger
        self._clock = clock
        self._limiter = RateLimiter(LOG_INTERVAL)
        self.errors = 0

    def __repr__(self) -> str:
        return (
            f"<InterceptorChain on_send={len(self._send_hooks)} "
            f"on_acknowledgement={len(self._ack_hooks)} errors={self.errors}>"
        )

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        for hook in self._send_hooks:
            try:
                changed = hook.on_send(record)
                if not isinstance(changed, ProducerRecord):
                    raise TypeError(
                        f"on_send must return a ProducerRecord, got {type(changed).__name__}"
                    )
            except Exception as exc:  # noqa: BLE001 - a hook never breaks delivery
                self._hook_failed(hook, "on_send", exc, record.topic)
            else:
                record = changed
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        for hook in self._ack_hooks:
            try:
                hook.on_acknowledgement(metadata, error)
            except Exception as exc:  # noqa: BLE001 - a hook never breaks delivery
                self._hook_failed(hook, "on_acknowledgement", exc, metadata.topic)

    def acknowledge_when_done(self, future: RecordHandle, record: ProducerRecord) -> None:
        """Call ``on_acknowledgement`` once ``future`` resolves."""
        if not self._ack_hooks:
            return

        def done(fut: RecordHandle) -> None:
            if fut.cancelled():
                # The caller stopped waiting; the record's outcome is unknown here.
                self.on_acknowledgement(failed_metadata(record), asyncio.CancelledError())
            elif fut.exception() is not None:
                self.on_acknowledgement(failed_metadata(record), fut.exception())
            else:
                self.on_acknowledgement(fut.result(), None)

        future.add_done_callback(done)

    def _hook_failed(self, hook: Any, method: str, exc: Exception, topic: str) -> None:
        self.errors += 1
        name = type(hook).__name__
        suppressed = self._limiter.allow((name, method), self._clock())
        if suppressed is None:
            return
        more = f" ({suppressed} more since the last report)" if suppressed else ""
        self._log.warning(
            "interceptor %s.%s failed for topic %r: %r%s; the record goes on unchanged",
            name,
            method,
            topic,
            exc,
            more,
            exc_info=exc,
        )


def failed_metadata(record: ProducerRecord) -> RecordMetadata:
    """What Java hands ``onAcknowledgement`` for a failed record: no offset."""
    partition = -1 if record.partition is None else record.partition
    return RecordMetadata(record.topic, partition, -1, -1, -1, -1)


async def intercepted_enqueue(
    chain: InterceptorChain,
    enqueue: Callable[..., Awaitable[RecordHandle]],
    topic: str,
    value: Any,
    *args: Any,
    **options: Any,
) -> RecordHandle:
    """``enqueue`` with the chain's hooks around it (a producer with interceptors uses this).

    ``args`` and ``options`` are enqueue's options, by position or by name,
    which ProducerRecord's fields mirror in the same order.
    """
    record = chain.on_send(ProducerRecord(topic, value, *args, **options))
    try:
        fut = await enqueue(
            record.topic,
            record.value,
            key=record.key,
            partition=record.partition,
            timestamp_ms=record.timestamp_ms,
            headers=record.headers,
        )
    except Exception as exc:
        chain.on_acknowledgement(failed_metadata(record), exc)
        raise
    chain.acknowledge_when_done(fut, record)
    return fut
