"""confluent-kafka (librdkafka): ``produce()`` + ``poll(0)``, then ``flush()``.

A full local queue raises ``BufferError``; the client then serves delivery
reports until there is room, as librdkafka's documentation recommends.
"""

from __future__ import annotations

import sys

from benchmarks.clients._common import Config, Span, main


def bench(cfg: Config, span: Span) -> None:
    from confluent_kafka import KafkaException, Producer

    value = cfg.payload()
    producer = Producer(
        {
            "bootstrap.servers": cfg.bootstrap,
            "linger.ms": cfg.linger_ms,
            "acks": "all",
            "batch.size": cfg.batch_size,
            "enable.idempotence": cfg.idempotence,
        }
    )
    delivered = 0
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            errors.append(err)

    producer.produce(cfg.topic, value, on_delivery=on_delivery)  # warm-up
    if producer.flush(30) != 0:
        raise TimeoutError("warm-up record not delivered")
    delivered = 0
    span.start()
    produce = producer.produce
    poll = producer.poll
    topic = cfg.topic
    for _ in range(cfg.records):
        while True:
            try:
                produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.005)
        poll(0)
    remaining = producer.flush(120)
    span.stop()
    if errors:
        raise KafkaException(errors[0])
    if remaining or delivered != cfg.records:
        raise RuntimeError(f"{delivered} of {cfg.records} delivered, {remaining} still queued")


if __name__ == "__main__":
    sys.exit(main("confluent", "confluent_kafka", bench))
