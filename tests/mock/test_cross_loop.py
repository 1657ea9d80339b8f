"""A producer used from an event loop other than the one that started it.

Each scenario runs real loops: the producer's own (in a thread of its own, or
the test thread's ``asyncio.run``) and another (``asyncio.run`` in the test
thread, or a new loop in a worker thread). Every call from the other loop must
raise ProducerLoopError before buffering anything, so that nothing it was
given reaches the cluster (read back from the MockCluster), and ``close()``
from the other loop must end within a bound, never with a bare CancelledError.
Every wait is bounded far above what it needs (TIMEOUT).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aioproducer import BulkSendError, Producer, ProducerLoopError, errors
from aioproducer.engine.record_handle import WAKE_SLICE
from aioproducer.testing import MockCluster
from tests.support.aio import closed_port
from tests.support.extras import require
from tests.support.loop_thread import LoopThread

TIMEOUT = 30.0
TOPIC = "loops"

Call = Callable[[Producer], Awaitable[Any]]


def from_other_loop(call: Callable[[], Awaitable[Any]]) -> BaseException | None:
    """Await ``call()`` in a new ``asyncio.run`` loop, bounded; what it raised, or None."""

    async def attempt() -> BaseException | None:
        try:
            await asyncio.wait_for(call(), TIMEOUT)
        except BaseException as exc:  # noqa: BLE001 - the test looks at what came out
            return exc
        return None

    return asyncio.run(attempt())


def assert_loop_error(exc: BaseException | None) -> ProducerLoopError:
    assert isinstance(exc, ProducerLoopError), repr(exc)
    assert isinstance(exc, errors.IllegalStateError) and isinstance(exc, RuntimeError)
    assert not exc.retriable
    # The message says what to do, pytest-asyncio's loop scopes included.
    assert "one producer per event loop" in str(exc) and "loop_scope" in str(exc)
    return exc


@pytest.fixture
def owner() -> Iterator[LoopThread]:
    """The producer's loop, kept running in a thread of its own."""
    with LoopThread() as thread:
        yield thread


@pytest.fixture
def cluster(owner: LoopThread) -> Iterator[MockCluster]:
    """A MockCluster served by the owner's loop, so it answers whichever loop the test is on."""
    mock = MockCluster(brokers=1, default_partitions=2)
    owner.run(mock.start())
    owner.call(lambda: mock.create_topic(TOPIC, 2))
    yield mock
    owner.run(mock.stop())


def values(owner: LoopThread, cluster: MockCluster, **options: Any) -> list[bytes]:
    return owner.call(lambda: sorted(r.value for r in cluster.records(TOPIC, **options)))


def started(owner: LoopThread, cluster: MockCluster, **config: Any) -> Producer:
    producer = Producer(cluster.bootstrap_servers, **{"linger_ms": 0, **config})
    owner.wait(producer.start)
    return producer


async def _async_with(producer: Producer) -> None:
    async with producer:
        pass


CALLS: dict[str, Call] = {
    "send": lambda p: p.send(TOPIC, b"stray"),
    "send keyed": lambda p: p.send(TOPIC, b"stray", key=b"k"),
    "send to a partition": lambda p: p.send(TOPIC, b"stray", partition=1),
    "send with headers": lambda p: p.send(TOPIC, b"stray", headers=[("h", b"v")]),
    "enqueue": lambda p: p.enqueue(TOPIC, b"stray"),
    "enqueue_many": lambda p: p.enqueue_many(TOPIC, [b"stray", b"stray too"]),
    "send_many": lambda p: p.send_many(TOPIC, [b"stray", b"stray too"]),
    "flush": lambda p: p.flush(),
    "partitions_for": lambda p: p.partitions_for(TOPIC),
    "ping": lambda p: p.ping(),
    "start": lambda p: p.start(),
    "async with": _async_with,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_from_another_loop_raises_and_buffers_nothing(
    owner: LoopThread, cluster: MockCluster, name: str
) -> None:
    producer = started(owner, cluster)
    # On its loop first: the unkeyed record also opens the fast path's batch.
    owner.wait(lambda: producer.send(TOPIC, b"before"))

    assert_loop_error(from_other_loop(lambda: CALLS[name](producer)))

    # Whatever the owner's sender does next, the stray records are not there.
    owner.wait(producer.flush)
    assert values(owner, cluster) == [b"before"]
    # The producer goes on working on its own loop.
    owner.wait(lambda: producer.send(TOPIC, b"after"))
    owner.wait(producer.close)
    assert values(owner, cluster) == [b"after", b"before"]


def test_interceptors_see_the_failed_call_and_nothing_is_sent(
    owner: LoopThread, cluster: MockCluster
) -> None:
    acknowledged: list[BaseException | None] = []

    class Hook:
        def on_send(self, record: Any) -> Any:
            return record

        def on_acknowledgement(self, metadata: Any, error: BaseException | None) -> None:
            acknowledged.append(error)

    producer = started(owner, cluster, interceptors=[Hook()])
    owner.wait(lambda: producer.send(TOPIC, b"before"))
    assert_loop_error(from_other_loop(lambda: producer.send(TOPIC, b"stray")))
    owner.wait(producer.close)
    assert values(owner, cluster) == [b"before"]
    assert acknowledged[0] is None and isinstance(acknowledged[1], ProducerLoopError)


def test_close_from_another_loop_raises_at_once_and_keeps_the_pending_records(
    owner: LoopThread, cluster: MockCluster
) -> None:
    producer = started(owner, cluster, linger_ms=60_000)  # records wait in their batch
    pending = owner.wait(lambda: producer.enqueue(TOPIC, b"pending"))

    error = assert_loop_error(from_other_loop(producer.close))
    assert "nothing was closed" in str(error)
    assert not pending.done()

    # Closed on its own loop, it delivers what was pending.
    owner.wait(producer.close)
    assert pending.result().offset >= 0
    assert values(owner, cluster) == [b"pending"]


def test_transactions_from_another_loop(owner: LoopThread, cluster: MockCluster) -> None:
    producer = started(owner, cluster, transactional_id="cross-loop")
    owner.wait(producer.init_transactions)
    owner.wait(producer.begin_transaction)
    owner.wait(lambda: producer.send(TOPIC, b"in the transaction"))
    for call in (
        lambda: producer.send(TOPIC, b"stray"),
        producer.begin_transaction,
        producer.commit_transaction,
        producer.abort_transaction,
        producer.init_transactions,
        lambda: producer.send_offsets_to_transaction({(TOPIC, 0): 1}, "group"),
    ):
        assert_loop_error(from_other_loop(call))
    owner.wait(producer.commit_transaction)
    owner.wait(producer.close)
    assert values(owner, cluster, include_uncommitted=True) == [b"in the transaction"]


def test_a_second_asyncio_run_gets_typed_errors_and_close_ends_the_producer(
    owner: LoopThread, cluster: MockCluster
) -> None:
    producer = Producer(cluster.bootstrap_servers, linger_ms=0)

    async def first() -> None:
        await producer.start()
        await asyncio.wait_for(producer.send(TOPIC, b"one"), TIMEOUT)

    asyncio.run(first())  # its loop is closed now, the producer left open
    for name in ("send", "send keyed", "enqueue_many", "flush", "start", "async with"):
        error = assert_loop_error(from_other_loop(lambda name=name: CALLS[name](producer)))
        assert "is closed" in str(error)
    # Nothing was pending: close() from this loop ends the producer and returns.
    assert from_other_loop(producer.close) is None
    assert isinstance(
        from_other_loop(lambda: producer.send(TOPIC, b"late")), errors.ProducerClosedError
    )
    assert from_other_loop(producer.close) is None  # twice is safe
    assert values(owner, cluster) == [b"one"]


def test_close_after_the_owning_loop_ended_fails_the_records_never_sent_and_says_so(
    owner: LoopThread, cluster: MockCluster
) -> None:
    producer = Producer(cluster.bootstrap_servers, linger_ms=60_000)

    async def first() -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
        await producer.start()
        one = await producer.enqueue(TOPIC, b"stranded")
        many = await producer.enqueue_many(TOPIC, [b"a", b"b"])
        return one, many

    one, many = asyncio.run(first())  # the loop ends with three records in their batches

    error = assert_loop_error(from_other_loop(producer.close))
    assert "3 record(s) were never acknowledged" in str(error)
    assert one.done() and isinstance(one.exception(), ProducerLoopError)
    assert one.exception().may_have_been_written is False  # never sent
    # The bulk call's result names each record's outcome.
    assert many.done() and isinstance(many.exception(), BulkSendError)
    [(partition, records)] = many.exception().result.errors.items()
    assert records.indices == [0, 1] and isinstance(records.error, ProducerLoopError)
    assert records.error.may_have_been_written is False
    assert from_other_loop(producer.close) is None  # closed now
    assert values(owner, cluster) == []


def test_a_loop_in_another_thread_gets_the_typed_error_while_the_owner_goes_on() -> None:
    async def main() -> tuple[BaseException | None, BaseException | None, list[bytes]]:
        async with MockCluster(brokers=1) as cluster:
            cluster.create_topic(TOPIC, 1)
            async with Producer(cluster.bootstrap_servers, linger_ms=0) as producer:
                await asyncio.wait_for(producer.send(TOPIC, b"before"), TIMEOUT)
                sent = await asyncio.to_thread(
                    from_other_loop, lambda: producer.send(TOPIC, b"stray")
                )
                closed = await asyncio.to_thread(from_other_loop, producer.close)
                await asyncio.wait_for(producer.send(TOPIC, b"after"), TIMEOUT)
            return sent, closed, [r.value for r in cluster.records(TOPIC)]

    sent, closed, written = asyncio.run(main())
    assert_loop_error(sent)
    assert_loop_error(closed)
    assert written == [b"before", b"after"]


def test_a_start_that_failed_leaves_the_producer_free_for_another_loop(owner: LoopThread) -> None:
    port = closed_port()
    producer = Producer(f"127.0.0.1:{port}", max_block_ms=300, linger_ms=0)
    assert isinstance(from_other_loop(producer.start), errors.NoBrokersAvailableError)

    cluster = MockCluster(brokers=1, base_port=port)
    owner.run(cluster.start())
    try:
        owner.wait(producer.start)
        owner.wait(lambda: producer.send(TOPIC, b"v"))
        assert_loop_error(from_other_loop(lambda: producer.send(TOPIC, b"stray")))
        owner.wait(producer.close)
        assert values(owner, cluster) == [b"v"]
    finally:
        owner.run(cluster.stop())


def test_uvloop_producer_checks_the_loop_too(cluster: MockCluster, owner: LoopThread) -> None:
    uvloop = require("uvloop", extra="test")
    with LoopThread(uvloop.new_event_loop) as uv:
        producer = Producer(cluster.bootstrap_servers, linger_ms=0)
        assert isinstance(uv.loop, uvloop.Loop)
        uv.wait(producer.start)

        async def on_uvloop() -> None:
            for i in range(300):  # the fast path, and the checked one
                await producer.enqueue(TOPIC, b"uv")
                await producer.enqueue(TOPIC, b"keyed", key=b"%d" % i)
            await producer.flush()

        uv.wait(on_uvloop)
        assert_loop_error(from_other_loop(lambda: producer.send(TOPIC, b"stray")))
        assert_loop_error(from_other_loop(producer.close))
        uv.wait(producer.close)
    assert values(owner, cluster) == [b"keyed"] * 300 + [b"uv"] * 300


def ignore(_: object) -> None:
    """A done callback: the future has one to schedule when set."""


@pytest.fixture
def two_brokers(owner: LoopThread) -> Iterator[MockCluster]:
    """Partition 0 of TOPIC led by broker 0, partition 1 by broker 1 (served by the owner's loop)."""
    mock = MockCluster(brokers=2)
    owner.run(mock.start())
    owner.call(lambda: mock.create_topic(TOPIC, 2))

    def lead_own_partition() -> None:
        for broker in (0, 1):
            if mock.leader(TOPIC, broker) != broker:
                mock.move_leader(TOPIC, broker, broker)

    owner.call(lead_own_partition)
    yield mock
    owner.run(mock.stop())


def test_close_after_the_loop_stopped_mid_wake_keeps_the_acknowledged_batch_written(
    owner: LoopThread, two_brokers: MockCluster
) -> None:
    """An acknowledged batch decides all its records at once and schedules the
    callbacks of the awaited ones in slices, one loop callback each; its loop
    stopped and closed after the first slice. Every acknowledged record keeps
    its metadata (those records were written), and close() from another loop
    fails only the records never acknowledged."""
    cluster = two_brokers
    count = WAKE_SLICE * 40  # one batch, forty slices of awaited records
    producer = Producer(
        cluster.bootstrap_servers,
        linger_ms=60_000,
        batch_size=512 * 1024,
        request_timeout_ms=300_000,
        delivery_timeout_ms=600_000,
    )
    loop = asyncio.new_event_loop()
    try:

        async def warm() -> None:
            await producer.start()
            for partition in (0, 1):  # the producer id, and both brokers connected
                await producer.enqueue(TOPIC, b"warm", partition=partition)
            await producer.flush(TIMEOUT)

        loop.run_until_complete(warm())
        owner.call(lambda: cluster.stall_broker(1))  # partition 1 is never acknowledged

        async def fill() -> tuple[list[asyncio.Future[Any]], list[asyncio.Future[Any]]]:
            stuck = [await producer.enqueue(TOPIC, b"s", partition=1) for _ in range(3)]
            acked = [await producer.enqueue(TOPIC, b"a", partition=0) for _ in range(count)]
            return stuck, acked

        stuck, acked = loop.run_until_complete(fill())
        # Records someone waits on: their callbacks need the loop.
        for fut in acked + stuck:
            fut.add_done_callback(ignore)
        # Run until the first slice of callbacks ran, then stop: the loop
        # ends within a callback or two of it (bounded, should nothing come).
        called: list[int] = []
        acked[0].add_done_callback(lambda _: loop.stop())
        acked[-1].add_done_callback(lambda _: called.append(1))
        bound = loop.call_later(TIMEOUT, loop.stop)
        flushing = loop.create_task(producer.flush())
        loop.run_forever()
        bound.cancel()
        assert all(fut.done() for fut in acked)  # decided at once
        assert called == []  # stopped before the last slice of callbacks
        assert not flushing.done() and not any(fut.done() for fut in stuck)
    finally:
        loop.close()

    error = assert_loop_error(from_other_loop(producer.close))
    assert "3 record(s) were never acknowledged" in str(error)
    # Every future is done: the acknowledged ones with their metadata.
    first = acked[0].result().offset
    assert [fut.result().offset for fut in acked] == list(range(first, first + count))
    assert {(fut.result().topic, fut.result().partition) for fut in acked} == {(TOPIC, 0)}
    for fut in stuck:
        assert fut.done() and isinstance(fut.exception(), ProducerLoopError)
        assert fut.exception().may_have_been_written is True  # in flight to a stalled broker
    assert from_other_loop(producer.close) is None  # closed now
    written = owner.call(lambda: [r for r in cluster.records(TOPIC) if r.partition == 0])
    assert [r.offset for r in written][-count:] == list(range(first, first + count))
