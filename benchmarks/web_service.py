"""The aiohttp ingest service that :mod:`benchmarks.web_load` loads (its role "serve").

``examples/aiohttp_service.py``'s handler in acknowledged mode, on aioproducer or,
behind a thin adapter, on aiokafka, with the same producer settings
(:class:`ProducerSettings`); it prints ``READY <url>`` once it listens and runs
until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import web_profile

__all__ = ["IMPLS", "AiokafkaAdapter", "ProducerSettings", "build_app", "serve"]

IMPLS = ("aioproducer", "aiokafka")


@dataclass(frozen=True)
class ProducerSettings:
    """The producer settings both implementations get, spelled for each."""

    acks: str  # "all" or "1"
    linger_ms: int
    batch_size: int
    compression: str
    idempotence: bool
    # Produce requests in flight per broker, aioproducer's only: aiokafka
    # always sends the next request to a broker once the last one is answered,
    # as 1 here does (more in flight: fewer records per request).
    max_in_flight: int = 5

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProducerSettings:
        return cls(
            args.acks,
            args.linger_ms,
            args.batch_size,
            args.compression,
            args.idempotence == "on",
            args.max_in_flight,
        )

    def cli(self) -> list[str]:
        """The options that give a service process these settings."""
        return [
            "--acks",
            self.acks,
            "--linger-ms",
            str(self.linger_ms),
            "--batch-size",
            str(self.batch_size),
            "--compression",
            self.compression,
            "--idempotence",
            "on" if self.idempotence else "off",
            "--max-in-flight",
            str(self.max_in_flight),
        ]

    def describe(self) -> str:
        return (
            f"acks={self.acks} linger_ms={self.linger_ms} batch_size={self.batch_size} "
            f"compression={self.compression} "
            f"idempotence={'on' if self.idempotence else 'off'} "
            f"requests in flight per broker: aioproducer {self.max_in_flight}, aiokafka 1"
        )

    def aioproducer_kwargs(self) -> dict[str, Any]:
        return {
            "acks": self.acks,
            "linger_ms": self.linger_ms,
            "batch_size": self.batch_size,
            "compression": self.compression,
            "enable_idempotence": self.idempotence,
            "max_in_flight_requests_per_connection": self.max_in_flight,
        }

    def aiokafka_kwargs(self) -> dict[str, Any]:
        return {
            "acks": "all" if self.acks == "all" else int(self.acks),
            "linger_ms": self.linger_ms,
            "max_batch_size": self.batch_size,
            "compression_type": None if self.compression == "none" else self.compression,
            "enable_idempotence": self.idempotence,
        }


# -- the service (role "serve") ----------------------------------------------------------------


class AiokafkaAdapter:
    """aiokafka's producer with the two calls the ingest handler makes."""

    def __init__(self, bootstrap: str, settings: ProducerSettings) -> None:
        from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **settings.aiokafka_kwargs())

    async def start(self) -> None:
        await self._producer.start()

    async def close(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._producer.stop(), timeout)

    async def enqueue(self, topic: str, value: bytes, *, key: bytes | None = None) -> Any:
        return await self._producer.send(topic, value, key=key)  # a future of the metadata


def build_app(impl: str, bootstrap: str, settings: ProducerSettings) -> Any:
    from aiohttp import web
    from prometheus_client import CollectorRegistry

    from aioproducer import Producer
    from examples import aiohttp_service as svc

    if impl == "aioproducer":
        return svc.create_app(
            lambda: Producer(bootstrap, **settings.aioproducer_kwargs()), svc.Settings()
        )
    # The same handler and settings; only the producer differs.
    app = web.Application(client_max_size=svc.Settings().max_body_bytes)
    registry = CollectorRegistry()
    app[svc.SETTINGS] = svc.Settings()
    app[svc.REGISTRY] = registry
    app[svc.METRICS] = svc.IngestMetrics(registry)

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        adapter = AiokafkaAdapter(bootstrap, settings)
        await adapter.start()
        app[svc.PRODUCER] = adapter  # type: ignore[assignment,misc]  # duck-typed for the handler
        yield
        await adapter.close(10)

    app.cleanup_ctx.append(lifetime)
    app.router.add_post("/events/{topic}", svc.post_events)
    return app


async def serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    counters = web_profile.Counters() if args.count else None
    if counters is not None:
        counters.install(args.impl)
    app = build_app(args.impl, args.bootstrap, ProducerSettings.from_args(args))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    host, port = runner.addresses[0][:2]
    sampler = web_profile.CpuSampler() if args.cpu_profile else None
    if sampler is not None:  # on CPU time: nothing is sampled while the service idles
        sampler.start()
    print(f"READY http://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if sampler is not None:
        sampler.stop(Path(args.cpu_profile))
    if counters is not None:
        print(counters.report(), flush=True)
    await runner.cleanup()
