"""Random interleavings of the producer's calls and the mock cluster's faults keep every promise.

Each case is a seeded random program (reproducible: the seed is in the test id)
of send / enqueue / cancelled sends / enqueue_many / flush / begin / commit /
abort / prepare and complete_transaction (by the producer itself or a courier,
sometimes replayed) / close, interleaved with injected faults (refused or
written-then-refused Produce answers, dropped connections, stalled brokers,
delayed answers). At the end it checks:

* every future the program was handed is done, and every call returned within
  its bound (each is awaited under :func:`within`);
* a future that reports success names a record in the log exactly once;
  outside transactions it is visible, inside one it is visible exactly when
  that transaction committed;
* a transaction is all or nothing: the records of its successful futures are
  either all visible or none;
* an error with ``may_have_been_written`` False names a record that is not in
  the log at all, not even uncommitted;
* no transaction is Ongoing on the coordinator once close() has returned.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import random
from typing import Any

import pytest

from aioproducer import BulkProgress, BulkSendError, Producer, errors
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.txn import TxnStatus
from tests.support.aio import within

pytestmark = pytest.mark.asyncio

BOUND = 60.0  # every call: far above what any of them needs here, far below a hang
SEEDS = range(int(os.environ.get("AIOPRODUCER_INTERLEAVING_SEEDS", "12")))
TOPIC = "i"
# Faults a Produce answer can carry: retriable and not, and one written before the refusal.
_REFUSALS = (
    (errors.NotEnoughReplicasError.code, False),
    (errors.InvalidRecordError.code, False),
    (errors.NotLeaderOrFollowerError.code, False),
    (errors.NotEnoughReplicasAfterAppendError.code, True),
)


@dataclasses.dataclass
class Sent:
    """A record the program handed to the producer and holds the future of."""

    value: bytes
    future: asyncio.Future[Any]
    generation: int  # the transaction it was sent in; 0 outside transactions


@dataclasses.dataclass
class BulkSent:
    """The records of one enqueue_many() call and the future of their BulkResult."""

    values: list[bytes]
    future: asyncio.Future[Any]
    generation: int


@dataclasses.dataclass
class Outcome:
    """What a record's future said: written (``error`` None) or why not."""

    value: bytes
    generation: int
    error: BaseException | None


def _outcomes(program: Program) -> list[Outcome]:
    """Every record's outcome, per-record futures and bulk results alike."""
    out = []
    for sent in program.sent:
        assert sent.future.done(), f"{sent.value!r}: its future never resolved"
        if not sent.future.cancelled():
            out.append(Outcome(sent.value, sent.generation, sent.future.exception()))
    for call in program.bulk:
        assert call.future.done(), f"a bulk call of {len(call.values)} never resolved"
        exc = call.future.exception()
        if exc is None:
            result = call.future.result()
        else:
            assert isinstance(exc, BulkSendError), repr(exc)
            result = exc.result
        for i, value in enumerate(call.values):
            try:
                result[i]
            except errors.KafkaError as failed:
                out.append(Outcome(value, call.generation, failed))
            else:
                out.append(Outcome(value, call.generation, None))
    return out


@dataclasses.dataclass
class Program:
    rng: random.Random
    cluster: MockCluster
    producer: Producer
    courier: Producer
    transactional: bool
    sent: list[Sent] = dataclasses.field(default_factory=list)
    bulk: list[BulkSent] = dataclasses.field(default_factory=list)
    # Values of calls that buffered none of them: never in the log.
    never_buffered: set[bytes] = dataclasses.field(default_factory=set)
    # Values sent by a send() cancelled before it handed back a future.
    unknown: set[bytes] = dataclasses.field(default_factory=set)
    generation: int = 0
    in_transaction: bool = False
    # Generation -> True committed, False aborted, None unknown (an end that failed).
    outcomes: dict[int, bool | None] = dataclasses.field(default_factory=dict)
    stalled: set[int] = dataclasses.field(default_factory=set)
    counter: int = 0
    # Prepared transactions whose completion failed: (prepared, commit, generation).
    unfinished: list[tuple[Any, bool, int]] = dataclasses.field(default_factory=list)
    # What the program did, to read when a check fails.
    trace: list[str] = dataclasses.field(default_factory=list)

    def value(self) -> bytes:
        self.counter += 1
        return b"v%d" % self.counter

    # -- calls ---------------------------------------------------------------

    async def enqueue(self) -> None:
        for _ in range(self.rng.randint(1, 12)):
            value = self.value()
            try:
                fut = await within(self.producer.enqueue(TOPIC, value), BOUND, "enqueue")
            except errors.KafkaError as exc:
                self.trace.append(f"raised {exc!r:.300}")
                return  # refused at once (a failed transaction): nothing buffered
            self.sent.append(Sent(value, fut, self.generation))

    async def cancelled_send(self) -> None:
        value = self.value()
        task = asyncio.ensure_future(self.producer.send(TOPIC, value, key=value))
        for _ in range(self.rng.randint(0, 4)):
            await asyncio.sleep(0)
        task.cancel()
        await within(asyncio.wait([task]), BOUND, "a cancelled send")
        self.unknown.add(value)  # its record may or may not be buffered

    async def enqueue_many(self) -> None:
        values = [self.value() for _ in range(self.rng.randint(1, 40))]
        try:
            fut = await within(self.producer.enqueue_many(TOPIC, values), BOUND, "enqueue_many")
        except errors.KafkaError as exc:
            self.trace.append(f"raised {exc!r:.300}")
            return  # refused before anything was buffered
        self.bulk.append(BulkSent(values, fut, self.generation))

    async def cancelled_send_many(self) -> None:
        """A send_many cancelled at a random point: its progress says what went in."""
        values = [self.value() for _ in range(self.rng.randint(1, 400))]
        progress = BulkProgress()
        task = asyncio.ensure_future(self.producer.send_many(TOPIC, values, progress=progress))
        for _ in range(self.rng.randint(0, 6)):
            await asyncio.sleep(0)
        task.cancel()
        await within(asyncio.wait([task]), BOUND, "a cancelled send_many")
        if task.cancelled() or isinstance(task.exception(), errors.KafkaError):
            # The records past the prefix were never buffered: a retry is safe.
            assert progress.buffered == 0 or progress.future is not None, progress
            if progress.future is not None:
                self.bulk.append(BulkSent(values, progress.future, self.generation))
            else:
                self.never_buffered.update(values)
        else:
            self.bulk.append(BulkSent(values, task, self.generation))

    async def flush(self) -> None:
        try:
            await within(self.producer.flush(timeout=BOUND / 2), BOUND, "flush")
        except errors.KafkaTimeoutError:
            pass

    async def begin(self) -> None:
        if not self.transactional or self.in_transaction:
            return
        try:
            await self.producer.begin_transaction()
        except errors.IllegalStateError:
            return  # an earlier end failed and is still to be retried
        self.generation += 1
        self.in_transaction = True

    async def commit(self) -> None:
        if not self.in_transaction:
            return
        try:
            await within(self.producer.commit_transaction(), BOUND, "commit")
        except errors.KafkaError as exc:
            self.trace.append(f"raised {exc!r:.300}")
            await self.abort()
            return
        self._ended(True)

    async def abort(self) -> None:
        if not self.in_transaction:
            return
        try:
            await within(self.producer.abort_transaction(), BOUND, "abort")
        except errors.KafkaError as exc:
            self.trace.append(f"raised {exc!r:.300}")
            self._ended(None)
            return
        self._ended(False)

    async def two_phase(self) -> None:
        if not self.in_transaction:
            return
        try:
            prepared = await within(self.producer.prepare_transaction(), BOUND, "prepare")
        except errors.KafkaError as exc:
            self.trace.append(f"raised {exc!r:.300}")
            await self.abort()
            return
        commit = self.rng.random() < 0.6
        completer = self.producer if self.rng.random() < 0.5 else self.courier
        try:
            await within(completer.complete_transaction(prepared, commit=commit), BOUND, "complete")
        except errors.KafkaError as exc:
            self.trace.append(f"raised {exc!r:.300}")
            # Unreachable: the holder of a PreparedTransaction completes it later.
            self._ended(None)
            self.unfinished.append((prepared, commit, self.generation))
            return
        self._ended(commit)
        if self.rng.random() < 0.5:  # a replay, either way, by either party
            replayer = self.producer if self.rng.random() < 0.5 else self.courier
            again = self.rng.random() < 0.5
            try:
                await within(replayer.complete_transaction(prepared, commit=again), BOUND, "replay")
            except errors.TransactionNotCompletedError:
                pass
            else:
                # Only an empty transaction (nothing to end) may be "ended" both ways.
                assert again == commit or prepared.empty, "a replay the other way succeeded"

    async def finish_prepared(self) -> None:
        """Complete the prepared transactions whose completion failed, as their holder must."""
        for prepared, commit, generation in self.unfinished:
            try:
                await within(self.courier.complete_transaction(prepared, commit=commit), BOUND)
            except errors.TransactionNotCompletedError as exc:
                self.trace.append(f"raised {exc!r:.300}")
            else:
                self.outcomes[generation] = commit
        self.unfinished.clear()

    def _ended(self, outcome: bool | None) -> None:
        self.trace.append(f"transaction {self.generation} ended: {outcome}")
        self.outcomes[self.generation] = outcome
        self.in_transaction = False

    # -- faults ----------------------------------------------------------------

    def fault(self) -> None:
        cluster, rng = self.cluster, self.rng
        for broker in list(self.stalled):
            cluster.resume_broker(broker)
            self.stalled.discard(broker)
        kind = rng.randrange(4)
        partition = rng.randrange(len(cluster.partitions(TOPIC)))
        self.trace.append(f"fault {kind} on partition {partition}")
        if kind == 0:
            code, after_append = rng.choice(_REFUSALS)
            cluster.fail_produce(TOPIC, partition, code, after_append=after_append)
        elif kind == 1:
            cluster.drop_connections(rng.choice(cluster.broker_ids))
        elif kind == 2:
            broker = rng.choice(cluster.broker_ids)
            cluster.stall_broker(broker)
            self.stalled.add(broker)
        else:
            cluster.delay_responses(0.05, broker=rng.choice(cluster.broker_ids), count=2)


async def _run(program: Program, steps: int) -> None:
    rng = program.rng
    calls = [
        program.enqueue,
        program.enqueue,
        program.cancelled_send,
        program.flush,
        program.enqueue_many,
        program.cancelled_send_many,
    ]
    if program.transactional:
        calls += [program.begin, program.begin, program.commit, program.abort, program.two_phase]
        await within(program.producer.init_transactions(), BOUND, "init_transactions")
        await program.begin()
    for _ in range(steps):
        if rng.random() < 0.25:
            program.fault()
        else:
            call = rng.choice(calls)
            program.trace.append(call.__name__)
            await call()
    program.cluster.clear_faults()
    program.stalled.clear()
    await program.finish_prepared()
    if program.in_transaction and rng.random() < 0.5:
        await program.commit()
    elif program.in_transaction:
        program._ended(False)  # close aborts a transaction begun and not ended


def _check(program: Program, close_error: BaseException | None) -> None:
    cluster = program.cluster
    visible = collections.Counter(r.value for r in cluster.records(TOPIC))
    logged = collections.Counter(r.value for r in cluster.records(TOPIC, include_uncommitted=True))
    assert all(n == 1 for n in logged.values()), [v for v, n in logged.items() if n > 1][:5]
    by_generation: dict[int, list[bool]] = collections.defaultdict(list)
    for outcome in _outcomes(program):
        exc, value = outcome.error, outcome.value
        if exc is None:
            assert logged[value] == 1, f"{value!r} reported written, not in the log"
            if outcome.generation == 0:
                assert visible[value] == 1, f"{value!r} reported written, not visible"
            else:
                by_generation[outcome.generation].append(visible[value] == 1)
        else:
            assert isinstance(exc, errors.KafkaError), repr(exc)
            assert exc.may_have_been_written is not None, f"{exc!r} says nothing of the log"
            if not exc.may_have_been_written:
                assert logged[value] == 0, f"{value!r}: {exc!r} said not written"
    assert not any(logged[v] for v in program.never_buffered), "a call that buffered nothing wrote"
    for generation, seen in by_generation.items():
        outcome = program.outcomes.get(generation)
        if outcome is True:
            assert all(seen), f"transaction {generation} committed, records missing"
        elif outcome is False:
            assert not any(seen), f"transaction {generation} aborted, records visible"
        else:
            assert all(seen) or not any(seen), f"transaction {generation} half visible"
    txn = cluster.coordinator.by_id.get("interleaved")
    if txn is not None and not isinstance(close_error, errors.TransactionNotCompletedError):
        assert txn.status is not TxnStatus.ONGOING, (
            f"close() returned with a transaction open; {program.trace[-12:]}"
        )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("seed", SEEDS)
async def test_random_interleavings_keep_every_promise(seed: int, version: int) -> None:
    rng = random.Random(seed * 1_000_003 + version)
    transactional = rng.random() < 0.7
    async with MockCluster(brokers=2, transaction_version=version) as cluster:
        cluster.create_topic(TOPIC, partitions=3)
        settings: dict[str, Any] = {
            "linger_ms": rng.choice([0, 2, 20]),
            "batch_size": rng.choice([256, 16_384]),
            "max_block_ms": 5_000,
            "request_timeout_ms": 3_000,
            "delivery_timeout_ms": 8_000,
            "retry_backoff_ms": 5,
            "retry_backoff_max_ms": 50,
        }
        if transactional:
            settings["transactional_id"] = "interleaved"
        producer = Producer(cluster.bootstrap_servers, **settings)
        courier = Producer(cluster.bootstrap_servers, max_block_ms=5_000)
        await within(producer.start(), BOUND, "start")
        await within(courier.start(), BOUND, "courier start")
        program = Program(rng, cluster, producer, courier, transactional)
        close_error: BaseException | None = None
        try:
            await _run(program, rng.randint(8, 30))
        finally:
            try:
                await within(producer.close(), BOUND, "close")
            except errors.KafkaError as exc:
                close_error = exc
            await within(courier.close(), BOUND, "courier close")
        _check(program, close_error)
