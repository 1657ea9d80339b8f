"""Bulk calls of a producer whose event loop closed before the producer did.

``close()`` from another loop then fails what was never acknowledged (see
``Lifecycle._abandon``). A bulk call counts its records down as its
spans report, so each span must report exactly once; and a call stopped
between two slices must report the records it never buffered, or its future
(held by the caller through its BulkProgress) would stay pending for good.
The producer's loop is stopped at a chosen point (from inside the call, not
after a delay); every wait is bounded far above what it needs (TIMEOUT).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aioproducer import BulkProgress, BulkSendError, Producer, ProducerLoopError
from aioproducer.bulk import appender as appender_module
from aioproducer.bulk.appender import SLICE_RECORDS, BulkAppender
from aioproducer.bulk.result import BulkSpan
from aioproducer.testing import MockCluster
from tests.support.loop_thread import LoopThread

TIMEOUT = 30.0
TOPIC = "abandoned"

BulkCallFn = Callable[[Producer, list[bytes], BulkProgress], Awaitable[Any]]

CALLS: dict[str, BulkCallFn] = {
    "enqueue_many": lambda p, values, progress: p.enqueue_many(
        TOPIC, values, partition=0, progress=progress
    ),
    "send_many": lambda p, values, progress: p.send_many(
        TOPIC, values, partition=0, progress=progress
    ),
}


def ignore(_: object) -> None:
    """A done callback: the future has one to schedule when set (which then raises)."""


def close_from_other_loop(producer: Producer) -> BaseException | None:
    """``producer.close()`` in a new ``asyncio.run`` loop, bounded; what it raised, or None."""

    async def attempt() -> BaseException | None:
        try:
            await asyncio.wait_for(producer.close(), TIMEOUT)
        except BaseException as exc:  # noqa: BLE001 - the test looks at what came out
            return exc
        return None

    return asyncio.run(attempt())


@pytest.fixture
def owner() -> Iterator[LoopThread]:
    """The cluster's loop, kept running in a thread of its own."""
    with LoopThread() as thread:
        yield thread


@pytest.fixture
def cluster(owner: LoopThread) -> Iterator[MockCluster]:
    mock = MockCluster(brokers=1)
    owner.run(mock.start())
    owner.call(lambda: mock.create_topic(TOPIC, 2))
    yield mock
    owner.run(mock.stop())


@pytest.fixture
def span_reports(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times each bulk span (by id) was told it failed."""
    counts: Counter[int] = Counter()
    original = BulkSpan.failed

    def counting(span: BulkSpan, exc: BaseException) -> None:
        counts[id(span)] += 1
        original(span, exc)

    monkeypatch.setattr(BulkSpan, "failed", counting)
    return counts


def written(owner: LoopThread, cluster: MockCluster) -> list[bytes]:
    return owner.call(lambda: [r.value for r in cluster.records(TOPIC)])


def test_each_span_of_an_abandoned_batch_fails_once(
    owner: LoopThread, cluster: MockCluster, span_reports: Counter[int]
) -> None:
    producer = Producer(cluster.bootstrap_servers, linger_ms=60_000)
    spans: list[BulkSpan] = []

    async def first() -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
        await producer.start()
        one = await producer.enqueue(TOPIC, b"single", partition=1)
        many = await producer.enqueue_many(TOPIC, [b"a", b"b", b"c", b"d"], partition=[0, 1, 0, 1])
        for batch in producer._acc.incomplete:
            spans.extend(batch.spans or ())
        one.add_done_callback(ignore)
        many.add_done_callback(ignore)
        return one, many

    one, many = asyncio.run(first())  # the loop ends with both calls in open batches
    assert len(spans) == 2  # one per partition

    error = close_from_other_loop(producer)
    assert isinstance(error, ProducerLoopError), repr(error)
    assert "5 record(s) were never acknowledged" in str(error)
    assert [span_reports[id(span)] for span in spans] == [1, 1]
    assert isinstance(one.exception(), ProducerLoopError)
    exc = many.exception()
    assert isinstance(exc, BulkSendError)
    assert {p: f.indices for p, f in exc.result.errors.items()} == {0: [0, 2], 1: [1, 3]}
    for failure in exc.result.errors.values():
        assert isinstance(failure.error, ProducerLoopError)
        assert failure.error.may_have_been_written is False  # never sent
    assert close_from_other_loop(producer) is None  # closed now
    assert written(owner, cluster) == []


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_a_bulk_call_between_slices_when_its_loop_closed_reports_every_record_once(
    owner: LoopThread,
    cluster: MockCluster,
    span_reports: Counter[int],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    """The loop stops right after the call's first slice; the call waits for its
    next turn, which never comes. close() from another loop fails the buffered
    records (in their batch) and the rest (never buffered): the progress's
    future resolves once, naming each record's outcome."""
    count = SLICE_RECORDS * 3
    values = [b"v%d" % i for i in range(count)]
    monkeypatch.setattr(appender_module, "YIELD_INTERVAL", 0.0)  # a turn before every slice
    producer = Producer(cluster.bootstrap_servers, linger_ms=60_000, batch_size=1024 * 1024)
    progress = BulkProgress()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(producer.start(), TIMEOUT))
        append_slice = BulkAppender._append_slice

        def append_then_stop(self: BulkAppender, job: Any, start: int, stop: int) -> None:
            append_slice(self, job, start, stop)
            loop.stop()  # takes effect when the call next yields, before its next slice

        monkeypatch.setattr(BulkAppender, "_append_slice", append_then_stop)
        call = loop.create_task(CALLS[kind](producer, values, progress))
        bound = loop.call_later(TIMEOUT, loop.stop)  # should the slice never come
        loop.run_forever()
        bound.cancel()
        assert progress.buffered == SLICE_RECORDS and not call.done()
        assert progress.future is not None and not progress.future.done()
        progress.future.add_done_callback(ignore)
    finally:
        loop.close()

    error = close_from_other_loop(producer)
    assert progress.future.done()
    assert isinstance(error, ProducerLoopError), repr(error)
    assert f"{count} record(s) were never acknowledged" in str(error)
    exc = progress.future.exception()
    assert isinstance(exc, BulkSendError)
    errors = exc.result.errors
    assert sorted(errors, key=str) == [0, None]
    assert errors[0].indices == list(range(SLICE_RECORDS))  # buffered, in their batch
    assert errors[None].indices == list(range(SLICE_RECORDS, count))  # never buffered
    for failure in errors.values():
        assert isinstance(failure.error, ProducerLoopError)
        assert failure.error.may_have_been_written is False
    assert "not sent" in str(errors[None].error)
    assert span_reports and set(span_reports.values()) == {1}
    assert close_from_other_loop(producer) is None  # closed now
    assert written(owner, cluster) == []
