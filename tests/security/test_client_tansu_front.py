"""aioproducer through TLS and SASL to a real broker, read back independently.

The session's broker is reached here through :class:`SecureFront`, which
terminates TLS and SASL in front of its plaintext listener (and advertises
itself in metadata), so every connection the producer opens, bootstrap and
data, is secured. The records are read back with confluent-kafka from the
broker directly. Kafka's own TLS and SASL listeners are tested in
``test_kafka_*``.
"""

from __future__ import annotations

import pytest

from aioproducer import Producer, RecordMetadata
from tests.security.client_matrix import CASES, Case, upstream
from tests.support.aio import gather_within, read_back, within
from tests.support.certs import Pki
from tests.support.secure_front import SecureFront

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

RECORDS = 120


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_matrix_through_the_front(
    case: Case, pki: Pki, kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(3)
    async with SecureFront(upstream(kafka_bootstrap), **case.server_kwargs(pki)) as front:
        producer = Producer(front.bootstrap_servers, linger_ms=5, **case.client_kwargs(pki))
        await within(producer.start(), 15, "start")
        try:
            futures = [
                await producer.enqueue(topic, f"{case.name}-{i}".encode(), key=f"k{i % 5}".encode())
                for i in range(RECORDS)
            ]
            results = await gather_within(futures, 30, "delivery")
        finally:
            await within(producer.close(), 15, "close")
        if case.mechanism is not None:
            assert front.sasl_authentications >= 2  # bootstrap and data connection
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    records = await read_back(kafka_bootstrap, topic, RECORDS)
    assert len(records) == RECORDS
    for k in range(5):
        key = f"k{k}".encode()
        assert [r.value for r in records if r.key == key] == [
            f"{case.name}-{i}".encode() for i in range(RECORDS) if i % 5 == k
        ]
    # Offsets the producer reported are where the records are.
    stored = {(r.partition, r.offset): r.value for r in records}
    for i, meta in enumerate(results):
        assert stored[(meta.partition, meta.offset)] == f"{case.name}-{i}".encode()
