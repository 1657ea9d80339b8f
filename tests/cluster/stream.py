"""Keyed records produced at a steady rate while a test breaks the cluster.

:class:`SteadyStream` enqueues records in a background task (``rate`` per
second, ``keys`` distinct keys) and keeps every future. Each value carries its
send index, so :func:`assert_exactly_once` can check, against what a client we
did not write (confluent-kafka) reads back, that nothing was lost, nothing
duplicated, and each partition holds its records in the order they were sent.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import KafkaError
from tests.cluster.settings import SETTINGS
from tests.support.aio import read_back, within
from tests.support.kafka_cluster import KafkaCluster
from tests.support.producers import make_producer
from tests.support.verify import ConsumedRecord

__all__ = ["SteadyStream", "assert_exactly_once", "finish", "streaming"]

_PAD = b"the quick brown fox jumps over the lazy dog; " * 3


class SteadyStream:
    """A background task enqueueing keyed records at about ``rate`` per second."""

    def __init__(
        self, producer: Producer, topic: str, *, rate: int = 1000, keys: int = 24, first: int = 0
    ) -> None:
        """``first`` is the send index of the first record (streams that follow
        one another on a topic continue the numbering)."""
        self.producer = producer
        self.first = first
        self.topic = topic
        self.rate = rate
        self.keys = keys
        self.values: list[bytes] = []
        self.futures: list[asyncio.Future[RecordMetadata]] = []
        self.acked = 0
        #: Acknowledged records per partition.
        self.acked_on: Counter[int] = Counter()
        self.failed = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._progress = asyncio.Event()
        #: What refused a record and ended the stream, if anything did.
        self.enqueue_error: KafkaError | None = None

    def start(self) -> SteadyStream:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="steady-stream")
        return self

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        tick = 0.01
        per_tick = max(1, round(self.rate * tick))
        next_at = loop.time()
        while not self._stop.is_set():
            for _ in range(per_tick):
                i = self.first + len(self.values)
                key = b"key-%03d" % (i % self.keys)
                value = b"%09d|%s|" % (i, key) + _PAD
                try:
                    fut = await self.producer.enqueue(self.topic, value, key=key)
                except KafkaError as exc:
                    # Refused, e.g. a transaction that can only be aborted now.
                    self.enqueue_error = exc
                    return
                self.values.append(value)
                self.futures.append(fut)
                fut.add_done_callback(self._on_done)
            next_at += tick
            now = loop.time()
            if next_at < now - 1.0:
                next_at = now  # fell far behind (enqueue blocked): no burst to catch up
            await asyncio.sleep(max(0.0, next_at - now))

    def _on_done(self, fut: asyncio.Future[RecordMetadata]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.failed += 1
        else:
            self.acked += 1
            self.acked_on[fut.result().partition] += 1
        self._progress.set()

    @property
    def sent(self) -> int:
        return len(self.values)

    def check_running(self) -> None:
        """Raise what stopped the sending task, if it stopped by itself."""
        if self._task is not None and self._task.done():
            self._task.result()
            raise AssertionError(
                f"the sending task ended before it was stopped: {self.enqueue_error!r}"
            )

    async def wait_acked(
        self,
        more: int,
        timeout: float,
        what: str = "records",
        *,
        partitions: Collection[int] | None = None,
    ) -> None:
        """Wait until ``more`` records beyond those acknowledged now are acknowledged
        (on ``partitions`` only, if given)."""

        def count() -> int:
            if partitions is None:
                return self.acked
            return sum(self.acked_on[p] for p in partitions)

        target = count() + more
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while count() < target:
            self.check_running()
            left = deadline - loop.time()
            if left <= 0:
                on = "" if partitions is None else f" on partitions {sorted(partitions)}"
                raise AssertionError(
                    f"{what}: only {count()}/{target} acknowledged{on} within {timeout} s "
                    f"({self.sent} sent, {self.acked} acknowledged, {self.failed} failed)"
                )
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass

    async def stop(self, timeout: float) -> list[RecordMetadata | BaseException]:
        """Stop sending; wait (at most ``timeout``) for every outcome, in send order."""
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 10)
        _done, pending = (
            await asyncio.wait(self.futures, timeout=timeout) if self.futures else ((), ())
        )
        assert not pending, (
            f"{len(pending)} of {len(self.futures)} futures unresolved {timeout} s after the "
            f"stream stopped"
        )
        return [f.exception() or f.result() for f in self.futures]


@asynccontextmanager
async def streaming(
    cluster: KafkaCluster, topic: str, *, rate: int = 1000, keys: int = 24, **overrides: Any
) -> AsyncIterator[SteadyStream]:
    """A producer with the cluster tests' :data:`SETTINGS` (and ``overrides``),
    started, streaming to ``topic``; closed on the way out."""
    producer = make_producer(cluster, SETTINGS, **overrides)
    await within(producer.start(), 30, "start")
    try:
        yield SteadyStream(producer, topic, rate=rate, keys=keys).start()
    finally:
        await within(producer.close(), 60, "close")


async def finish(cluster: KafkaCluster, stream: SteadyStream) -> None:
    """Stop the stream, wait for every outcome, read back and check exactly-once."""
    results = await stream.stop(timeout=120)
    records = await read_back(
        cluster.bootstrap_servers, stream.topic, stream.sent, timeout=60, grace=2.0
    )
    assert_exactly_once(stream.values, results, records)


def assert_exactly_once(
    values: Sequence[bytes],
    results: Sequence[RecordMetadata | BaseException],
    records: Sequence[ConsumedRecord],
    *,
    failed_ok: bool = False,
    failed_may_be_written: bool = False,
) -> None:
    """Every acknowledged record is in the topic once, where its metadata says, in send order.

    ``values`` are the records sent (:attr:`SteadyStream.values`, or several
    streams' one after another), ``results`` their outcomes, ``records`` what
    was read back, in (partition, offset) order.

    Without ``failed_ok`` every record must have succeeded; with it, records
    whose future failed must be absent (the caller checked the errors), unless
    ``failed_may_be_written`` (a record that timed out in flight may have been
    written): then they may be present, once, in order.
    """
    acked = {v for v, r in zip(values, results) if isinstance(r, RecordMetadata)}
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    if not failed_ok:
        assert not failed, f"{len(failed)} records failed, first: {failed[0]!r}"
    if failed_may_be_written:
        acked |= {v for v, r in zip(values, results) if not isinstance(r, RecordMetadata)} & {
            r.value for r in records
        }
    got = [r.value for r in records]
    dupes = len(got) - len(set(got))
    assert dupes == 0, f"{dupes} duplicated records"
    lost = acked - set(got)
    assert not lost, f"{len(lost)} acknowledged records missing, e.g. {sorted(lost)[:3]}"
    strays = set(got) - acked
    assert not strays, (
        f"{len(strays)} records read back that were not acknowledged, e.g. {sorted(strays)[:3]}"
    )
    by_position = {(r.partition, r.offset): r for r in records}
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    for value, result in zip(values, results):
        if not isinstance(result, RecordMetadata):
            continue
        record = by_position.get((result.partition, result.offset))
        assert record is not None and record.value == value, (
            f"{value[:20]!r} acknowledged at {result.partition}/{result.offset}, "
            f"found {None if record is None else record.value[:20]!r} there"
        )
        partitions_of_key[value.split(b"|")[1]].add(result.partition)
    split = {k: p for k, p in partitions_of_key.items() if len(p) > 1}
    assert not split, f"keys written to several partitions: {split}"
    last: dict[int, int] = {}
    for r in records:  # in (partition, offset) order
        index = int(r.value.split(b"|")[0])
        assert index > last.get(r.partition, -1), (
            f"partition {r.partition}: record {index} at offset {r.offset} after record "
            f"{last[r.partition]}: order not kept"
        )
        last[r.partition] = index
