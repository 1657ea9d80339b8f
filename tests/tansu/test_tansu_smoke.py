"""The embedded Tansu broker stays the README's default: its launcher and a smoke test.

The integration suite runs on Apache Kafka; these tests keep the first command of
the README (``aioproducer perf`` on the embedded broker) and the Tansu launcher working.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from aioproducer import Producer
from aioproducer.embedded import LocalBroker
from tests.support.verify import read_records

pytestmark = pytest.mark.integration


def _connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2.0):
        pass


def test_local_broker_start_stop(tansu_binary: str) -> None:
    with LocalBroker(binary=tansu_binary) as broker:
        assert broker.is_running
        assert broker.pid is not None
        os.kill(broker.pid, 0)  # the process exists
        host, port = broker.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) == broker.port
        _connect(broker.port)
        assert broker.log_path.exists()
    assert not broker.is_running
    assert broker.pid is None
    with pytest.raises(ConnectionRefusedError):
        _connect(broker.port)
    assert "listening on" in broker.read_log()
    broker.log_path.unlink()


def test_stop_of_paused_broker_is_bounded(tansu_binary: str) -> None:
    broker = LocalBroker(binary=tansu_binary).start()
    broker.pause()
    started = time.monotonic()
    broker.stop()
    assert time.monotonic() - started < broker.stop_timeout + 5
    assert not broker.is_running
    broker.log_path.unlink()


@pytest.mark.asyncio
async def test_records_round_trip_on_tansu(tansu_bootstrap: str) -> None:
    # Tansu quirks: read back with assign() from offset 0 and count records.
    topic = f"smoke-{os.getpid()}-{time.monotonic_ns()}"
    values = [b"smoke-%d" % i for i in range(200)]
    async with Producer(tansu_bootstrap, linger_ms=5, compression="lz4") as p:
        await p.send(topic, b"warm-up")
        futures = [await p.enqueue(topic, v, key=v) for v in values]
        await p.flush()
    assert all(f.exception() is None for f in futures)
    got = read_records(tansu_bootstrap, topic, expected=len(values) + 1, timeout=30)
    assert sorted(r.value for r in got) == sorted([b"warm-up", *values])


@pytest.mark.asyncio
async def test_transactions_stay_v1_on_tansu(tansu_bootstrap: str) -> None:
    """Tansu finalizes no transaction.version: the v1 protocol, with the
    TRANSACTION_ABORTABLE versions it advertises (EndTxn v4)."""
    topic = f"smoke-txn-{os.getpid()}-{time.monotonic_ns()}"
    async with Producer(tansu_bootstrap, transactional_id=f"tx-{time.monotonic_ns()}") as p:
        await p.init_transactions()
        txn = p._running.txn
        assert txn is not None
        start = txn.producer_identity
        for i in range(3):
            async with p.transaction():
                await p.send(topic, b"t%d" % i)
        await p.begin_transaction()
        await p.send(topic, b"aborted")
        await p.abort_transaction()
        assert not txn.v2 and p._running.client.connections.finalized_features == {}
        assert txn.requests_sent["AddPartitionsToTxn"] >= 4
        assert txn.requests_sent["EndTxn"] >= 4
        assert txn.producer_identity == start  # v1: no epoch bump per transaction
