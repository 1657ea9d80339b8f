"""``partition=`` the metadata does not have: decided by one fresh answer, and logged.

A partition beyond those known is looked up in a metadata answer to a request
sent after the call began: the record goes on if that answer has it (a
partition just added), else InvalidPartitionError names the topic, the
partition and the count at once, not after ``max_block_ms``. A record that
waits says so in the log (INFO), and again as a WARNING while it goes on.
``max_block_ms`` is a minute here, so that an error "at once" cannot be the
end of that wait; every wait of the tests is bounded far below it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from aioproducer import errors
from aioproducer.net import metadata_wait as metadata_wait_module
from aioproducer.testing import MockCluster
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

MAX_BLOCK_MS = 60_000
BOUND = 15.0  # far above a metadata round trip, far below max_block_ms
LOGGER = "aioproducer.producer"


SETTINGS: dict[str, Any] = {"linger_ms": 0, "max_block_ms": MAX_BLOCK_MS}


def _waits(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == LOGGER and r.levelno == level and "for the metadata of topic" in r.getMessage()
    ]


async def test_a_partition_out_of_range_of_known_metadata_raises_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("t", partitions=4)
        async with make_producer(cluster, SETTINGS) as producer:
            await asyncio.wait_for(producer.send("t", b"known", partition=3), BOUND)
            began = time.monotonic()
            with pytest.raises(errors.InvalidPartitionError) as raised:
                await asyncio.wait_for(producer.send("t", b"stray", partition=9), BOUND)
            assert time.monotonic() - began < BOUND
            message = str(raised.value)
            assert "partition 9" in message and "'t'" in message
            assert "has 4 partition(s)" in message
            # The same call keyed, bulk or not, fails alike; nothing was buffered.
            with pytest.raises(errors.InvalidPartitionError, match="partition 4 "):
                await asyncio.wait_for(producer.send("t", b"x", key=b"k", partition=4), BOUND)
        assert [r.value for r in cluster.records("t")] == [b"known"]
    info = _waits(caplog, logging.INFO)
    assert info, "no INFO line said what the record waited for"
    assert "topic 't' partition 9 (partitions known: 4)" in info[0].getMessage()
    assert (info[0].topic, info[0].partition, info[0].partitions_known) == ("t", 9, 4)


async def test_a_partition_of_a_topic_not_yet_in_the_metadata_is_checked_on_arrival() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("fresh", partitions=2)
        async with make_producer(cluster, SETTINGS) as producer:
            with pytest.raises(
                errors.InvalidPartitionError, match=r"partition 5 .*'fresh'.* 2 part"
            ):
                await asyncio.wait_for(producer.send("fresh", b"v", partition=5), BOUND)
            md = await asyncio.wait_for(producer.send("fresh", b"v", partition=1), BOUND)
            assert md.partition == 1


async def test_a_bad_partition_raises_before_any_wait_for_metadata() -> None:
    async with (
        MockCluster(brokers=1, auto_create_topics=False) as cluster,
        make_producer(cluster, SETTINGS) as producer,
    ):
        with pytest.raises(TypeError, match="partition must be an int"):
            await asyncio.wait_for(producer.send("missing", b"v", partition="1"), BOUND)
        with pytest.raises(errors.InvalidPartitionError, match="negative"):
            await asyncio.wait_for(producer.send("missing", b"v", partition=-1), BOUND)


async def test_a_partition_added_later_is_found_by_the_refresh() -> None:
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("grows", partitions=2)
        async with make_producer(cluster, SETTINGS) as producer:
            await asyncio.wait_for(producer.send("grows", b"a", partition=1), BOUND)
            cluster.add_partitions("grows", 6)
            md = await asyncio.wait_for(producer.send("grows", b"b", partition=5), BOUND)
            assert md.partition == 5


async def test_a_wait_that_goes_on_is_a_warning_rate_limited_per_topic(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_wait_module, "WARN_AFTER", 0.2)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with (
        MockCluster(brokers=1, auto_create_topics=False) as cluster,
        make_producer(cluster, SETTINGS, max_block_ms=3000) as producer,
    ):
        # Many records wait for the same missing topic: one line per level.
        calls = [producer.send("absent", b"v", partition=2) for _ in range(20)]
        outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), BOUND)
    assert all(isinstance(o, errors.KafkaTimeoutError) for o in outcomes), outcomes
    # A topic's first lookup is routine (DEBUG); one that goes on is not.
    debug, warnings = _waits(caplog, logging.DEBUG), _waits(caplog, logging.WARNING)
    assert len(debug) == 1 and len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "topic 'absent' partition 2 (partitions known: none)" in debug[0].getMessage()
    assert "max_block_ms=3000" in debug[0].getMessage()
    assert warnings[0].getMessage().split("] ", 1)[1].startswith("still waiting after")
    assert "topic 'absent' partition 2 (partitions known: none)" in warnings[0].getMessage()


async def test_no_metadata_answer_warns_with_the_partitions_known_then_fails(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_wait_module, "WARN_AFTER", 0.2)
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=4)
        async with make_producer(cluster, SETTINGS, max_block_ms=2000) as producer:
            await asyncio.wait_for(producer.send("t", b"known", partition=0), BOUND)
            cluster.stall_broker(0)  # no metadata answer comes
            try:
                with pytest.raises(
                    errors.InvalidPartitionError, match="after waiting max_block_ms=2000"
                ):
                    await asyncio.wait_for(producer.send("t", b"stray", partition=7), BOUND)
            finally:
                cluster.resume_broker(0)
        assert [r.value for r in cluster.records("t")] == [b"known"]
    info, warnings = _waits(caplog, logging.INFO), _waits(caplog, logging.WARNING)
    assert len(info) == 1 and "topic 't' partition 7 (partitions known: 4)" in info[0].getMessage()
    assert len(warnings) == 1 and "partition 7 (partitions known: 4)" in warnings[0].getMessage()


async def test_the_bulk_path_decides_alike(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("bulk", partitions=2)
        async with make_producer(cluster, SETTINGS) as producer:
            await asyncio.wait_for(producer.send_many("bulk", [b"a"], partition=1), BOUND)
            cluster.add_partitions("bulk", 4)
            result = await asyncio.wait_for(
                producer.send_many("bulk", [b"b", b"c"], partition=[3, 0]), BOUND
            )
            assert [result[0].partition, result[1].partition] == [3, 0]
            with pytest.raises(
                errors.InvalidPartitionError, match=r"partition 9 .*has 4 partition"
            ):
                await asyncio.wait_for(producer.send_many("bulk", [b"x"], partition=9), BOUND)
        assert sorted(r.value for r in cluster.records("bulk")) == [b"a", b"b", b"c"]
    # One line for the topic within LOG_INTERVAL: the first wait's (partition 9's is left out).
    info = [r.getMessage() for r in _waits(caplog, logging.INFO)]
    assert len(info) == 1 and "topic 'bulk' partition 3 (partitions known: 2)" in info[0], info
