"""A coordinator that is still loading is retried quietly, as Java does; other refusals warn."""

from __future__ import annotations

import logging

import pytest

from aioproducer import Producer, errors
from aioproducer.protocol.apis import INIT_PRODUCER_ID
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio


def _pid_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "could not get a producer id" in r.getMessage()
    ]


async def test_a_loading_coordinator_is_retried_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        # What a broker that has just started answers for a moment.
        cluster.fail_api(INIT_PRODUCER_ID.key, errors.CoordinatorLoadInProgressError.code, count=2)
        async with Producer(cluster.bootstrap_servers, retry_backoff_ms=10) as p:
            md = await within(p.send("t", b"v"), 30, "send")
        assert md.offset == 0
        assert cluster.request_count(INIT_PRODUCER_ID.key) == 3
    assert _pid_warnings(caplog) == []
    assert any("could not get a producer id" in r.getMessage() for r in caplog.records)


async def test_any_other_refusal_of_a_producer_id_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        cluster.fail_api(INIT_PRODUCER_ID.key, errors.UnknownServerError.code, count=1)
        async with Producer(cluster.bootstrap_servers, retry_backoff_ms=10) as p:
            await within(p.send("t", b"v"), 30, "send")
    assert len(_pid_warnings(caplog)) == 1
