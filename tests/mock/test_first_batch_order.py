"""A partition's first batch is alone in flight until the broker holds it.

Kafka accepts any sequence from a producer it holds no state for on a partition
(``ProducerAppendInfo.checkSequence``: retention may have removed that state).
So when the first batch of a fresh producer is refused for a moment (a new
topic's leader not loaded yet: NOT_LEADER_OR_FOLLOWER) while a second batch is
already on the wire, the second one is written first, at offset 0, and the
retried first batch can only be renumbered behind it: the partition's records
are out of order although every one arrived once. Seen on Apache Kafka with a
topic produced to right after its creation. The MockCluster checks sequences
as Kafka does, so the same race is scripted here deterministically: the first
Produce is refused and its answer held back long enough for the sender to pipe
the next batch behind it.
"""

from __future__ import annotations

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster
from tests.support.aio import gather_within, within

pytestmark = pytest.mark.asyncio

NOT_LEADER = errors.NotLeaderOrFollowerError.code
PRODUCE = 0


async def test_a_refused_first_batch_is_not_overtaken_by_the_next_one() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("fresh", 1)
        # The first Produce for the partition is refused unwritten, and its
        # answer arrives late: a sender that pipelines sends the next batch meanwhile.
        cluster.fail_produce("fresh", 0, NOT_LEADER, count=1)
        cluster.delay_responses(0.5, api_key=PRODUCE, count=1)
        values = [b"%05d" % i + b"." * 95 for i in range(300)]
        async with Producer(
            cluster.bootstrap_servers, batch_size=1024, linger_ms=0, retry_backoff_ms=10
        ) as p:
            assert p.config.idempotent
            futures = [await within(p.enqueue("fresh", v), 10, "enqueue") for v in values]
            results = await gather_within(futures, 30, "acknowledgements")
        written = [r.value for r in cluster.records("fresh")]
        assert len(written) == len(values)  # once each
        assert written == values, "the partition's records are out of send order"
        assert [r.offset for r in results] == list(range(len(values)))
        # The race really happened: the refused request was answered and retried.
        assert cluster.request_count(PRODUCE) > len(values) // 10


async def test_later_batches_pipeline_once_the_first_is_acknowledged() -> None:
    # The hold costs one round trip per partition, not pipelining for good:
    # with every answer slowed, later batches of the partition overlap.
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("steady", 1)
        in_flight_seen: list[int] = []

        async def watch(body: object, ctx: object) -> None:
            in_flight_seen.append(p._running.sender.requests_in_flight)  # type: ignore[union-attr]

        cluster.intercept(PRODUCE, watch)
        cluster.delay_responses(0.05, api_key=PRODUCE)
        async with Producer(cluster.bootstrap_servers, batch_size=1024, linger_ms=0) as p:
            futures = [await p.enqueue("steady", b"x" * 100) for _ in range(400)]
            await gather_within(futures, 30, "acknowledgements")
        cluster.clear_faults()
        assert [r.value for r in cluster.records("steady")] == [b"x" * 100] * 400
        assert max(in_flight_seen) > 1, in_flight_seen
