"""A seeded random mix of faults during a few thousand keyed records.

Each seed draws its own schedule: which fault (leader move, NOT_LEADER burst,
connections cut mid-response, a response held past the request timeout), on
which partition or broker, after how many records. The schedule is a pure
function of the seed (printed with the test), so a failing seed replays the
same faults at the same points of the stream; how they interleave with the
batches in flight still depends on timing. Whatever the interleaving, with
idempotence every record is stored exactly once, each key keeps its order and
every future resolves once.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer import errors
from tests.reliability.harness import FAST, PRODUCE_KEY, RetryLog, Tracker

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.kafka_cluster(brokers=3, default_partitions=6, auto_create_topics=True),
]

SEEDS = list(range(10))
RECORDS = 3000
PARTITIONS = 6
NOT_LEADER = errors.NotLeaderOrFollowerError.code
PAST_REQUEST_TIMEOUT = FAST["request_timeout_ms"] * 1.5 / 1000
KINDS = ("move-leader", "not-leader-burst", "drop-mid-response", "delay-past-request-timeout")


@dataclass(frozen=True)
class Fault:
    at: int  # injected just before this record is enqueued
    kind: str
    partition: int
    broker_index: int
    count: int

    def apply(self, cluster: Any, topic: str) -> None:
        broker = sorted(cluster.broker_ids)[self.broker_index % len(cluster.broker_ids)]
        if self.kind == "move-leader":
            cluster.move_leader(topic, self.partition)
        elif self.kind == "not-leader-burst":
            cluster.fail_produce(topic, self.partition, NOT_LEADER, count=self.count)
        elif self.kind == "drop-mid-response":
            # Cut the broker's ``count``-th next response in half: the request
            # was written, the client never learns it.
            cluster.drop_connections(broker, after_requests=self.count, mid_response=True)
        elif self.kind == "delay-past-request-timeout":
            cluster.delay_responses(
                PAST_REQUEST_TIMEOUT, broker=broker, api_key=PRODUCE_KEY, count=self.count
            )
        else:  # pragma: no cover - KINDS and this method go together
            raise AssertionError(self.kind)

    def __str__(self) -> str:
        return f"@{self.at}:{self.kind}(p{self.partition}, b#{self.broker_index}, x{self.count})"


def schedule(seed: int) -> list[Fault]:
    """The faults of one seed, in stream order."""
    rng = random.Random(seed)
    faults = [
        Fault(
            at=rng.randrange(RECORDS),
            kind=rng.choice(KINDS),
            partition=rng.randrange(PARTITIONS),
            broker_index=rng.randrange(3),
            count=rng.randint(1, 4),
        )
        for _ in range(rng.randint(6, 14))
    ]
    return sorted(faults, key=lambda f: f.at)


@pytest.mark.parametrize("seed", SEEDS)
async def test_random_fault_mix_keeps_exactly_once_and_order(
    seed: int,
    kafka_cluster: Any,
    producer: Any,
    scenario: Callable[[str], None],
    monkeypatch: Any,
) -> None:
    faults = schedule(seed)
    print(f"seed {seed}: " + " ".join(map(str, faults)))
    rng = random.Random(seed ^ 0x5EED)  # pacing of the stream, separate from the schedule
    topic = f"random-mix-{seed}"
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    p = await producer(**FAST)
    await p.partitions_for(topic)
    tracker = Tracker(topic, keys=rng.randint(8, 40))
    retries = RetryLog(monkeypatch, tracker)

    pending = list(faults)
    for i in range(RECORDS):
        while pending and pending[0].at == i:
            pending.pop(0).apply(kafka_cluster, topic)
        await tracker.enqueue(p)
        if rng.random() < 0.03:
            await asyncio.sleep(rng.uniform(0.0, 0.02))
    await tracker.wait_all(60)

    records = tracker.check_exactly_once(kafka_cluster)
    kinds = Counter(f.kind for f in faults)
    generations = len({(r.producer_id, r.producer_epoch) for r in records})
    scenario(
        f"seed {seed}: {len(faults)} faults {dict(sorted(kinds.items()))}; {len(records)} records "
        f"over {tracker.keys} keys exactly once and in order; {retries.batches} batch retries; "
        f"{generations} producer (id, epoch) generation(s)"
    )
