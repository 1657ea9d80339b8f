"""Log lines name the producer and the broker; a broker flap is one warning, not a flood."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio


async def test_a_dropped_connection_under_traffic_logs_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    async with MockCluster(brokers=1, default_partitions=4) as cluster:
        broker = cluster.broker_ids[0]
        async with Producer(
            cluster.bootstrap_servers, client_id="flappy", linger_ms=1, retry_backoff_ms=10
        ) as p:
            await p.send("events", b"warm-up")
            futures = []
            for round_ in range(4):
                futures += [await p.enqueue("events", b"%d-%d" % (round_, i)) for i in range(500)]
                if round_ == 1:  # drop the connections while batches are in flight
                    cluster.drop_connections(broker)
                await asyncio.sleep(0.01)
            await asyncio.wait_for(p.flush(), 30)
            assert all(f.result().offset >= 0 for f in futures)
            lost_total = next(
                v for m, v in p.metrics().items() if m.name == "connection-close-total"
            )
        assert len(cluster.records("events")) >= 2001
    ours = [
        r for r in caplog.records if r.name.startswith("aioproducer.") and "testing" not in r.name
    ]
    warnings = [r for r in ours if r.levelno >= logging.WARNING]
    lost = [r.getMessage() for r in warnings if "lost the connection" in r.getMessage()]
    back = [r.getMessage() for r in ours if "reconnected to" in r.getMessage()]
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    # One warning naming the broker, and one line when it is back; nothing per batch.
    assert len(lost) == 1 and len(warnings) == 1, [r.getMessage() for r in warnings]
    assert f"[flappy] lost the connection to broker {broker} ({host}:{port})" in lost[0]
    assert len(back) == 1
    assert lost_total >= 1
    # Every line of the producer names it, as text and as a record attribute.
    assert ours and all(r.getMessage().startswith("[flappy] ") for r in ours)
    assert all(getattr(r, "client_id", None) == "flappy" for r in ours)
    assert all(getattr(r, "broker", None) == broker for r in warnings)
