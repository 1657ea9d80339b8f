"""A record that enqueue's shortcut lanes append and that fills its batch exactly wakes the sender.

The full path wakes the sender when a record leaves its batch full (Java's
``batchIsFull`` in ``RecordAccumulator.append``'s result): the batch is
sendable now, whatever its linger. The unkeyed and keyed lanes
(engine/unkeyed_lane.py, engine/keyed_lane.py) must do the same, or the batch
waits for the sender's idle pass or its linger. Each test fills a batch
exactly through a lane, with a linger far longer than the test, and checks
that the enqueue of the filling record rang the sender's alarm (counted, not
timed: that enqueue runs to its end without yielding to the loop, so nothing
else can ring meanwhile) and that the batch went.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import time_ns
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.engine.admission import Admission
from aioproducer.engine.sender_alarm import SenderAlarm
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster
from tests.support.producers import make_producer

LINGER_MS = 60_000
# Far below the linger: a batch that went within it went because it was full.
SETTLE = 30
# The first record is stamped this long before the others, which the lanes stamp
# now: their timestamp deltas then take 4 bytes each (zigzag varints of 2**20 to
# 2**27 ms, 17 minutes to 37 hours) however slowly the test runs, so the batch
# size the records fill exactly is known in advance.
BACK_MS = 3_600_000
SETTINGS: dict[str, Any] = {
    "linger_ms": LINGER_MS,
    "delivery_timeout_ms": 2 * LINGER_MS,
    "retry_backoff_ms": 50,
    "compression": "none",
}


def _exact_batch_size(records: Sequence[tuple[int, bytes | None, bytes]]) -> int:
    """The size of a batch holding ``records`` (timestamp, key, value), as the producer encodes it."""
    builder = RecordBatchBuilder(codec=Codec.NONE, batch_size=1 << 20)
    for timestamp_ms, key, value in records:
        assert builder.append(timestamp_ms, key, value, None) is not None
    return builder.size_in_bytes


class _Watch:
    """Counts the sender's alarm rings and the records that took enqueue's full path."""

    def __init__(self, producer: Producer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rings = 0
        self.full_path = 0
        ring = SenderAlarm.ring

        def counted_ring(alarm: SenderAlarm) -> None:
            self.rings += 1
            ring(alarm)

        monkeypatch.setattr(SenderAlarm, "ring", counted_ring)
        place = Admission.place

        def counted_place(admission: Admission, *args: Any) -> Any:
            self.full_path += 1
            return place(admission, *args)

        monkeypatch.setattr(Admission, "place", counted_place)


async def _fill_last(producer: Producer, watch: _Watch, last: Any) -> asyncio.Future[Any]:
    """Enqueue the record that fills the open batch of ("t", 0); check that a lane took it
    and woke the sender."""
    batch = producer._acc.open_batch(("t", 0))
    assert batch is not None and not batch.is_full()
    rings, full_path = watch.rings, watch.full_path
    fut = await last
    assert watch.full_path == full_path, "the filling record took the full path, not a lane"
    assert producer._acc.queues[("t", 0)][-1] is batch and batch.is_full()
    assert watch.rings > rings, "the lane filled the batch and left the sender asleep"
    return fut


@pytest.mark.asyncio
@pytest.mark.parametrize("opener", ["sticky", "partition"])
async def test_the_unkeyed_lane_wakes_the_sender_for_a_batch_it_fills(
    monkeypatch: pytest.MonkeyPatch, opener: str
) -> None:
    """``sticky``: every record goes to the sticky partition, whose turn ends with
    the last one (the append answers SWITCH and FULL). ``partition``: a large
    first record, sent to the partition by number, leaves the sticky count short
    of the batch size (FULL alone)."""
    base = time_ns() // 1_000_000 - BACK_MS
    first = b"o" * 300 if opener == "partition" else b"a" * 100
    values = [b"b" * 100, b"c" * 100, b"d" * 100]
    batch_size = _exact_batch_size(
        [(base, None, first)] + [(base + BACK_MS, None, v) for v in values]
    )
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(cluster, SETTINGS, batch_size=batch_size) as producer:
            watch = _Watch(producer, monkeypatch)
            futures = [
                await producer.enqueue(
                    "t", first, partition=0 if opener == "partition" else None, timestamp_ms=base
                )
            ]
            for value in values[:-1]:
                futures.append(await producer.enqueue("t", value))
            if opener == "sticky":  # the lane took the second and third records too
                assert watch.full_path == 1
            futures.append(await _fill_last(producer, watch, producer.enqueue("t", values[-1])))
            results = await asyncio.wait_for(asyncio.gather(*futures), SETTLE)
            assert [r.offset for r in results] == [0, 1, 2, 3]
        assert [r.value for r in cluster.records("t")] == [first, *values]


@pytest.mark.asyncio
async def test_the_keyed_lane_wakes_the_sender_for_a_batch_it_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = time_ns() // 1_000_000 - BACK_MS
    key = b"key"
    values = [b"a" * 100, b"b" * 100, b"c" * 100]
    batch_size = _exact_batch_size(
        [(base, key, values[0])] + [(base + BACK_MS, key, v) for v in values[1:]]
    )
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with make_producer(cluster, SETTINGS, batch_size=batch_size) as producer:
            watch = _Watch(producer, monkeypatch)
            futures = [await producer.enqueue("t", values[0], key, timestamp_ms=base)]
            futures.append(await producer.enqueue("t", values[1], key))
            assert watch.full_path == 1  # the keyed lane took the second record
            futures.append(await _fill_last(producer, watch, producer.enqueue("t", values[2], key)))
            results = await asyncio.wait_for(asyncio.gather(*futures), SETTLE)
            assert [r.offset for r in results] == [0, 1, 2]
        assert [(r.key, r.value) for r in cluster.records("t")] == [(key, v) for v in values]
