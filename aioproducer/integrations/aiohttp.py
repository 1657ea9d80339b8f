"""A producer that lives as long as an aiohttp application (extra ``aiohttp``).

::

    from aiohttp import web
    from aioproducer import Producer
    from aioproducer.integrations.aiohttp import PRODUCER, setup_producer

    async def handler(request: web.Request) -> web.Response:
        producer = request.app[PRODUCER]          # typed: Producer
        md = await producer.send("events", await request.read())
        return web.json_response({"partition": md.partition, "offset": md.offset})

    app = web.Application()
    setup_producer(app, lambda: Producer("kafka:9092", linger_ms=5))

The producer is built and started in the application's ``cleanup_ctx``, so a
cluster that cannot be reached within ``max_block_ms`` fails the start-up,
and it is closed on clean-up, after aiohttp has let in-flight handlers finish
(its ``shutdown_timeout``). Closing is bounded by ``close_timeout``: records
still pending then fail with KafkaTimeoutError, so a stuck broker never holds
up a deploy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from ..errors import missing_extra

try:
    from aiohttp import web
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "aiohttp", "aiohttp") from None

from .. import Producer

__all__ = ["DEFAULT_CLOSE_TIMEOUT", "PRODUCER", "producer_context", "setup_producer"]

#: Seconds that clean-up gives pending records before failing them.
DEFAULT_CLOSE_TIMEOUT = 10.0

#: Where :func:`setup_producer` puts the producer: ``request.app[PRODUCER]``.
PRODUCER: web.AppKey[Producer] = web.AppKey("producer", Producer)

ProducerSource = Producer | Callable[[], Producer]


def producer_context(
    source: ProducerSource,
    *,
    key: web.AppKey[Producer] = PRODUCER,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """A ``cleanup_ctx`` entry that starts a producer and stores it under ``key``.

    ``source`` is a new (not yet started) producer or a callable building one;
    a callable is called at start-up, inside the application's event loop.
    """
    if close_timeout < 0:
        raise ValueError(f"close_timeout must be >= 0, got {close_timeout!r}")

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        producer = source() if callable(source) and not isinstance(source, Producer) else source
        if not isinstance(producer, Producer):
            raise TypeError(f"expected a Producer, got {type(producer).__name__}")
        await producer.start()
        app[key] = producer
        try:
            yield
        finally:
            await producer.close(timeout=close_timeout)

    return lifetime


def setup_producer(
    app: web.Application,
    source: ProducerSource,
    *,
    key: web.AppKey[Producer] = PRODUCER,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
) -> web.AppKey[Producer]:
    """Run a producer for ``app``'s lifetime; return the key handlers read it from.

    Entries of ``cleanup_ctx`` start in order and close in reverse, so add the
    producer before anything whose clean-up still produces, and after anything
    it needs (a schema registry client, say). Pass another ``key`` to run
    several producers in one application.
    """
    app.cleanup_ctx.append(producer_context(source, key=key, close_timeout=close_timeout))
    return key
