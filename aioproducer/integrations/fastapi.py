"""A producer that lives as long as a FastAPI application (extra ``fastapi``).

::

    from fastapi import FastAPI
    from aioproducer import Producer
    from aioproducer.integrations.fastapi import ProducerDep, producer_lifespan, send_within

    app = FastAPI(lifespan=producer_lifespan(lambda: Producer("kafka:9092", linger_ms=5)))

    @app.post("/events")
    async def publish(event: dict, producer: ProducerDep) -> dict:
        md = await send_within(producer, "events", json.dumps(event).encode(), timeout=2.0)
        return {"partition": md.partition, "offset": md.offset}

The producer starts with the application (a cluster that does not answer
within ``max_block_ms`` fails the start-up) and closes when it stops, bounded
by ``close_timeout``: records still pending then fail, so a stuck broker never
holds up a deploy.

A handler should not wait as long as the producer may: ``delivery_timeout_ms``
is two minutes by default. :func:`send_within` bounds the whole send (buffering
and acknowledgement) by the handler's own ``timeout`` and turns every failure
into the HTTP answer it deserves (:func:`status_for`), with ``Retry-After`` on
503 and, in the body, whether the client may resend without a duplicate
(``safe_to_retry``, from the error's ``may_have_been_written``). Giving up the
wait does not take the record back: it stays in the producer and may still be
delivered, as with Java's ``Future.get(timeout)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, cast

from ..errors import missing_extra

try:
    from fastapi import Depends, FastAPI, HTTPException, Request
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "fastapi", "fastapi") from None

from .. import Producer, RecordMetadata, errors

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT",
    "ProducerDep",
    "get_producer",
    "producer_lifespan",
    "run_producer",
    "send_within",
    "status_for",
]

#: Seconds that shutdown gives pending records before failing them.
DEFAULT_CLOSE_TIMEOUT = 10.0

ProducerSource = Producer | Callable[[], Producer]


@asynccontextmanager
async def run_producer(
    app: FastAPI,
    source: ProducerSource,
    *,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
) -> AsyncIterator[Producer]:
    """Start a producer, keep it in ``app.state.producer`` while the block runs, then close it.

    For an application that has a lifespan of its own: ``async with
    run_producer(app, ...)`` inside it. ``source`` is a new (not yet started)
    producer or a callable building one inside the application's loop.
    """
    if close_timeout < 0:
        raise ValueError(f"close_timeout must be >= 0, got {close_timeout!r}")
    producer = source() if callable(source) and not isinstance(source, Producer) else source
    if not isinstance(producer, Producer):
        raise TypeError(f"expected a Producer, got {type(producer).__name__}")
    await producer.start()
    app.state.producer = producer
    try:
        yield producer
    finally:
        await producer.close(timeout=close_timeout)


def producer_lifespan(
    source: ProducerSource,
    *,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A ``lifespan`` for ``FastAPI(lifespan=...)`` that runs a producer (see :func:`run_producer`)."""
    if close_timeout < 0:
        raise ValueError(f"close_timeout must be >= 0, got {close_timeout!r}")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with run_producer(app, source, close_timeout=close_timeout):
            yield

    return lifespan


def get_producer(request: Request) -> Producer:
    """The application's producer (a FastAPI dependency; ``app.state.producer``)."""
    producer = getattr(request.app.state, "producer", None)
    if producer is None:
        raise RuntimeError(
            "no producer in app.state.producer: give the app "
            "FastAPI(lifespan=producer_lifespan(...)) or run_producer(app, ...) in its lifespan"
        )
    if not isinstance(producer, Producer):
        raise TypeError(f"app.state.producer is a {type(producer).__name__}, not a Producer")
    return producer


#: A handler's parameter ``producer: ProducerDep`` receives the application's producer.
ProducerDep = Annotated[Producer, Depends(get_producer)]


def status_for(exc: BaseException) -> int:
    """The HTTP status for a send that failed with ``exc``.

    413 for a record the producer or broker refuses as too large; 400 for a
    topic or partition that cannot take records; 503 (try again later) when
    the producer is closing, the send timed out or the broker's error is
    retriable; 502 for any other broker refusal.
    """
    if isinstance(exc, errors.RecordTooLargeError):
        return 413
    if isinstance(exc, (errors.InvalidTopicError, errors.InvalidPartitionError)):
        return 400
    if isinstance(
        exc, (errors.KafkaTimeoutError, errors.ProducerClosedError, asyncio.TimeoutError)
    ):
        return 503
    if getattr(exc, "retriable", False):
        return 503
    return 502


# Errors of the program, not of the cluster: a 5xx answer with safe_to_retry would hide them.
_PROGRAMMING_ERRORS = (
    errors.SerializationError,
    errors.IllegalStateError,
    errors.ConfigurationError,
)


def _refusal(status: int, message: str, safe_to_retry: bool, retry_after: int) -> HTTPException:
    headers = {"Retry-After": str(retry_after)} if status == 503 else None
    detail = {"error": message, "safe_to_retry": safe_to_retry}
    return HTTPException(status, detail, headers=headers)


async def send_within(
    producer: Producer,
    topic: str,
    value: Any,
    *,
    timeout: float,
    key: Any = None,
    partition: int | None = None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    timestamp_ms: int | None = None,
    retry_after: int = 1,
) -> RecordMetadata:
    """Send one record and wait at most ``timeout`` seconds in all for its acknowledgement.

    Raises ``HTTPException`` instead of the producer's errors: its status is
    :func:`status_for`'s, with ``Retry-After: retry_after`` on 503, and its
    detail ``{"error": ..., "safe_to_retry": ...}``: ``safe_to_retry`` is
    true only when the broker certainly does not hold the record (it was
    never buffered, or the broker refused it without writing it).
    A record not acknowledged in time stays in the producer and may still be
    delivered (503, ``safe_to_retry`` false). Programming errors (a value
    the serializer rejects, a wrong argument type) are raised as they are.
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        # enqueue() is atomic under cancellation: cut short by the timeout,
        # it buffered nothing.
        handle = await asyncio.wait_for(
            producer.enqueue(
                topic,
                value,
                key=key,
                partition=partition,
                headers=headers,
                timestamp_ms=timestamp_ms,
            ),
            timeout,
        )
    except asyncio.TimeoutError:
        raise _refusal(
            503, f"the record was not buffered within {timeout} s", True, retry_after
        ) from None
    except errors.KafkaError as exc:
        if isinstance(exc, _PROGRAMMING_ERRORS):
            raise
        raise _refusal(status_for(exc), str(exc), True, retry_after) from None
    # asyncio.wait, not wait_for: neither the deadline nor a cancelled
    # handler may cancel the record (the handle's wait stops, the record not).
    # A record handle is a Future to asyncio, though not its subclass.
    waited = cast("asyncio.Future[RecordMetadata]", handle)
    await asyncio.wait([waited], timeout=max(0.0, deadline - loop.time()))
    if not handle.done():
        message = f"the record was not acknowledged within {timeout} s; it may still be delivered"
        raise _refusal(503, message, False, retry_after)
    error = handle.exception()
    if error is not None:
        safe = getattr(error, "may_have_been_written", None) is False
        raise _refusal(status_for(error), str(error), safe, retry_after) from None
    return handle.result()
