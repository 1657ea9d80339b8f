"""An event ingest service on aiohttp and aioproducer.

    pip install 'aioproducer[aiohttp,prometheus]'
    python examples/aiohttp_service.py                       # embedded broker, port 8080
    python examples/aiohttp_service.py --bootstrap kafka:9092 --key-field user_id
    curl -XPOST localhost:8080/events/clicks -d '{"user_id": 7, "page": "/"}' \\
         -H 'Content-Type: application/json'

Routes:

* ``POST /events/{topic}``: a JSON object, a JSON array of objects, or an
  NDJSON stream (``Content-Type: application/x-ndjson``, one object a line).
  The whole request is read and validated before anything is produced, so a
  malformed request (400) or an oversized event (413) produces nothing. Each
  event is keyed by the field ``--key-field`` (unkeyed when absent). The answer
  is ``200 {"results": [{"partition": p, "offset": o}, ...]}`` once every event
  is acknowledged, or, with ``--fire-and-forget``, ``202 {"accepted": n}`` as
  soon as the events are buffered (delivery failures are logged and counted).
* Backpressure reaches the client: when the producer's buffer stays full for
  ``max_block_ms`` the answer is ``503`` with ``Retry-After``. Its body's
  ``accepted`` says how many leading events were taken before that (they will
  still be delivered); resend the others.
* A request waits at most ``--produce-timeout`` seconds (default 5) for its
  events to be buffered and acknowledged; past that the answer is ``503`` with
  ``Retry-After``, even while the producer keeps retrying within its much
  longer ``delivery_timeout_ms``. Events not yet acknowledged then may still be
  delivered: a client that resends them may write them twice.
* ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259): a request
  holding one is ``400``.
* ``GET /health``: 200 when a broker answers a metadata request within
  ``health_timeout`` seconds, else 503.
* ``GET /metrics``: the producer's metrics and the service's counters in the
  Prometheus text format.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

try:
    from asyncio import timeout_at
except ImportError:  # Python 3.10
    from async_timeout import timeout_at  # type: ignore[no-redef,assignment]

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.engine.validation import check_topic
from aioproducer.integrations.aiohttp import PRODUCER, setup_producer
from aioproducer.telemetry.prometheus import register as register_metrics

log = logging.getLogger("ingest")

NDJSON = "application/x-ndjson"
JSON_TYPES = ("application/json", "text/json", "")


@dataclass(frozen=True)
class Settings:
    """What the service does with a request (the producer is configured apart)."""

    key_field: str | None = "id"
    fire_and_forget: bool = False
    max_event_bytes: int = 64 * 1024
    max_body_bytes: int = 8 * 1024 * 1024
    retry_after_s: int = 1
    health_timeout_s: float = 2.0
    #: Bound on a request's wait for buffer space and acknowledgements, in seconds.
    produce_timeout_s: float = 5.0


class IngestMetrics:
    """The service's own counters, beside the producer's in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.accepted = Counter(
            "ingest_events_accepted", "Events buffered for delivery", registry=registry
        )
        self.delivered = Counter(
            "ingest_events_delivered", "Events acknowledged by the cluster", registry=registry
        )
        self.failed = Counter(
            "ingest_events_failed", "Events whose delivery failed", registry=registry
        )
        self.rejected = Counter(
            "ingest_requests_rejected",
            "Requests answered with an error",
            ["status"],
            registry=registry,
        )

    def watch(self, fut: asyncio.Future[RecordMetadata], topic: str) -> None:
        """Count (and log a failure of) a record whose answer the client will not see."""

        def done(f: asyncio.Future[RecordMetadata]) -> None:
            exc = f.exception()
            if exc is None:
                self.delivered.inc()
            else:
                self.failed.inc()
                log.warning("delivery to %r failed: %s", topic, exc)

        fut.add_done_callback(done)


REGISTRY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)
METRICS: web.AppKey[IngestMetrics] = web.AppKey("metrics", IngestMetrics)
SETTINGS: web.AppKey[Settings] = web.AppKey("settings", Settings)

Event = tuple[bytes | None, bytes]  # (key, value)


class TooLarge(web.HTTPClientError):
    """413, without aiohttp's HTTPRequestEntityTooLarge's size arguments."""

    status_code = 413


def _error(cls: type[web.HTTPException], message: str, **extra: Any) -> web.HTTPException:
    headers = extra.pop("headers", None)
    body = json.dumps({"error": message, **extra})
    return cls(text=body, content_type="application/json", headers=headers)


# -- reading and validating a request -------------------------------------------------


def _encode(event: Any, where: str, settings: Settings) -> Event:
    if not isinstance(event, dict):
        raise _error(web.HTTPBadRequest, f"{where}: an event must be a JSON object")
    key: bytes | None = None
    if settings.key_field is not None:
        raw = event.get(settings.key_field)
        if isinstance(raw, str):
            key = raw.encode()
        elif isinstance(raw, (int, float, bool)):
            key = json.dumps(raw).encode()
        elif raw is not None:
            raise _error(
                web.HTTPBadRequest, f"{where}: key field {settings.key_field!r} must be a scalar"
            )
    value = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
    size = len(value) + (len(key) if key else 0)
    if size > settings.max_event_bytes:
        raise _error(
            TooLarge,
            f"{where} is {size} bytes, over the limit of {settings.max_event_bytes}",
        )
    return key, value


def _refuse_constant(name: str) -> Any:
    # Python's json module reads NaN, Infinity and -Infinity, which JSON
    # (RFC 8259, section 6) does not allow and other consumers cannot parse.
    raise ValueError(f"{name} is not a JSON number")


def _parse(data: bytes | bytearray, where: str) -> Any:
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _error(web.HTTPBadRequest, f"{where}: invalid JSON ({exc})") from None


async def _read_ndjson(request: web.Request, settings: Settings) -> list[Event]:
    """Read an NDJSON body line by line, with the body and line sizes bounded as it arrives."""
    events: list[Event] = []
    pending = bytearray()
    total = line_no = 0

    def take(line: bytes | bytearray) -> None:
        nonlocal line_no
        line_no += 1
        if line.strip():
            where = f"line {line_no}"
            events.append(_encode(_parse(line, where), where, settings))

    async for chunk in request.content.iter_any():
        total += len(chunk)
        if total > settings.max_body_bytes:
            raise _error(TooLarge, f"body over {settings.max_body_bytes} bytes")
        pending += chunk
        *lines, rest = pending.split(b"\n")
        for line in lines:
            take(line)
        pending = bytearray(rest)
        if len(pending) > 2 * settings.max_event_bytes:  # JSON text above the event limit
            raise _error(
                TooLarge,
                f"line {line_no + 1} is over the limit of {settings.max_event_bytes} bytes",
            )
    take(pending)
    return events


async def read_events(request: web.Request, settings: Settings) -> list[Event]:
    """Every event of the request, validated and encoded; raises an HTTP error otherwise."""
    if request.content_type == NDJSON:
        events = await _read_ndjson(request, settings)
    elif request.content_type in JSON_TYPES:
        try:
            data = await request.read()  # bounded by the application's client_max_size
        except web.HTTPRequestEntityTooLarge:
            raise _error(TooLarge, f"body over {settings.max_body_bytes} bytes") from None
        body = _parse(data, "body")
        items = body if isinstance(body, list) else [body]
        events = [_encode(e, f"event {i}", settings) for i, e in enumerate(items)]
    else:
        raise _error(
            web.HTTPUnsupportedMediaType,
            f"send application/json or {NDJSON}, not {request.content_type}",
        )
    if not events:
        raise _error(web.HTTPBadRequest, "the request holds no event")
    return events


# -- producing --------------------------------------------------------------------------


def _status_for(exc: BaseException) -> type[web.HTTPException]:
    if isinstance(exc, errors.RecordTooLargeError):
        return TooLarge
    if isinstance(exc, (errors.KafkaTimeoutError, errors.ProducerClosedError)) or getattr(
        exc, "retriable", False
    ):
        return web.HTTPServiceUnavailable
    return web.HTTPBadGateway


async def post_events(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    metrics = request.app[METRICS]
    producer = request.app[PRODUCER]
    topic = request.match_info["topic"]
    try:
        check_topic(topic)
        events = await read_events(request, settings)
    except errors.InvalidTopicError as exc:
        metrics.rejected.labels("400").inc()
        raise _error(web.HTTPBadRequest, str(exc)) from None
    except web.HTTPException as exc:
        metrics.rejected.labels(str(exc.status)).inc()
        raise

    # One deadline for the whole request: buffering and acknowledgements. The
    # producer's own bounds (max_block_ms, delivery_timeout_ms: 2 min by
    # default) are far longer than an HTTP client should wait.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.produce_timeout_s
    futures: list[asyncio.Future[RecordMetadata]] = []
    try:
        async with timeout_at(deadline):
            for key, value in events:
                futures.append(await producer.enqueue(topic, value, key=key))
    except (errors.KafkaError, asyncio.TimeoutError) as exc:
        # enqueue() is atomic under cancellation: one cut short by the deadline
        # appended nothing. The events already taken stay in the buffer and are
        # delivered: count them like fire-and-forget ones, and tell the client
        # how many they are.
        for fut in futures:
            metrics.watch(fut, topic)
        metrics.accepted.inc(len(futures))
        if isinstance(exc, errors.KafkaError):
            status, message = _status_for(exc), str(exc)
        else:
            status = web.HTTPServiceUnavailable
            message = f"the events were not buffered within {settings.produce_timeout_s} s"
        raise _refusal(request, status, message, accepted=len(futures)) from None
    metrics.accepted.inc(len(futures))

    if settings.fire_and_forget:
        for fut in futures:
            metrics.watch(fut, topic)
        return web.json_response({"accepted": len(futures)}, status=202)

    # asyncio.wait, not gather: neither a cancelled handler nor the deadline
    # may cancel the records.
    try:
        await asyncio.wait(futures, timeout=max(0.0, deadline - loop.time()))
    except asyncio.CancelledError:  # the client went away; the records still count
        for fut in futures:
            metrics.watch(fut, topic)
        raise
    results: list[dict[str, Any]] = []
    first_error: BaseException | None = None
    late = 0
    for fut in futures:
        if not fut.done():
            # Giving up the wait does not take the record back, and neither
            # would cancelling an await of its future: it stays in the
            # producer, which retries it until delivery_timeout_ms, so it may
            # still be delivered (as in Java, where Future.get(timeout) leaves
            # the send in place). A client that resends it may write it twice.
            metrics.watch(fut, topic)
            results.append({"error": "not acknowledged yet", "safe_to_retry": False})
            late += 1
            continue
        error = fut.exception()
        if error is None:
            md = fut.result()
            results.append({"partition": md.partition, "offset": md.offset})
            metrics.delivered.inc()
        else:
            # A record the broker certainly does not hold may be sent again
            # without a duplicate; one that may be in the log may not.
            safe = getattr(error, "may_have_been_written", None) is False
            results.append({"error": str(error), "safe_to_retry": safe})
            metrics.failed.inc()
            first_error = first_error or error
    if first_error is not None:
        raise _refusal(request, _status_for(first_error), str(first_error), results=results)
    if late:
        message = (
            f"{late} of {len(futures)} events were not acknowledged within "
            f"{settings.produce_timeout_s} s; they may still be delivered"
        )
        raise _refusal(request, web.HTTPServiceUnavailable, message, results=results)
    return web.json_response({"results": results})


def _refusal(
    request: web.Request, status: type[web.HTTPException], message: str, **extra: Any
) -> web.HTTPException:
    """The error answer for a request that reached the producer; counted, with Retry-After on 503."""
    request.app[METRICS].rejected.labels(str(status.status_code)).inc()
    if status is web.HTTPServiceUnavailable:
        extra["headers"] = {"Retry-After": str(request.app[SETTINGS].retry_after_s)}
    return _error(status, message, **extra)


async def health(request: web.Request) -> web.Response:
    try:
        brokers = await request.app[PRODUCER].ping(request.app[SETTINGS].health_timeout_s)
    except errors.KafkaError as exc:
        return web.json_response({"status": "unavailable", "error": str(exc)}, status=503)
    return web.json_response({"status": "ok", "brokers": brokers})


async def metrics_text(request: web.Request) -> web.Response:
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


# -- the application ---------------------------------------------------------------------


def create_app(
    producer: Producer | Callable[[], Producer],
    settings: Settings | None = None,
    *,
    close_timeout: float = 10.0,
) -> web.Application:
    """The ingest application; ``producer`` is started and closed with it."""
    settings = settings or Settings()
    app = web.Application(client_max_size=settings.max_body_bytes)
    registry = CollectorRegistry()
    app[SETTINGS] = settings
    app[REGISTRY] = registry
    app[METRICS] = IngestMetrics(registry)
    setup_producer(app, producer, close_timeout=close_timeout)

    async def expose_producer_metrics(app: web.Application) -> AsyncIterator[None]:
        collector = register_metrics(app[PRODUCER], registry)
        yield
        collector.untrack(app[PRODUCER])

    app.cleanup_ctx.append(expose_producer_metrics)  # after the producer: it needs it started
    app.router.add_post("/events/{topic}", post_events)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics_text)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a Kafka cluster (default: start a local broker)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--key-field", default="id", help="event field used as the record key")
    parser.add_argument("--fire-and-forget", action="store_true", help="answer 202 once buffered")
    parser.add_argument(
        "--max-block-ms", type=int, default=5000, help="bound of a 503 under backpressure"
    )
    parser.add_argument(
        "--produce-timeout",
        type=float,
        default=Settings.produce_timeout_s,
        metavar="SECONDS",
        help="bound of a request's wait for its acknowledgements; 503 past it (default 5)",
    )
    parser.add_argument("--linger-ms", type=int, default=5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    from aioproducer.embedded import bootstrap_or_local

    settings = Settings(
        key_field=args.key_field or None,
        fire_and_forget=args.fire_and_forget,
        produce_timeout_s=args.produce_timeout,
    )
    announce = lambda addr: print(f"started a local broker at {addr}", flush=True)
    try:
        with bootstrap_or_local(args.bootstrap, announce=announce) as bootstrap:
            app = create_app(
                lambda: Producer(
                    bootstrap,
                    client_id="ingest",
                    linger_ms=args.linger_ms,
                    max_block_ms=args.max_block_ms,
                ),
                settings,
            )
            web.run_app(app, host=args.host, port=args.port)
    except errors.KafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
