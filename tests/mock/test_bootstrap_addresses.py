"""A bad bootstrap address says so within seconds, not after max_block_ms of silence.

Through real sockets: a closed port (bound, then released), a name that
cannot resolve (``.invalid`` is reserved for that, RFC 2606), and the
``PROTOCOL://host:port`` and ``[ipv6]:port`` forms against a MockCluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

import pytest

from aioproducer import Producer
from aioproducer.errors import ConfigurationError
from aioproducer.net import broker_connections as broker_connections
from aioproducer.testing import MockCluster
from tests.support.aio import closed_port, until, within

pytestmark = pytest.mark.asyncio

UNRESOLVABLE = "nonexistent.invalid"


def _ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and r.name.startswith("aioproducer")
        and text in r.getMessage()
    ]


def _failed_attempts(caplog: pytest.LogCaptureFixture, address: str) -> int:
    return sum(
        1
        for r in caplog.records
        if r.levelno == logging.DEBUG and "failed" in r.getMessage() and address in r.getMessage()
    )


async def _stop(producer: Producer, start: asyncio.Task[None]) -> None:
    start.cancel()
    # Cancelled, or failed: either way it is over.
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await start
    await within(producer.close(), 10, "close")


async def test_a_closed_port_is_a_warning_within_seconds_and_not_a_flood(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    address = f"127.0.0.1:{closed_port()}"
    producer = Producer(address, client_id="lost", reconnect_backoff_max_ms=100)
    start = asyncio.ensure_future(producer.start())  # max_block_ms: the default 60 s
    try:
        await until(lambda: _warnings(caplog, address), 15, "a warning naming the address")
        # Several more attempts fail, and stay quiet for the interval.
        await until(lambda: _failed_attempts(caplog, address) >= 4, 15, "more attempts")
        assert not start.done()
    finally:
        await _stop(producer, start)
    (warning,) = _warnings(caplog, address)
    assert warning.startswith(f"[lost] cannot connect to bootstrap server {address}")
    assert "is a broker listening there?" in warning


async def test_the_warning_repeats_after_its_interval_with_a_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker_connections, "UNREACHABLE_WARNING_INTERVAL", 0.3)
    caplog.set_level(logging.WARNING, logger="aioproducer")
    address = f"127.0.0.1:{closed_port()}"
    producer = Producer(address, reconnect_backoff_ms=20, reconnect_backoff_max_ms=50)
    start = asyncio.ensure_future(producer.start())
    try:
        await until(lambda: len(_warnings(caplog, address)) >= 2, 15, "a second warning")
    finally:
        await _stop(producer, start)
    assert "more failed attempts since the last one" in _warnings(caplog, address)[1]


async def test_start_fails_at_once_when_no_bootstrap_name_resolves() -> None:
    producer = Producer(f"{UNRESOLVABLE}:9092,PLAINTEXT://also.{UNRESOLVABLE}:9093")
    try:
        with pytest.raises(ConfigurationError, match="no bootstrap server resolves") as caught:
            await within(producer.start(), 20, "start")  # not max_block_ms (60 s)
    finally:
        await producer.close()
    assert f"{UNRESOLVABLE}:9092 (" in str(caught.value)
    assert f"also.{UNRESOLVABLE}:9093 (" in str(caught.value)


async def test_an_unresolvable_bootstrap_name_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="aioproducer")
    async with MockCluster(brokers=1) as cluster:
        servers = f"{UNRESOLVABLE}:9092,{cluster.bootstrap_servers}"
        async with Producer(servers, max_block_ms=10000) as producer:
            await within(producer.send("events", b"v"), 10, "send")
        assert len(cluster.records("events")) == 1
    (warning,) = _warnings(caplog, f"bootstrap server {UNRESOLVABLE}:9092 does not resolve")
    assert "left out" in warning


async def test_protocol_prefixed_bootstrap_servers_deliver() -> None:
    async with MockCluster(brokers=2) as cluster:
        servers = ",".join(f"PLAINTEXT://{s}" for s in cluster.bootstrap_servers.split(","))
        async with Producer(servers, max_block_ms=5000) as producer:
            await within(producer.send("events", b"v"), 10, "send")
        assert len(cluster.records("events")) == 1


@pytest.mark.skipif(not _ipv6_available(), reason="no IPv6 loopback")
async def test_an_ipv6_bootstrap_address_delivers() -> None:
    async with MockCluster(brokers=1, host="::1") as cluster:
        assert cluster.bootstrap_servers.startswith("[::1]:")
        servers = f"PLAINTEXT://{cluster.bootstrap_servers}"
        async with Producer(servers, max_block_ms=5000) as producer:
            await within(producer.send("events", b"v"), 10, "send")
        assert len(cluster.records("events")) == 1


async def test_a_cancellation_as_metadata_arrives_is_not_lost() -> None:
    """The caller is cancelled in the very loop pass the awaited refresh ends:
    the wait still raises CancelledError (Python 3.11's wait_for returned normally
    then, gh-86296, and start() went on waiting out max_block_ms)."""
    from aioproducer.net.client import KafkaClient

    client = KafkaClient(
        f"127.0.0.1:{closed_port()}",
        client_id="lost",
        request_timeout_ms=1000,
        metadata_max_age_ms=60000,
        reconnect_backoff_max_ms=100,
    )
    try:
        waiting = asyncio.ensure_future(client.wait_for_update(30))
        for _ in range(5):
            await asyncio.sleep(0)  # it waits on the refresh now
        assert not waiting.done()
        client._updated.set()  # the refresh ends...
        waiting.cancel()  # ...in the same pass as the cancellation
        with pytest.raises(asyncio.CancelledError):
            await within(waiting, 10, "the cancelled wait")
    finally:
        await within(client.close(), 10, "close")
