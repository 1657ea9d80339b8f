"""kafka-python: ``KafkaProducer.send()`` futures, then ``flush()``."""

from __future__ import annotations

import sys

from benchmarks.clients._common import Config, Span, main


def bench(cfg: Config, span: Span) -> None:
    from kafka import KafkaProducer

    value = cfg.payload()
    producer = KafkaProducer(
        bootstrap_servers=cfg.bootstrap,
        linger_ms=cfg.linger_ms,
        acks="all",
        batch_size=cfg.batch_size,
        # Explicit: kafka-python 3 turns idempotence on by default.
        enable_idempotence=cfg.idempotence,
    )
    try:
        producer.send(cfg.topic, value).get(timeout=30)  # warm-up
        span.start()
        send = producer.send
        topic = cfg.topic
        futures = [send(topic, value) for _ in range(cfg.records)]
        producer.flush(timeout=120)
        span.stop()
        failed = [f for f in futures if not f.succeeded()]
        if failed:
            first = failed[0].exception
            raise RuntimeError(f"{len(failed)} of {cfg.records} failed, first: {first!r}")
    finally:
        producer.close(timeout=10)


if __name__ == "__main__":
    sys.exit(main("kafka_python", "kafka", bench))
