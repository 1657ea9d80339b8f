"""confluent-kafka (librdkafka) in every pattern (see ``_common``).

Patterns a, b and d use the classic ``Producer``: ``produce()`` + ``poll(0)``
per record (on ``BufferError`` it serves delivery reports until there is room,
as librdkafka's documentation recommends). librdkafka has no futures: a
delivery callback stands for each record's future. Patterns c and latency use
confluent-kafka's asyncio ``confluent_kafka.aio.AIOProducer``, whose
``produce()`` returns a future per record.
"""

from __future__ import annotations

import sys
from typing import Any

from benchmarks.clients._common import (
    Config,
    NotApplicable,
    Span,
    concurrent_sends,
    main,
    paced_latency,
)


def _conf(cfg: Config) -> dict[str, Any]:
    return {
        "bootstrap.servers": cfg.bootstrap,
        "linger.ms": cfg.linger_ms,
        "acks": "all",
        "batch.size": cfg.batch_size,
        "enable.idempotence": cfg.idempotence,
        "compression.type": cfg.compression,
    }


class _Deliveries:
    """Counts delivery reports; the first error is kept to fail the run."""

    def __init__(self) -> None:
        self.ok = 0
        self.errors: list[object] = []

    def __call__(self, err: object, _msg: object) -> None:
        if err is None:
            self.ok += 1
        else:
            self.errors.append(err)

    def check(self, expected: int, remaining: int) -> None:
        from confluent_kafka import KafkaException

        if self.errors:
            raise KafkaException(self.errors[0])
        if remaining or self.ok != expected:
            raise RuntimeError(f"{self.ok} of {expected} delivered, {remaining} still queued")


def _warm_producer(cfg: Config, conf: dict[str, Any]) -> Any:
    from confluent_kafka import Producer

    producer = Producer(conf)
    producer.produce(cfg.topic, cfg.payload())  # warm-up
    if producer.flush(30) != 0:
        raise TimeoutError("warm-up record not delivered")
    return producer


def _produce_all(producer: Any, cfg: Config, value: bytes, callback: Any) -> None:
    produce = producer.produce
    poll = producer.poll
    topic = cfg.topic
    if callback is None:
        for _ in range(cfg.records):
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    poll(0.005)
            poll(0)
    else:
        for _ in range(cfg.records):
            while True:
                try:
                    produce(topic, value, on_delivery=callback)
                    break
                except BufferError:
                    poll(0.005)
            poll(0)


def callbacks_then_wait(cfg: Config, span: Span) -> None:
    """A delivery callback per record; a: then ``flush()``, b: then ``poll()`` until each
    next 1,000 records are reported."""
    value = cfg.payload()
    producer = _warm_producer(cfg, _conf(cfg))
    deliveries = _Deliveries()
    span.start()
    _produce_all(producer, cfg, value, deliveries)
    if cfg.pattern == "a":
        remaining = producer.flush(120)
    else:
        for target in range(cfg.chunk, cfg.records + cfg.chunk, cfg.chunk):
            target = min(target, cfg.records)
            while deliveries.ok + len(deliveries.errors) < target:
                if producer.poll(120) == 0:
                    raise TimeoutError(f"no delivery report in 120 s ({deliveries.ok} delivered)")
        remaining = len(producer)
    span.stop()
    deliveries.check(cfg.records, remaining)


def produce_poll(cfg: Config, span: Span) -> None:
    """d: the plain ``produce()`` + ``poll(0)`` loop; one producer-wide delivery callback."""
    value = cfg.payload()
    deliveries = _Deliveries()
    producer = _warm_producer(cfg, {**_conf(cfg), "on_delivery": deliveries})
    deliveries.ok = 0  # forget the warm-up
    span.start()
    _produce_all(producer, cfg, value, None)
    remaining = producer.flush(120)
    span.stop()
    deliveries.check(cfg.records, remaining)


def _aio_producer_class() -> Any:
    try:
        from confluent_kafka.aio import AIOProducer
    except ImportError:
        raise NotApplicable("this confluent-kafka has no confluent_kafka.aio.AIOProducer") from None
    return AIOProducer


async def concurrent_send(cfg: Config, span: Span) -> None:
    """c: ``await (await AIOProducer.produce())`` from ``cfg.concurrency`` tasks."""
    value = cfg.payload()
    producer = _aio_producer_class()(_conf(cfg))
    try:
        await (await producer.produce(cfg.topic, value))  # warm-up
        produce = producer.produce
        topic = cfg.topic

        async def send_one() -> None:
            await (await produce(topic, value))

        await concurrent_sends(cfg, span, send_one)
    finally:
        await producer.close()


async def latency(cfg: Config, span: Span) -> dict[str, Any]:
    value = cfg.payload()
    producer = _aio_producer_class()(_conf(cfg))
    try:
        await (await producer.produce(cfg.topic, value))
        produce = producer.produce
        topic = cfg.topic
        return await paced_latency(cfg, span, lambda: produce(topic, value), producer.flush)
    finally:
        await producer.close()


PATTERNS = {
    "a": callbacks_then_wait,
    "b": callbacks_then_wait,
    "c": concurrent_send,
    "d": produce_poll,
    "latency": latency,
}

if __name__ == "__main__":
    sys.exit(main("confluent", "confluent_kafka", PATTERNS))
