"""Produce requests are written per node in the order they were started, by one of two paths.

Most requests are written at once in the sender's pass and answered through a
callback. A request with a large batch to compress off the loop, or one
behind it or behind a full socket buffer, waits in a task for its node's turn.
These tests hold each waiting path open with a gate, against MockCluster
(which checks an idempotent producer's sequences as Kafka does), and check
that nothing overtakes, that nothing is lost, and that a stop leaves no
request counted.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.engine import request_writer
from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.produce_request import OFFLOAD_COMPRESSION_BYTES
from aioproducer.engine.request_writer import RequestWriter
from aioproducer.engine.sender import Sender
from aioproducer.net.connection import BrokerConnection
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

PRODUCE = 0


class Spawns:
    """Counts the writes that wait in a task; ``reached(n)`` is set at the n-th."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self._events: dict[int, asyncio.Event] = {}
        real = RequestWriter._spawn

        def spawn(writer: RequestWriter, node: int, write: Any) -> None:
            real(writer, node, write)
            self.count += 1
            for n, event in self._events.items():
                if self.count >= n:
                    event.set()

        monkeypatch.setattr(RequestWriter, "_spawn", spawn)

    def reached(self, n: int) -> asyncio.Event:
        event = self._events[n] = asyncio.Event()
        if self.count >= n:
            event.set()
        return event


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spawns]:
    yield Spawns(monkeypatch)


def gate_builds(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Off-loop builds wait for the first event; the second is set when one starts."""
    gate, building = asyncio.Event(), asyncio.Event()
    real = request_writer.build_payloads  # type: ignore[attr-defined]  # patched below

    async def gated(batches: Any) -> None:
        building.set()
        await gate.wait()
        await real(batches)

    monkeypatch.setattr(request_writer, "build_payloads", gated)
    return gate, building


def big_values() -> list[bytes]:
    # Random bytes: a batch above the off-loop threshold before compression.
    count = OFFLOAD_COMPRESSION_BYTES // 1000 + 8
    return [os.urandom(1000) for _ in range(count)]


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, exc: Exception) -> None:
    """``owner.name`` raises ``exc`` on its next call, then behaves as before."""
    real = getattr(owner, name)
    failures = [exc]

    def failing(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


async def test_a_plain_request_is_written_without_a_task(spawns: Spawns) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 2)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            for i in range(20):
                await within(p.send("t", b"v%d" % i, key=b"k%d" % i), 10, "send")
            assert p._running is not None
            assert p._running.sender.requests_in_flight == 0
        assert len(cluster.records("t")) == 20
        assert spawns.count == 0


async def test_a_request_behind_an_off_loop_build_waits_its_turn(
    monkeypatch: pytest.MonkeyPatch, spawns: Spawns
) -> None:
    gate, building = gate_builds(monkeypatch)
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        async with Producer(
            cluster.bootstrap_servers,
            compression="zstd",
            batch_size=4 * OFFLOAD_COMPRESSION_BYTES,
            linger_ms=60_000,
        ) as p:
            assert p.config.idempotent
            # The partition's first batch acknowledged: the next ones may pipeline.
            first = await p.enqueue("t", b"first")
            await within(p.flush(), 10, "first flush")
            assert first.result().offset == 0
            written_before = cluster.request_count(PRODUCE)
            values = big_values()
            big = [await p.enqueue("t", v) for v in values]
            flushing = asyncio.ensure_future(p.flush())
            await within(building.wait(), 10, "the off-loop build")
            small = await p.enqueue("t", b"after")
            # The small batch's request waits for the lock behind the big one.
            await within(spawns.reached(2).wait(), 10, "the second request")
            await asyncio.sleep(0.05)  # room to overtake, were it possible
            assert cluster.request_count(PRODUCE) == written_before
            assert not small.done()
            gate.set()
            await within(flushing, 20, "flush")
            offsets = [(await h).offset for h in [*big, small]]
        assert offsets == list(range(1, len(big) + 2))
        assert [r.value for r in cluster.records("t")] == [b"first", *values, b"after"]


async def test_a_full_socket_buffer_holds_the_next_requests(
    monkeypatch: pytest.MonkeyPatch, spawns: Spawns
) -> None:
    gate = asyncio.Event()
    backlog = [True]  # the first Produce after the warm-up finds the buffer full

    def write_backlogged(conn: BrokerConnection) -> bool:
        return bool(backlog) and backlog.pop()

    async def drain(conn: BrokerConnection) -> None:
        await gate.wait()

    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 2)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            await within(p.send("t", b"warm", partition=0), 10, "warm-up")
            await within(p.send("t", b"warm", partition=1), 10, "warm-up")
            monkeypatch.setattr(BrokerConnection, "write_backlogged", write_backlogged)
            monkeypatch.setattr(BrokerConnection, "drain", drain)
            first = await p.enqueue("t", b"one", partition=0)
            await within(spawns.reached(1).wait(), 10, "the drain")
            # Written before the buffer was found full: answered meanwhile.
            assert (await within(first, 10, "first")).offset == 1
            written_before = cluster.request_count(PRODUCE)
            second = await p.enqueue("t", b"two", partition=1)
            await within(spawns.reached(2).wait(), 10, "the second request")
            await asyncio.sleep(0.05)
            assert cluster.request_count(PRODUCE) == written_before
            assert not second.done()
            gate.set()
            assert (await within(second, 10, "second")).offset == 1
        assert sorted(r.value or b"" for r in cluster.records("t")) == [
            b"one",
            b"two",
            b"warm",
            b"warm",
        ]


async def test_a_request_that_cannot_be_encoded_fails_its_records_and_the_next_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            await within(p.send("t", b"warm"), 10, "warm-up")
            fail_once(monkeypatch, request_writer, "produce_body", RuntimeError("encoder broke"))
            with (
                caplog.at_level(logging.ERROR, logger="aioproducer"),
                pytest.raises(errors.KafkaError, match="encoder broke"),
            ):
                await within(p.send("t", b"lost"), 10, "the failed send")
            assert (await within(p.send("t", b"next"), 10, "the next send")).offset == 1
        assert [r.value for r in cluster.records("t")] == [b"warm", b"next"]
        assert "produce request to" in caplog.text
        assert "unexpected error in the sender loop" not in caplog.text


async def test_a_small_batch_that_cannot_be_built_fails_at_once_and_frees_its_slot(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        # One request in flight per connection: a slot never given back would
        # hold every later record of the node.
        async with Producer(
            cluster.bootstrap_servers, linger_ms=0, max_in_flight_requests_per_connection=1
        ) as p:
            await within(p.send("t", b"warm"), 10, "warm-up")
            fail_once(monkeypatch, ProducerBatch, "build", MemoryError("no room to build"))
            with (
                caplog.at_level(logging.ERROR, logger="aioproducer"),
                pytest.raises(errors.KafkaError, match="no room to build"),
            ):
                await within(p.send("t", b"lost"), 10, "the failed send")
            assert p._running is not None
            assert p._running.sender.requests_in_flight == 0
            assert (await within(p.send("t", b"next"), 10, "the next send")).offset == 1
        assert [r.value for r in cluster.records("t")] == [b"warm", b"next"]
        assert "unexpected error in the sender loop" not in caplog.text


async def test_a_failure_applying_one_batch_of_a_failed_request_leaves_the_others_an_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A request of two batches fails as a whole, and applying that failure to
    # its first batch raises (a bug, put in here): the second batch must still
    # take an outcome now, not wait for its delivery timeout.
    real_apply = Sender._apply
    broken: list[ProducerBatch] = []

    def apply(sender: Sender, batch: ProducerBatch, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("maybe_written") and not broken:
            broken.append(batch)
            raise RuntimeError("applying broke")
        real_apply(sender, batch, *args, **kwargs)

    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 2)
        p = Producer(cluster.bootstrap_servers, linger_ms=60_000)
        await p.start()
        try:
            warm = [await p.enqueue("t", b"warm", partition=i) for i in (0, 1)]
            await within(p.flush(), 10, "warm-up")
            assert all(h.done() for h in warm)
            fail_once(
                monkeypatch, request_writer, "produce_body", errors.KafkaError("encoder broke")
            )
            monkeypatch.setattr(Sender, "_apply", apply)
            handles = [await p.enqueue("t", b"x", partition=i) for i in (0, 1)]
            flushing = asyncio.ensure_future(p.flush())  # one request of both batches
            await within(
                asyncio.wait(handles, return_when=asyncio.FIRST_COMPLETED), 20, "an outcome"
            )
            assert len(broken) == 1
            [other] = [h for h in handles if h.done()]
            exc = other.exception()
            assert exc is None or not isinstance(exc, errors.KafkaTimeoutError), exc
            flushing.cancel()
        finally:
            # The batch whose apply raised fails when close() gives up on it.
            await within(p.close(timeout=0.5), 20, "close")


async def test_close_while_a_write_waits_fails_its_records_and_counts_no_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _gate, building = gate_builds(monkeypatch)  # never opened
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", 1)
        p = Producer(
            cluster.bootstrap_servers,
            compression="zstd",
            batch_size=4 * OFFLOAD_COMPRESSION_BYTES,
            linger_ms=60_000,
        )
        await p.start()
        first = await p.enqueue("t", b"first")
        await within(p.flush(), 10, "first flush")
        assert first.result().offset == 0
        assert p._running is not None
        sender = p._running.sender
        handles = [await p.enqueue("t", v) for v in big_values()]
        flushing = asyncio.ensure_future(p.flush())
        await within(building.wait(), 10, "the off-loop build")
        await within(p.close(timeout=0.2), 20, "close")
        for handle in handles:
            with pytest.raises(errors.KafkaError):
                handle.result()
        assert sender.requests_in_flight == 0
        await within(flushing, 10, "flush")
        assert [r.value for r in cluster.records("t")] == [b"first"]
