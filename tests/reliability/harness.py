"""Shared machinery of the reliability suite: tracked sends and the delivery checks.

A :class:`Tracker` produces keyed records whose values name their key and their
position in that key's stream (``k07:000123``), counts how often each future
resolves, and :meth:`Tracker.check_exactly_once` compares the futures with what
the mock cluster actually stored.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aioproducer import Producer, RecordMetadata
from aioproducer.engine.accumulator import RecordAccumulator
from aioproducer.protocol.apis import PRODUCE
from aioproducer.protocol.record_parsing import parse_record_batches

__all__ = [
    "FAST",
    "PRODUCE_KEY",
    "RetryLog",
    "Tracker",
    "within",
]

T = TypeVar("T")

PRODUCE_KEY = PRODUCE.key

# Producer settings that keep fault recovery in the tens of milliseconds (the
# defaults back off for up to a second and wait 30 s for a response).
FAST: dict[str, Any] = {
    "linger_ms": 2,
    "batch_size": 2048,  # many small batches: several in flight per partition
    "request_timeout_ms": 400,
    "delivery_timeout_ms": 30_000,
    "retry_backoff_ms": 10,
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "max_block_ms": 10_000,
}


async def within(aw: Awaitable[T], seconds: float, what: str) -> T:
    """Await ``aw`` for at most ``seconds``: a hang becomes a failure, not a stuck run."""
    try:
        return await asyncio.wait_for(aw, seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"{what} did not finish within {seconds} s") from None


@dataclass
class Sent:
    key: bytes
    value: bytes
    future: asyncio.Future[RecordMetadata]
    resolutions: int = 0


@dataclass
class Tracker:
    """Records sent to one topic, in send order, with their futures."""

    topic: str
    keys: int = 20
    sent: list[Sent] = field(default_factory=list)
    _next: Counter[bytes] = field(default_factory=Counter)

    def value_for(self, key: bytes) -> bytes:
        n = self._next[key]
        self._next[key] += 1
        return b"%s:%06d" % (key, n)

    async def enqueue(
        self, producer: Producer, key: bytes | None = None, *, partition: int | None = None
    ) -> Sent:
        if key is None:
            key = b"k%02d" % (len(self.sent) % self.keys)
        value = self.value_for(key)
        fut = await producer.enqueue(self.topic, value, key=key, partition=partition)
        entry = Sent(key, value, fut)

        def resolved(_: asyncio.Future[RecordMetadata]) -> None:
            entry.resolutions += 1

        fut.add_done_callback(resolved)
        self.sent.append(entry)
        return entry

    async def wait_all(self, seconds: float) -> None:
        """Wait until every future is resolved (with anything)."""
        futures = [s.future for s in self.sent]
        await within(
            asyncio.gather(*futures, return_exceptions=True), seconds, f"{len(futures)} sends"
        )
        # Done callbacks run one loop iteration after the future resolves.
        await asyncio.sleep(0)

    def failures(self) -> list[tuple[Sent, BaseException]]:
        return [
            (s, s.future.exception())  # type: ignore[misc]
            for s in self.sent
            if s.future.done() and not s.future.cancelled() and s.future.exception() is not None
        ]

    def check_resolved_once(self) -> None:
        pending = [s.value for s in self.sent if not s.future.done()]
        assert not pending, f"{len(pending)} futures never resolved, e.g. {pending[:5]}"
        wrong = [(s.value, s.resolutions) for s in self.sent if s.resolutions != 1]
        assert not wrong, f"futures resolved other than exactly once: {wrong[:10]}"

    def stored(self, cluster: Any) -> list[Any]:
        """The topic's committed records, by partition then offset."""
        return sorted(cluster.records(self.topic), key=lambda r: (r.partition, r.offset))

    def check_exactly_once(self, cluster: Any, *, allow_failed: Iterable[bytes] = ()) -> list[Any]:
        """Every acknowledged record stored once, per-key order kept, futures resolved once.

        Values in ``allow_failed`` belong to records expected to fail: they must
        not be acknowledged and may be stored at most once. Returns the stored records.
        """
        self.check_resolved_once()
        expected_failures = set(allow_failed)
        failed = {s.value: exc for s, exc in self.failures()}
        unexpected = {v: e for v, e in failed.items() if v not in expected_failures}
        assert not unexpected, f"{len(unexpected)} records failed: " + "; ".join(
            f"{v!r}: {e!r}" for v, e in list(unexpected.items())[:5]
        )
        not_failed = expected_failures - set(failed)
        assert not not_failed, f"records expected to fail were acknowledged: {sorted(not_failed)}"

        records = self.stored(cluster)
        counts = Counter(r.value for r in records)
        dupes = {v: c for v, c in counts.items() if c > 1}
        assert not dupes, (
            f"{len(dupes)} records stored more than once, e.g. {list(dupes.items())[:5]}"
        )
        acked = [s for s in self.sent if s.value not in failed]
        missing = [s.value for s in acked if s.value not in counts]
        assert not missing, f"{len(missing)} acknowledged records are missing, e.g. {missing[:5]}"
        unknown = set(counts) - {s.value for s in self.sent}
        assert not unknown, f"records nobody sent: {sorted(unknown)[:5]}"

        check_key_order(records)
        # Each future's metadata points at its record (unless the broker
        # answered a duplicate without an offset).
        by_position = {(r.partition, r.offset): r for r in records}
        for s in acked:
            md = s.future.result()
            if md.offset >= 0:
                record = by_position.get((md.partition, md.offset))
                assert record is not None and record.value == s.value, (
                    f"{s.value!r} acknowledged at {md.partition}/{md.offset}, which holds "
                    f"{None if record is None else record.value!r}"
                )
        return records


def check_key_order(records: Iterable[Any]) -> None:
    """Within each key, values appear in send order (records given by partition, offset)."""
    last: dict[bytes, int] = {}
    for r in records:
        key, _, n = r.value.partition(b":")
        assert r.key == key, f"record {r.value!r} has key {r.key!r}"
        position = int(n)
        previous = last.get(key, -1)
        assert position > previous, (
            f"key {key!r}: {r.value!r} stored after position {previous} "
            f"(partition {r.partition}, offset {r.offset})"
        )
        last[key] = position


class RetryLog:
    """Values of records whose batch went back to the queue for a retry.

    Installed by patching :meth:`RecordAccumulator.reenqueue`, the one place a
    batch is retried; it reads the retried batch's values from the bytes it sent.
    """

    def __init__(self, monkeypatch: Any, tracker: Tracker) -> None:
        self.batches = 0
        self._retried: set[bytes] = set()
        self._tracker = tracker
        original = RecordAccumulator.reenqueue

        def reenqueue(acc: RecordAccumulator, batch: Any, now: float, backoff: float) -> None:
            self.batches += 1
            if batch.payload is not None:  # sent once: what it holds is what went out
                for parsed in parse_record_batches(batch.payload):
                    self._retried.update(r.value for r in parsed.records if r.value is not None)
            original(acc, batch, now, backoff)

        monkeypatch.setattr(RecordAccumulator, "reenqueue", reenqueue)

    def values(self) -> set[bytes]:
        return {s.value for s in self._tracker.sent if s.value in self._retried}
