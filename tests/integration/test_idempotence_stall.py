"""Why idempotence is on by default: a broker that stalls while requests are in flight.

100k keyed records; a few hundred milliseconds in, the broker is frozen with
SIGSTOP for 3 s while ``request_timeout_ms`` is 1 s. Requests already on the
wire time out, their connections close, and the batches are sent again. When
the broker wakes up it still reads and writes the first copies from its socket
buffers. With idempotence the broker recognises the second copies by their
sequence numbers and drops them; without it, they are written twice.
Everything is read back with librdkafka.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from aioproducer import Producer
from tests.support.kafka_broker import KafkaBroker
from tests.support.verify import ConsumedRecord, read_records

RECORDS = 100_000
KEYS = 500


async def produce_through_a_stall(
    broker: KafkaBroker, topic: str, idempotent: bool
) -> tuple[int, int]:
    """Produce RECORDS keyed records, freezing the broker for 3 s on the way.

    Returns (records acknowledged, batches retried).
    """
    producer = Producer(
        broker.bootstrap_servers,
        linger_ms=5,
        request_timeout_ms=1000,
        delivery_timeout_ms=60000,
        enable_idempotence=idempotent,
        acks="all",
    )
    retried = 0
    async with producer:
        await producer.partitions_for(topic)

        async def stall() -> None:
            await asyncio.sleep(0.3)
            broker.pause()
            try:
                await asyncio.sleep(3.0)
            finally:
                broker.resume()

        stall_task = asyncio.create_task(stall())
        futures = []
        for i in range(RECORDS):
            futures.append(await producer.enqueue(topic, b"%d" % i, key=b"key-%d" % (i % KEYS)))
            if i % 2000 == 0:
                await asyncio.sleep(0.01)  # spread the sends over the stall
        await stall_task
        await asyncio.wait_for(producer.flush(), 60)
        results = [f.result() for f in futures]  # raises if any record failed
        retried = sum(1 for r in results if r.offset == -1)
    return len(results), retried


def check_order_and_count(records: list[ConsumedRecord]) -> tuple[int, int]:
    """(distinct values, duplicates); asserts nothing is missing and per-key order holds."""
    values = [int(r.value) for r in records]  # type: ignore[arg-type]
    distinct = set(values)
    assert distinct == set(range(RECORDS)), f"missing {len(set(range(RECORDS)) - distinct)}"
    per_key: dict[bytes, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        per_key[r.key].append(int(r.value))  # type: ignore[arg-type]
    for key, seq in per_key.items():
        firsts = list(dict.fromkeys(seq))  # order of first appearance
        assert firsts == sorted(firsts), f"order broken for {key!r}"
    return len(distinct), len(values) - len(distinct)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_idempotent_producer_survives_a_stalled_broker_exactly_once(
    private_broker: KafkaBroker, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(4, bootstrap=private_broker.bootstrap_servers)
    acked, _ = await produce_through_a_stall(private_broker, topic, idempotent=True)
    assert acked == RECORDS
    records = read_records(private_broker.bootstrap_servers, topic, RECORDS, timeout=90)
    distinct, duplicates = check_order_and_count(records)
    assert (distinct, duplicates) == (RECORDS, 0)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_without_idempotence_the_same_stall_writes_duplicates(
    private_broker: KafkaBroker, topic_factory
) -> None:  # type: ignore[no-untyped-def]
    topic = topic_factory(4, bootstrap=private_broker.bootstrap_servers)
    acked, _ = await produce_through_a_stall(private_broker, topic, idempotent=False)
    assert acked == RECORDS
    records = read_records(private_broker.bootstrap_servers, topic, RECORDS, timeout=90, grace=3.0)
    values = [int(r.value) for r in records]  # type: ignore[arg-type]
    assert set(values) == set(range(RECORDS))  # at-least-once: nothing lost
    duplicates = len(values) - len(set(values))
    print(f"non-idempotent run: {duplicates} duplicate records")
    assert duplicates > 0, "the stall should have made retries write some records twice"
