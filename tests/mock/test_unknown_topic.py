"""A record for a topic the cluster does not know (auto-creation off).

As Java's producer, it waits up to ``max_block_ms`` (an admin may be creating
the topic); the error then says what every answer said, not only that nothing
came, with the broker's error as its cause, and the wait's WARNING says it too.
"""

from __future__ import annotations

import logging

import pytest

from aioproducer import Producer, errors
from aioproducer.net import metadata_wait
from aioproducer.testing import MockCluster


@pytest.mark.asyncio
async def test_an_unknown_topic_fails_naming_the_clusters_answer(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every wait line is a WARNING, one every 0.2 s: lines come after the
    # cluster's first answer, however slow the machine.
    monkeypatch.setattr(metadata_wait, "WARN_AFTER", 0.0)
    monkeypatch.setattr(metadata_wait, "LOG_INTERVAL", 0.2)
    caplog.set_level(logging.WARNING, logger="aioproducer")
    async with MockCluster(brokers=1, auto_create_topics=False) as cluster:
        cluster.create_topic("known", partitions=1)
        async with Producer(cluster.bootstrap_servers, max_block_ms=3000) as producer:
            with pytest.raises(errors.KafkaTimeoutError) as raised:
                await producer.send("missing", b"x")
            # The producer goes on with topics that exist.
            written = await producer.send("known", b"y")
    message = str(raised.value)
    assert "topic 'missing' not present in metadata after 3000 ms" in message
    assert (
        "says it does not know the topic" in message
        and "auto.create.topics.enable=false" in message
    )
    assert isinstance(raised.value.__cause__, errors.UnknownTopicOrPartitionError)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'missing'" in m and "UNKNOWN_TOPIC_OR_PARTITION" in m for m in warned), warned
    assert written.topic == "known"
    assert [r.value for r in cluster.records("known")] == [b"y"]
