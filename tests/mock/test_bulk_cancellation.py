"""A bulk call stopped part way says exactly which records went in.

Each call here is stopped at a point the test controls: the broker is stalled,
so the buffer fills and the call waits for memory (``max_block_ms`` is far
away) until the test cancels it, closes the producer or commits. The records
reported as buffered must be exactly the ones the broker then holds, a retry
of the rest must duplicate nothing, and every future must resolve once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aioproducer import BulkProgress, BulkResult, BulkSendError, Producer, errors
from aioproducer.testing import MockCluster
from tests.support.aio import until, within

pytestmark = pytest.mark.asyncio

N = 3000
BOUND = 30.0  # seconds: for events that take milliseconds; max_block_ms is 120 s
VALUES = [b"r-%05d-" % i + b"x" * 90 for i in range(N)]  # 3000 x ~100 B > the 64 KiB buffer
SETTINGS: dict[str, Any] = {
    "buffer_memory": 64 * 1024,
    "linger_ms": 1,
    "max_block_ms": 120_000,
    "request_timeout_ms": 60_000,
    "delivery_timeout_ms": 200_000,
}
needs_311 = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout() and TaskGroup are Python 3.11+"
)


@contextlib.asynccontextmanager
async def stalled(
    cluster: MockCluster, partitions: int = 1, **settings: Any
) -> AsyncIterator[Producer]:
    """A started producer whose only broker stalls after a warm-up record.

    The broker resumes before the producer closes, also when the test failed:
    a failure ends the test at once, not after delivery_timeout_ms.
    """
    cluster.create_topic("t", partitions=partitions)
    async with Producer(cluster.bootstrap_servers, **{**SETTINGS, **settings}) as p:
        if p.config.transactional_id is not None:
            await within(p.init_transactions(), BOUND, "init_transactions")
            await p.begin_transaction()
        await within(p.send("t", b"warm-up", partition=0), BOUND, "warm-up")
        cluster.stall_broker(cluster.broker_ids[0])
        try:
            yield p
        finally:
            cluster.resume_broker(cluster.broker_ids[0])


async def waiting_for_memory(p: Producer, task: asyncio.Task[Any]) -> None:
    """Until ``task``'s bulk call has buffered what fits and waits for more."""
    await until(lambda: p._pool.waiting == 1 or task.done(), BOUND, "the call waits for memory")
    assert not task.done(), task


def stored(cluster: MockCluster) -> list[Any]:
    return [r.value for r in cluster.records("t") if r.value != b"warm-up"]


def check_partial(failure: BulkSendError, buffered: int, error: type[BaseException]) -> BulkResult:
    """The call's future failed only for the records never buffered: ``buffered`` on."""
    result = failure.result
    assert list(result.errors) == [None]
    assert result.errors[None].indices == list(range(buffered, N))
    assert isinstance(result.errors[None].error, error)
    assert all(result[i].offset >= 0 for i in range(buffered))
    return result


@pytest.mark.parametrize("keyed", [False, True], ids=["sticky", "keyed"])
async def test_a_cancelled_call_reports_the_prefix_it_buffered_and_a_retry_duplicates_nothing(
    keyed: bool,
) -> None:
    keys = [b"k%d" % (i % 7) for i in range(N)] if keyed else None
    async with MockCluster(brokers=1) as cluster, stalled(cluster, partitions=3) as p:
        task = asyncio.create_task(p.enqueue_many("t", VALUES, keys=keys))
        await waiting_for_memory(p, task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        progress = BulkProgress.of(info.value)
        assert progress is not None and progress.future is not None
        k = progress.buffered
        assert 0 < k < N
        cluster.resume_broker(cluster.broker_ids[0])
        with pytest.raises(BulkSendError) as failed:
            await within(progress.future, BOUND, "the buffered records")
        result = check_partial(failed.value, k, errors.CallCancelledError)
        cancelled = result.errors[None].error
        assert (
            isinstance(cancelled, errors.CallCancelledError)
            and cancelled.may_have_been_written is False
        )
        assert sorted(stored(cluster)) == sorted(VALUES[:k])  # in the log: exactly those
        rest = await within(
            p.send_many("t", VALUES[k:], keys=None if keys is None else keys[k:]),
            BOUND,
            "the retry",
        )
        assert not rest.errors
        await within(p.flush(), BOUND, "flush")
        assert p._pool.available == p._pool.total  # nothing reserved for records not buffered
        values = stored(cluster)
    assert sorted(values) == sorted(VALUES)  # every record once
    by_partition: dict[int, list[Any]] = {}
    for r in cluster.records("t"):
        by_partition.setdefault(r.partition, []).append(r.value)
    for logged in by_partition.values():  # per partition, the call's order
        logged = [v for v in logged if v != b"warm-up"]
        assert logged == sorted(logged)


@needs_311
async def test_asyncio_timeout_finds_the_progress_behind_its_timeout_error() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster) as p:
        loop = asyncio.get_running_loop()
        expire: list[Any] = []  # the asyncio.Timeout

        async def enqueue() -> asyncio.Future[BulkResult]:
            async with asyncio.timeout(None) as cm:
                expire.append(cm)
                return await p.enqueue_many("t", VALUES)

        task = asyncio.create_task(enqueue())
        await waiting_for_memory(p, task)
        expire[0].reschedule(loop.time())  # the deadline passes now
        with pytest.raises(TimeoutError) as info:  # not a CancelledError: the timeout took it
            await task
        progress = BulkProgress.of(info.value)
        assert progress is not None and progress.future is not None
        assert 0 < progress.buffered < N
        cluster.resume_broker(cluster.broker_ids[0])
        with pytest.raises(BulkSendError) as failed:
            await within(progress.future, BOUND, "the buffered records")
        check_partial(failed.value, progress.buffered, errors.CallCancelledError)
        assert stored(cluster) == VALUES[: progress.buffered]


@needs_311
async def test_a_progress_passed_in_survives_a_task_group_cancelling_the_call() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster) as p:
        progress = BulkProgress()

        async def sibling_fails() -> None:
            await until(lambda: p._pool.waiting == 1, BOUND, "the call waits for memory")
            raise ValueError("a sibling failed")

        with pytest.raises(Exception) as info:  # an ExceptionGroup (a 3.11+ name)
            async with asyncio.TaskGroup() as group:
                group.create_task(p.send_many("t", VALUES, progress=progress))
                group.create_task(sibling_fails())
        assert info.group_contains(ValueError)
        assert progress.future is not None and 0 < progress.buffered < N
        cluster.resume_broker(cluster.broker_ids[0])
        with pytest.raises(BulkSendError) as failed:
            await within(progress.future, BOUND, "the buffered records")
        check_partial(failed.value, progress.buffered, errors.CallCancelledError)
        assert stored(cluster) == VALUES[: progress.buffered]


async def test_send_many_cancelled_waiting_for_acks_still_reports_every_record() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster, buffer_memory=4 << 20) as p:
        progress = BulkProgress()
        task = asyncio.create_task(p.send_many("t", VALUES, progress=progress))
        # All buffered: the task now waits for the stalled broker's acknowledgements.
        await until(lambda: progress.buffered == N or task.done(), BOUND, "all buffered")
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        assert BulkProgress.of(info.value) is progress and progress.buffered == N
        assert progress.future is not None and not progress.future.done()  # not cancelled with it
        cluster.resume_broker(cluster.broker_ids[0])
        result = await within(progress.future, BOUND, "the acknowledgements")
        assert not result.errors
        assert [result[i].offset for i in range(N)] == list(range(1, N + 1))
        assert stored(cluster) == VALUES


class Acks:
    """Counts what ``on_acknowledgement`` says, record by record."""

    def __init__(self) -> None:
        self.delivered: list[int] = []
        self.failed: list[BaseException] = []

    def on_acknowledgement(self, metadata: Any, error: BaseException | None) -> None:
        if error is None:
            self.delivered.append(metadata.offset)
        else:
            self.failed.append(error)


async def test_interceptors_hear_each_record_once_with_its_real_outcome_after_a_cancel() -> None:
    hook = Acks()
    async with MockCluster(brokers=1) as cluster, stalled(cluster, interceptors=[hook]) as p:
        hook.delivered.clear()  # the warm-up
        task = asyncio.create_task(p.enqueue_many("t", VALUES))
        await waiting_for_memory(p, task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        progress = BulkProgress.of(info.value)
        assert progress is not None and progress.future is not None
        k = progress.buffered
        cluster.resume_broker(cluster.broker_ids[0])
        await within(asyncio.wait([progress.future]), BOUND, "the buffered records")
        assert stored(cluster) == VALUES[:k]
    assert sorted(hook.delivered) == list(range(1, k + 1))
    assert len(hook.failed) == N - k
    assert all(isinstance(e, errors.CallCancelledError) for e in hook.failed)


async def test_a_commit_while_the_call_waits_stops_it_and_commits_what_went_in() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster, transactional_id="bulk-tx") as p:
        task = asyncio.create_task(p.enqueue_many("t", VALUES))
        await waiting_for_memory(p, task)
        commit = asyncio.create_task(p.commit_transaction())
        await until(
            lambda: p._running.txn is not None and p._running.txn.state.name == "COMMITTING",
            BOUND,
            "commit",
        )
        cluster.resume_broker(cluster.broker_ids[0])
        future = await within(task, BOUND, "the stopped call")  # stopped, not failed as a whole
        await within(commit, BOUND, "the commit")
        with pytest.raises(BulkSendError) as failed:
            await within(future, BOUND, "the buffered records")
        result = failed.value.result
        k = result.errors[None].indices[0]
        check_partial(failed.value, k, errors.IllegalStateError)
        assert 0 < k < N
        await within(p.flush(), BOUND, "flush")
        assert p._pool.available == p._pool.total
        assert stored(cluster) == VALUES[:k]  # committed: the records that went in, no more


async def test_close_while_the_call_waits_stops_it_and_delivers_what_went_in() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster) as p:
        task = asyncio.create_task(p.enqueue_many("t", VALUES))
        await waiting_for_memory(p, task)
        closing = asyncio.create_task(p.close())
        future = await within(task, BOUND, "the stopped call")
        cluster.resume_broker(cluster.broker_ids[0])
        await within(closing, BOUND, "close")
        with pytest.raises(BulkSendError) as failed:
            await within(future, BOUND, "the buffered records")
        k = failed.value.result.errors[None].indices[0]
        check_partial(failed.value, k, errors.ProducerClosedError)
        assert 0 < k < N and stored(cluster) == VALUES[:k]


async def test_a_call_cancelled_before_buffering_anything_reports_nothing_in() -> None:
    async with MockCluster(brokers=1) as cluster, stalled(cluster) as p:
        filler = asyncio.create_task(p.enqueue_many("t", VALUES))  # takes the whole buffer
        await waiting_for_memory(p, filler)
        progress = BulkProgress()
        task = asyncio.create_task(p.enqueue_many("t", [b"late"], progress=progress))
        await until(lambda: p._pool.waiting == 2, BOUND, "the second call waits")
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as info:
            await task
        assert BulkProgress.of(info.value) is progress
        assert progress.buffered == 0 and progress.future is None
        filler.cancel()
        with pytest.raises(asyncio.CancelledError):
            await filler
        cluster.resume_broker(cluster.broker_ids[0])
        await within(p.flush(), BOUND, "flush")
        assert b"late" not in stored(cluster)
        with pytest.raises(ValueError, match="already records"):
            await p.enqueue_many("t", [b"again"], progress=progress)
        with pytest.raises(TypeError, match="BulkProgress"):
            await p.enqueue_many("t", [b"again"], progress=object())  # type: ignore[arg-type]
