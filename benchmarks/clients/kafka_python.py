"""kafka-python: ``KafkaProducer.send()`` futures (patterns a and b).

kafka-python is synchronous (no ``await send()``, pattern c) and has no bulk
API (pattern d); those rows are reported as not applicable.
"""

from __future__ import annotations

import sys
from typing import Any

from benchmarks.clients._common import Config, Span, main


def _producer(cfg: Config) -> Any:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        batch_size=cfg.batch_size,
        enable_idempotence=cfg.idempotence,
        compression_type=None if cfg.compression == "none" else cfg.compression,
    )
    producer.send(cfg.topic, cfg.payload()).get(timeout=30)  # warm-up
    return producer


def _check(futures: list[Any], records: int) -> None:
    failed = [f for f in futures if not f.succeeded()]
    if failed:
        raise RuntimeError(f"{len(failed)} of {records} failed, first: {failed[0].exception!r}")


def futures_then_wait(cfg: Config, span: Span) -> None:
    """a: ``send()`` per record, then ``flush()``; b: then ``get()`` 1,000 futures at a time."""
    value = cfg.payload()
    producer = _producer(cfg)
    try:
        span.start()
        send = producer.send
        topic = cfg.topic
        futures = [send(topic, value) for _ in range(cfg.records)]
        if cfg.pattern == "a":
            producer.flush(timeout=120)
        else:
            for i in range(0, len(futures), cfg.chunk):
                for f in futures[i : i + cfg.chunk]:
                    f.get(timeout=120)
        span.stop()
        _check(futures, cfg.records)
    finally:
        producer.close(timeout=10)


PATTERNS = {"a": futures_then_wait, "b": futures_then_wait}

if __name__ == "__main__":
    sys.exit(main("kafka_python", "kafka", PATTERNS))
