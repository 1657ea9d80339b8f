"""The SCRAM iteration count is the broker's choice: bounded as Kafka's, hashed off the loop.

Kafka's ScramMechanism allows 4096-16384 iterations; a count outside is
refused with a typed authentication error before any hashing (ten million
iterations took seconds on the event loop). Within the range the hash runs in
a worker thread: a probe task keeps running while it is computed.
"""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from aioproducer import Producer, RecordMetadata, errors
from aioproducer.sasl.scram import ScramExchange
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

USERS = {"alice": "alice-Secret-1"}
NONCE = "clientnonce"
SALT = base64.b64encode(b"0123456789abcdef").decode()


def _producer(cluster: MockCluster, mechanism: str) -> Producer:
    return Producer(
        cluster.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        max_block_ms=20_000,
    )


@pytest.mark.parametrize("iterations", [10_000_000, 16_385, 4095, 1])
async def test_a_count_outside_kafkas_range_is_refused_at_once(iterations: int) -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=["SCRAM-SHA-256"], users=USERS, scram_iterations=iterations
    ) as cluster:
        producer = _producer(cluster, "SCRAM-SHA-256")
        started = time.monotonic()
        try:
            with pytest.raises(
                errors.SaslAuthenticationError, match=f"asks for {iterations} iterations"
            ):
                await within(producer.start(), 30, "start")
            elapsed = time.monotonic() - started
        finally:
            await within(producer.close(), 10, "close")
        # A refusal, final and typed, long before max_block_ms (20 s); hashing
        # ten million iterations alone takes seconds.
        assert elapsed < 5.0, elapsed
        assert cluster.sasl_authentications == 0


@pytest.mark.parametrize("iterations", [4096, 16384])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_counts_kafka_uses_work(mechanism: str, iterations: int) -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=[mechanism], users=USERS, scram_iterations=iterations
    ) as cluster:
        producer = _producer(cluster, mechanism)
        try:
            await within(producer.start(), 10, "start")
            metadata = await within(producer.send("iterations", b"v"), 10, "send")
        finally:
            await within(producer.close(), 10, "close")
        assert isinstance(metadata, RecordMetadata)
        assert cluster.sasl_failures == 0


@pytest.mark.parametrize("iterations", [10_000_000, 16_385, 4095])
async def test_the_exchange_refuses_before_hashing(iterations: int) -> None:
    exchange = ScramExchange("SCRAM-SHA-512", "alice", "pw", nonce=NONCE)
    await exchange.first()
    started = time.monotonic()
    with pytest.raises(errors.SaslAuthenticationError, match="4096-16384"):
        await exchange.step(f"r={NONCE}server,s={SALT},i={iterations}".encode())
    assert time.monotonic() - started < 1.0


async def test_the_loop_keeps_running_during_the_hash() -> None:
    loop = asyncio.get_running_loop()
    hashing = False
    ticks_while_hashing = 0
    max_gap = 0.0

    async def probe() -> None:
        nonlocal ticks_while_hashing, max_gap
        last = loop.time()
        while True:
            await asyncio.sleep(0)
            now = loop.time()
            max_gap = max(max_gap, now - last)
            last = now
            if hashing:
                ticks_while_hashing += 1

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)
    try:
        for _ in range(3):
            exchange = ScramExchange("SCRAM-SHA-512", "alice", "pw", nonce=NONCE)
            await exchange.first()
            max_gap = 0.0
            ticks_before = ticks_while_hashing
            hashing = True
            final = await exchange.step(f"r={NONCE}server,s={SALT},i=16384".encode())
            hashing = False
            assert final is not None and final.startswith(b"c=biws,")
            # While the exchange waited for the hash, the probe ran: the hash
            # was not computed on the loop. (Inline, it gets no turn at all.)
            assert ticks_while_hashing > ticks_before
            # No long stall either (a generous bound for a busy machine).
            assert max_gap < 0.5, max_gap
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
