"""Metadata v13's top-level error code (KIP-1102), through the mock's real sockets.

REBOOTSTRAP_REQUIRED sends the next Metadata request to the bootstrap servers
at once (not after ``metadata_recovery_rebootstrap_trigger_ms``); any other
top-level error fails that refresh, which is retried after the backoff, and
never replaces the metadata the client holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from aioproducer import errors
from aioproducer.protocol.generated import MetadataRequest, MetadataResponse
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from aioproducer.testing.mock.log import code_of
from tests.support.aio import within
from tests.support.producers import make_producer

METADATA = 3
REBOOTSTRAP_REQUIRED = code_of(errors.RebootstrapRequiredError)
UNKNOWN_SERVER_ERROR = code_of(errors.UnknownServerError)

SETTINGS: dict[str, Any] = {
    "linger_ms": 0,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 200,
    "request_timeout_ms": 5000,
    "delivery_timeout_ms": 60_000,
    "max_block_ms": 60_000,
    # Far beyond any test: a rebootstrap seen here is the answer's doing, not KIP-899's.
    "metadata_recovery_rebootstrap_trigger_ms": 3_600_000,
}


async def _produce_rounds(producer: Any, topic: str, count: int) -> list[bytes]:
    values = [f"{topic}-{i}".encode() for i in range(count)]
    futures = [await producer.enqueue(topic, v) for v in values]
    results = await within(_all(futures), 60, f"records to {topic}")
    assert all(r.topic == topic for r in results), results
    return values


async def _all(futures: list[Any]) -> list[Any]:
    return [await f for f in futures]


@pytest.mark.asyncio
async def test_rebootstrap_required_sends_metadata_to_the_bootstrap_servers() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        alias = await cluster.add_bootstrap_listener()
        versions: list[int] = []

        def seen(request: MetadataRequest, ctx: RequestContext) -> None:
            versions.append(ctx.api_version)

        cluster.intercept(METADATA, seen)
        async with make_producer(alias, SETTINGS) as producer:
            sent = await _produce_rounds(producer, "t", 20)
            bootstrapped = cluster.bootstrap_listener_connections
            assert bootstrapped >= 1
            # The next Metadata request (for a topic the client does not know yet)
            # goes to a real broker, which answers that the client must rebootstrap.
            cluster.fail_api(METADATA, REBOOTSTRAP_REQUIRED, count=1)
            sent += await _produce_rounds(producer, "u", 20)
            sent += await _produce_rounds(producer, "t", 20)
            assert cluster.bootstrap_listener_connections > bootstrapped
        assert versions and set(versions) == {13}, versions
        written = [r.value or b"" for r in cluster.records("t")] + [
            r.value or b"" for r in cluster.records("u")
        ]
        # Every record exactly once.
        assert sorted(written) == sorted(sent)


@pytest.mark.asyncio
async def test_rebootstrap_required_without_the_rebootstrap_strategy_retries_the_brokers() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        alias = await cluster.add_bootstrap_listener()
        async with make_producer(alias, SETTINGS, metadata_recovery_strategy="none") as producer:
            sent = await _produce_rounds(producer, "t", 10)
            bootstrapped = cluster.bootstrap_listener_connections
            cluster.fail_api(METADATA, REBOOTSTRAP_REQUIRED, count=2)
            sent += await _produce_rounds(producer, "u", 10)
            # No new bootstrap: the refusals were retried on the known brokers.
            assert cluster.bootstrap_listener_connections == bootstrapped
            assert not cluster.faults.api_failures, "the scripted answers were not all given"
        written = [r.value or b"" for r in cluster.records("t")] + [
            r.value or b"" for r in cluster.records("u")
        ]
        assert sorted(written) == sorted(sent)


@pytest.mark.asyncio
async def test_other_top_level_error_fails_the_refresh_and_keeps_the_metadata() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        async with make_producer(cluster, SETTINGS) as producer:
            sent = await _produce_rounds(producer, "t", 10)
            assert producer._running is not None
            client = producer._running.client
            assert client is not None
            known = client.snapshot.brokers
            assert len(known) == 2
            refused: list[int] = []

            def refuse(request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
                refused.append(ctx.api_version)
                return MetadataResponse(throttle_time_ms=0, error_code=UNKNOWN_SERVER_ERROR)

            cluster.intercept(METADATA, refuse)
            with pytest.raises(errors.NoBrokersAvailableError, match="top-level error"):
                # (A refresh already under way when the intercept was set may answer first.)
                for _ in range(3):
                    await client.probe(30)
            assert refused and set(refused) == {13}, refused
            # The refusal named no brokers: the client still knows both.
            assert client.snapshot.brokers == known
            cluster.intercept(METADATA, None)
            sent += await _produce_rounds(producer, "u", 10)
        written = [r.value or b"" for r in cluster.records("t")] + [
            r.value or b"" for r in cluster.records("u")
        ]
        assert sorted(written) == sorted(sent)
