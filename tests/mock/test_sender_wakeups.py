"""The sender loop runs on events and deadlines and honours throttling (KIP-219).

Pass counts are compared with the events that could explain them, never with
wall-clock performance.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import Producer, errors
from aioproducer.engine.sender_alarm import SenderAlarm
from aioproducer.testing import MockCluster
from tests.support.aio import until
from tests.support.producers import make_producer

PRODUCE = 0
METADATA = 3
WINDOW = 1.0
# A polling loop makes ~200 passes a second; events and deadlines explain a few dozen.
MAX_PASSES = 40
# Rounds of a test in which a caller waits for memory, and the 1 KiB records of
# each round: more than the 64 KiB buffer holds, less than twice as many.
ROUNDS = 6
ROUND_RECORDS = 80
# Throttle time of the KIP-219 test: the check that the producer holds the batch
# back runs well inside it, even on a slow machine.
THROTTLE_MS = 2000


SETTINGS: dict[str, Any] = {"linger_ms": 0, "retry_backoff_ms": 50}


async def _passes_during(producer: Producer, window: float) -> int:
    sender = producer._running.sender
    assert sender is not None
    before = sender.passes
    await asyncio.sleep(window)
    return sender.passes - before


@pytest.mark.asyncio
async def test_no_polling_while_a_stalled_broker_has_no_in_flight_room() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        producer = make_producer(
            cluster,
            SETTINGS,
            request_timeout_ms=5000,
            delivery_timeout_ms=10000,
            max_in_flight_requests_per_connection=1,
        )
        await producer.start()
        try:
            await producer.send("t", b"warm")
            cluster.stall_broker(0)
            futures = [await producer.enqueue("t", b"x" * 100)]
            client = producer._running.client
            assert client is not None
            await until(
                lambda: client.connections.in_flight(0) == 1,
                10,
                "the request to the stalled broker",
            )
            # no room left
            futures += [await producer.enqueue("t", b"x" * 100) for _ in range(20)]  # queued
            passes = await _passes_during(producer, WINDOW)
            assert passes <= MAX_PASSES, passes
            cluster.resume_broker(0)
            await asyncio.gather(*futures)
        finally:
            await producer.close()
        assert len(cluster.records("t")) == 22


@pytest.mark.asyncio
async def test_no_polling_while_a_broker_is_down() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        down = next(p for p in (0, 1) if cluster.leader("t", p) == 1)
        producer = make_producer(
            cluster,
            SETTINGS,
            request_timeout_ms=1000,
            delivery_timeout_ms=3000,
            reconnect_backoff_max_ms=1000,
        )
        await producer.start()
        try:
            await producer.send("t", b"warm", partition=down)
            await cluster.servers[1].stop()  # refuses connections from now on
            futures = [await producer.enqueue("t", b"x", partition=down) for _ in range(5)]
            # Woken by connection attempts (exponential backoff), metadata
            # refreshes (backoff) and responses, not by a timer.
            passes = await _passes_during(producer, WINDOW)
            assert passes <= MAX_PASSES, passes
        finally:
            await producer.close(timeout=0.1)
        assert all(f.done() for f in futures)


@pytest.mark.asyncio
async def test_throttled_broker_gets_nothing_until_the_throttle_time_passed() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(cluster, SETTINGS) as producer:
            await producer.send("t", b"before")
            client = producer._running.client
            assert client is not None
            cluster.throttle(0, THROTTLE_MS)
            await producer.send("t", b"throttled")  # answered at once, then the channel is muted
            cluster.throttle(0, 0)
            held = await producer.enqueue("t", b"held back")
            await asyncio.sleep(0.3)
            # KIP-219: the producer keeps the batch until the throttle time is over
            # instead of writing into a channel the broker is not reading.
            assert not held.done() and client.connections.in_flight(0) == 0
            stats = client.connections.throttle_stats()[0]
            assert (stats.last, stats.max, stats.count) == (THROTTLE_MS, THROTTLE_MS, 1)
            assert (await asyncio.wait_for(held, THROTTLE_MS / 1000 + 10)).offset == 2
        assert [r.value for r in cluster.records("t")] == [b"before", b"throttled", b"held back"]


@pytest.mark.asyncio
async def test_a_caller_waiting_for_memory_makes_lingering_batches_go_at_once() -> None:
    """Java sends every batch at once while a caller waits for buffer memory, whatever
    linger_ms says; the sender must hear of the wait instead of sleeping to its next
    deadline."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        producer = make_producer(
            cluster,
            SETTINGS,
            linger_ms=60_000,
            delivery_timeout_ms=120_000,
            batch_size=1 << 20,
            buffer_memory=64 * 1024,
        )
        async with producer:
            await producer.partitions_for("t")
            loop = asyncio.get_running_loop()
            sender = producer._running.sender
            assert sender is not None
            futures = []
            waited = 0.0
            for _ in range(ROUNDS):
                # Each round meets the sender asleep to its cap: nothing pending, a
                # new batch open (the sender looked at it, found it lingering) ...
                await producer.flush(timeout=10)
                passes = sender.passes
                futures.append(await producer.enqueue("t", b"x" * 1024))
                await until(
                    lambda before=passes: sender.passes > before,
                    10,
                    "the sender's look at the batch",
                )
                await asyncio.sleep(0.02)
                # ... then callers fill the buffer and one waits for memory.
                started = loop.time()
                for _ in range(ROUND_RECORDS - 1):
                    futures.append(await producer.enqueue("t", b"x" * 1024))
                waited += loop.time() - started
            await producer.flush(timeout=10)
            assert all(f.done() and f.exception() is None for f in futures)
        assert len(cluster.records("t")) == ROUNDS * ROUND_RECORDS
        # Told of the wait, the sender ships at once (milliseconds a round); asleep,
        # it wakes only at its 1 s cap, so each round would take about a second.
        # The bound sits halfway: far from both on a slow or busy machine.
        assert waited < ROUNDS / 2, (
            f"callers waited {waited:.2f} s for memory the sender could free"
        )


@pytest.mark.asyncio
async def test_a_new_batch_lingering_past_the_senders_next_pass_does_not_wake_it() -> None:
    """A pass made for a batch the sender would only find lingering sends nothing:
    while the sender sleeps to an earlier deadline, a new batch leaves it asleep.
    A batch that can go at once (behind a full one) wakes it."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=3)
        producer = make_producer(
            cluster, SETTINGS, linger_ms=60_000, delivery_timeout_ms=120_000, batch_size=1024
        )
        async with producer:
            sender = producer._running.sender
            assert sender is not None
            await producer.enqueue("t", b"warm", partition=2)
            await producer.flush(timeout=10)  # connected, nothing queued
            first = await producer.enqueue("t", b"a", partition=0)  # opens a batch ...
            await producer.enqueue("t", b"a2", partition=0)  # ... so this one yields first
            # Now asleep (to its 1 s cap at the latest, long before the 60 s linger),
            # and the next enqueue runs to its end without yielding to the loop.
            await until(
                lambda: sender._alarm.waiter is not None and not sender._alarm.waiter.done(),
                10,
                "the sender asleep",
            )
            waiter = sender._alarm.waiter
            second = await producer.enqueue("t", b"b", partition=1)  # opens a batch
            assert not sender._alarm.woken and not waiter.done() and sender._alarm.waiter is waiter
            # A record that does not fit partition 0's batch opens the next one
            # behind it: the full batch goes now, not at its 60 s linger.
            third = await producer.enqueue("t", b"c" * 1000, partition=0)
            assert sender._alarm.woken or waiter.done()  # not left to the 1 s cap
            assert (await asyncio.wait_for(first, 30)).offset == 0
            await producer.flush(timeout=10)
            assert second.done() and third.done()
        assert sorted((r.partition, r.value) for r in cluster.records("t")) == [
            (0, b"a"),
            (0, b"a2"),
            (0, b"c" * 1000),
            (1, b"b"),
            (2, b"warm"),
        ]


@pytest.mark.asyncio
async def test_a_new_batch_due_before_the_senders_timer_brings_the_timer_forward() -> None:
    """Rather than wake the sender for a pass that would only set a timer for
    the batch's linger, the sender's timer is moved to that linger's end."""
    linger = 0.2
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        producer = make_producer(cluster, SETTINGS, linger_ms=int(linger * 1000))
        async with producer:
            sender = producer._running.sender
            assert sender is not None
            await producer.enqueue("t", b"warm", partition=0)  # opens a batch ...
            await producer.enqueue("t", b"warm2", partition=0)  # ... so this one yields first
            await producer.flush(timeout=10)
            # Asleep to its 1 s cap (nothing queued), and the next enqueue runs
            # to its end without yielding to the loop.
            await until(
                lambda: sender._alarm.waiter is not None and not sender._alarm.waiter.done(),
                10,
                "the sender asleep",
            )
            waiter, timer, asleep_until = (
                sender._alarm.waiter,
                sender._alarm.timer,
                sender._alarm.asleep_until,
            )
            assert timer is not None and asleep_until is not None
            fut = await producer.enqueue("t", b"a", partition=1)  # opens a batch
            batch = producer._acc.open_batch(("t", 1))
            assert batch is not None
            assert not sender._alarm.woken and not waiter.done() and sender._alarm.waiter is waiter
            due = batch.created + linger
            if due < asleep_until:  # always, unless this host stalled for most of a second
                assert sender._alarm.asleep_until == due and sender._alarm.timer is not timer
                assert timer.cancelled() and not sender._alarm.timer.cancelled()
            else:
                assert sender._alarm.asleep_until == asleep_until and sender._alarm.timer is timer
            assert (await asyncio.wait_for(fut, 30)).offset == 0
        assert len(cluster.records("t")) == 3


@pytest.mark.asyncio
async def test_a_record_that_fills_its_batch_exactly_wakes_the_sender() -> None:
    """A batch filled to its size is sendable at once (Java wakes its sender on
    batchIsFull): the sender must not sleep on to the batch's linger."""
    # Two records of 100 B (109 bytes each, same timestamp) and the 61-byte batch header.
    batch_size = 61 + 2 * 109
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        producer = make_producer(
            cluster, SETTINGS, linger_ms=60_000, delivery_timeout_ms=120_000, batch_size=batch_size
        )
        async with producer:
            sender = producer._running.sender
            assert sender is not None
            await producer.enqueue("t", b"w" * 300, partition=1)  # full as it opens: goes now
            await producer.flush(timeout=10)
            await until(
                lambda: sender._alarm.waiter is not None and not sender._alarm.waiter.done(),
                10,
                "the sender asleep",
            )
            waiter = sender._alarm.waiter
            first = await producer.enqueue("t", b"a" * 100, partition=0, timestamp_ms=1_000)
            assert not sender._alarm.woken  # a lingering batch: the sender sleeps on
            await producer.enqueue("t", b"b" * 100, partition=0, timestamp_ms=1_000)
            batch = producer._acc.queues[("t", 0)][0]
            assert batch.record_count == 2 and batch.is_full()
            assert sender._alarm.woken or waiter.done()
            assert (await asyncio.wait_for(first, 30)).offset == 0
        assert len(cluster.records("t")) == 3


@pytest.mark.asyncio
async def test_a_new_batch_for_a_partition_without_a_leader_wakes_the_sender(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass asks for metadata (ready()'s unknown leaders): a batch that
    would linger must not hold that back, even from a sleeping sender."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        producer = make_producer(cluster, SETTINGS, linger_ms=60_000, delivery_timeout_ms=120_000)
        async with producer:
            sender, client = producer._running.sender, producer._running.client
            assert sender is not None and client is not None
            await producer.enqueue("t", b"warm", partition=0)
            await producer.flush(timeout=10)
            cluster.take_leader_offline("t", 1)
            client.request_update()
            await until(
                lambda: client.snapshot.leader_for("t", 1) is None, 10, "metadata without a leader"
            )
            rings: list[None] = []
            ring = SenderAlarm.ring

            def counted(alarm: SenderAlarm) -> None:
                rings.append(None)
                ring(alarm)

            monkeypatch.setattr(SenderAlarm, "ring", counted)
            lingering = await producer.enqueue("t", b"a", partition=0)  # opens a batch ...
            await producer.enqueue("t", b"a2", partition=0)  # ... so this one yields first
            # Asleep now, and the next enqueue runs to its end without yielding
            # to the loop: only its own new batch can ring.
            await until(
                lambda: sender._alarm.waiter is not None and not sender._alarm.waiter.done(),
                10,
                "the sender asleep",
            )
            assert sender._alarm.asleep_until is not None
            asked, before = cluster.request_count(METADATA), len(rings)
            try:
                stranded = await producer.enqueue("t", b"b", partition=1)  # opens a batch: rings
                assert len(rings) == before + 1
                await until(
                    lambda: cluster.request_count(METADATA) > asked, 10, "the metadata request"
                )
            finally:
                cluster.move_leader(
                    "t", 1, 0
                )  # (a failure then closes without waiting out the batch)
            await producer.flush(timeout=30)
            assert lingering.done() and stranded.done()
            assert stranded.result().partition == 1
        assert sorted((r.partition, r.value) for r in cluster.records("t")) == [
            (0, b"a"),
            (0, b"a2"),
            (0, b"warm"),
            (1, b"b"),
        ]


def _request_end_decisions(sender: Any) -> list[bool]:
    """Record each answer of the sender's rule for waking when a request ends."""
    decisions: list[bool] = []
    decide = sender._pass_due_after_request

    def recorded() -> bool:
        decisions.append(decide())
        return decisions[-1]

    sender._pass_due_after_request = recorded
    return decisions


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["lingering", "no room in flight", "retry"])
async def test_a_request_end_wakes_the_sender_only_for_a_batch_that_waited_for_it(
    case: str,
) -> None:
    """A queued batch that only lingers needs no pass when a request ends (the
    sender sleeps no longer than its linger); one held back for want of room in
    flight, or put back for a retry, does."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        producer = make_producer(
            cluster,
            SETTINGS,
            linger_ms=60_000,
            delivery_timeout_ms=120_000,
            batch_size=1024,
            max_in_flight_requests_per_connection=1 if case == "no room in flight" else 5,
        )
        async with producer:
            sender = producer._running.sender
            client = producer._running.client
            assert sender is not None and client is not None
            for p in (0, 1):  # connected, and past each partition's first batch (KIP-98)
                await producer.enqueue("t", b"warm", partition=p)
            await producer.flush(timeout=10)
            decisions = _request_end_decisions(sender)
            if case == "retry":
                cluster.fail_produce("t", 0, errors.NotEnoughReplicasError.code, count=1)
            cluster.stall_broker(0)
            full = await producer.enqueue(
                "t", b"x" * 1000, partition=0
            )  # a full batch goes at once
            await until(lambda: client.connections.in_flight(0) == 1, 10, "the first request")
            if case == "no room in flight":
                passes = sender.passes
                waiting = await producer.enqueue("t", b"y" * 1000, partition=0)
                await until(lambda: sender.passes > passes, 10, "the pass that holds it back")
            else:
                waiting = await producer.enqueue("t", b"lingers", partition=1)
            cluster.resume_broker(0)
            await asyncio.wait_for(full, 30)
            assert decisions[0] is (case != "lingering"), decisions
            if case == "lingering":
                assert not waiting.done()
            else:
                await asyncio.wait_for(waiting, 30)
            await producer.flush(timeout=10)
        assert len(cluster.records("t")) == 4


def wakeups_after_failure(sender: Any, txn: Any) -> list[bool]:
    """Watch ``sender.wakeup``: one entry per call, True if the transaction had
    failed (ABORTABLE_ERROR) when it rang."""
    rang: list[bool] = []
    wakeup = sender.wakeup

    def watched_wakeup() -> None:
        rang.append(txn.state.name == "ABORTABLE_ERROR")
        wakeup()

    sender.wakeup = watched_wakeup
    return rang


@pytest.mark.asyncio
async def test_a_failed_transactions_request_end_fails_its_lingering_batches_at_once() -> None:
    """A batch of a transaction that can only be aborted now must not go out:
    the transaction's failure wakes the sender, which fails the queued batches
    (Java's abortUndrainedBatches) rather than leaving them to their linger."""
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=2)
        # Each partition on its own leader: a drain for the refused batch's
        # node would take the lingering batch along.
        assert cluster.leader("t", 0) != cluster.leader("t", 1)
        producer = make_producer(
            cluster,
            SETTINGS,
            linger_ms=60_000,
            delivery_timeout_ms=120_000,
            batch_size=1024,
            transactional_id="wakeups",
        )
        async with producer:
            sender, txn = producer._running.sender, producer._running.txn
            assert sender is not None and txn is not None
            await asyncio.wait_for(producer.init_transactions(), 30)
            await producer.begin_transaction()
            woken_failed = wakeups_after_failure(sender, txn)
            cluster.fail_produce("t", 0, errors.TransactionAbortableError.code)
            lingering = await producer.enqueue("t", b"lingers", partition=1)
            full = await producer.enqueue("t", b"x" * 1000, partition=0)  # goes at once, refused
            with pytest.raises(errors.TransactionAbortableError):
                await asyncio.wait_for(full, 30)
            assert any(woken_failed), woken_failed  # the failure itself rang
            with pytest.raises(errors.TransactionAbortedError):
                await asyncio.wait_for(lingering, 30)
            await asyncio.wait_for(producer.abort_transaction(), 30)
        assert cluster.records("t") == []
