"""KIP-126: a batch the broker refuses as too large is split and retried."""

from __future__ import annotations

import asyncio
import re

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("idempotent", [True, False])
async def test_too_large_batch_is_split_and_every_record_stored_once_in_order(
    idempotent: bool,
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("big", partitions=1)
        cluster.max_message_bytes = 1500
        async with Producer(
            cluster.bootstrap_servers, linger_ms=50, batch_size=16384, enable_idempotence=idempotent
        ) as p:
            futures = [await p.enqueue("big", b"%03d" % i + b"x" * 97, key=b"k") for i in range(60)]
            metas = await asyncio.wait_for(asyncio.gather(*futures), 10)
            after = await asyncio.wait_for(p.send("big", b"after", key=b"k"), 5)
        records = cluster.records("big")
        assert len(records) == 61 and records[-1].value == b"after" and after.offset == 60
        by_value = {r.value: r.offset for r in records}
        assert len(by_value) == 61  # each record stored once
        assert [m.offset for m in metas] == [by_value[b"%03d" % i + b"x" * 97] for i in range(60)]
        if idempotent:
            # In order (parts go out one at a time), in the refused batch's sequence range.
            assert [r.value[:3] for r in records[:60]] == [b"%03d" % i for i in range(60)]
            assert [r.sequence for r in records] == list(range(61))
        stored = [b for b in cluster.topic_states["big"].partitions[0].log.batches]
        assert len(stored) > 4 and all(len(b.batch.records) <= 14 for b in stored)


async def test_single_record_too_large_fails_with_record_too_large() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("big", partitions=1)
        cluster.max_message_bytes = 500
        async with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
            with pytest.raises(errors.RecordTooLargeError) as refused:
                await asyncio.wait_for(p.send("big", b"x" * 1000), 5)
            small = await asyncio.wait_for(p.send("big", b"small"), 5)
        # It says how large the batch was and which limit refused it.
        size = int(re.search(r"the batch was (\d+) bytes", str(refused.value)).group(1))  # type: ignore[union-attr]
        assert 1000 < size < 1200
        assert "the topic's max.message.bytes" in str(refused.value)
        assert isinstance(refused.value.__cause__, errors.RecordTooLargeError)
        assert [r.value for r in cluster.records("big")] == [b"small"]
        assert small.offset == 0


async def test_flush_waits_for_every_part_of_a_split_batch() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("big", partitions=1)
        cluster.max_message_bytes = 1200
        async with Producer(cluster.bootstrap_servers, linger_ms=1000, batch_size=16384) as p:
            futures = [await p.enqueue("big", b"y" * 100) for _ in range(40)]
            await asyncio.wait_for(p.flush(), 10)
            assert all(f.done() and f.exception() is None for f in futures)
        assert len(cluster.records("big")) == 40
