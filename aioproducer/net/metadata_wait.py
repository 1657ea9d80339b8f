"""What ``enqueue`` does when the metadata lacks a record's topic or its ``partition=``.

As Java's ``waitOnMetadata``, a record waits (up to ``max_block_ms``) for a
metadata answer when the producer knows nothing of its topic yet, or when its
explicit partition is beyond the partitions known (one may have been added
since the last refresh). Unlike Java, which waits the whole ``max_block_ms``
for such a partition, an answer to a request sent after the wait began is
final: if it has the partition the record goes on, else the call raises
InvalidPartitionError at once, naming the topic, the partition and the
partition count. A partition that is not an int, or negative, raises before
any wait.

The wait says what it waits for (topic, partition, partitions known): an INFO
line when a record waits for a partition beyond those known (DEBUG for the
usual first lookup of a topic), a WARNING while it still waits after
``WARN_AFTER`` seconds; each at most once per topic and level every
``LOG_INTERVAL`` seconds, with the count of the lines left out.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import errors
from ..telemetry.logs import ClientLogger, RateLimiter

if TYPE_CHECKING:
    from .client import KafkaClient
    from .cluster import TopicInfo

__all__ = ["LOG_INTERVAL", "WARN_AFTER", "MetadataWait"]

# A wait still going on after this long (s) is a WARNING: the topic or the
# partition may not exist, or no broker answers.
WARN_AFTER = 1.0
# At most one line per topic and level this often (s).
LOG_INTERVAL = 10.0
# Topics remembered by the rate limits before they start afresh.
_MAX_TOPICS = 1000
# What the cluster's last answer said of a topic it has no partitions of.
_TOPIC_ERRORS = {
    errors.UnknownTopicOrPartitionError.code: (
        "; the cluster says the topic is unknown (UNKNOWN_TOPIC_OR_PARTITION): it does not "
        "exist and auto-creation is off, or it is being created"
    ),
    errors.LeaderNotAvailableError.code: (
        "; the cluster says the topic has no leader yet (LEADER_NOT_AVAILABLE)"
    ),
}


class MetadataWait:
    """The metadata waits of one producer's ``enqueue`` (and bulk calls, which log through it)."""

    def __init__(self, log: ClientLogger, max_block: float) -> None:
        self._log = log
        self._max_block = max_block
        self._info = RateLimiter(LOG_INTERVAL)
        self._warn = RateLimiter(LOG_INTERVAL)

    async def topic_info(self, client: KafkaClient, topic: str, partition: object) -> TopicInfo:
        """The topic's metadata, with ``partition`` (if not None) among its partitions.

        Raises TypeError or InvalidPartitionError for a bad partition,
        KafkaTimeoutError when no metadata of the topic came in ``max_block_ms``.
        """
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise TypeError(f"partition must be an int, got {type(partition).__name__}")
            if partition < 0:
                raise errors.InvalidPartitionError(
                    f"partition {partition} of topic {topic!r} is negative"
                )
        began = time.monotonic()
        wanted = 1 if partition is None else partition + 1
        await client.partitions_for(topic, self._max_block, wanted, self.waiting(topic, partition))
        info = client.snapshot.topics.get(topic)
        if info is None or not info.partitions:
            raise errors.KafkaTimeoutError(f"topic {topic!r} left the metadata")
        count = len(info.partitions)
        if partition is not None and partition >= count:
            waited = time.monotonic() - began
            why = (
                f"after waiting max_block_ms={self._max_block * 1000:.0f} for a metadata answer"
                if waited >= self._max_block
                else "in metadata just refreshed"
            )
            raise errors.InvalidPartitionError(
                f"partition {partition} is not in the range [0...{count}) of topic {topic!r}: "
                f"the topic has {count} partition(s) {why}"
            )
        return info

    def waiting(
        self, topic: str, partition: int | None
    ) -> Callable[[TopicInfo | None, float], float]:
        """The ``on_wait`` of :meth:`KafkaClient.partitions_for` for a record of ``topic``."""
        return functools.partial(self._waiting, topic, partition)

    def _waiting(
        self, topic: str, partition: int | None, info: TopicInfo | None, waited: float
    ) -> float:
        """Log what a record waits for; return when to be called again (s)."""
        known = len(info.partitions) if info is not None and info.partitions else None
        if len(self._info) + len(self._warn) > _MAX_TOPICS:
            self._info, self._warn = RateLimiter(LOG_INTERVAL), RateLimiter(LOG_INTERVAL)
        if waited < WARN_AFTER:
            limiter, again = self._info, WARN_AFTER - waited
            # A topic's first lookup is routine; a partition beyond those known is not.
            level = logging.DEBUG if known is None else logging.INFO
            head = "waiting"
        else:
            limiter, again, level = self._warn, LOG_INTERVAL, logging.WARNING
            head = f"still waiting after {waited * 1000:.0f} ms"
        left_out = limiter.allow((topic, level), time.monotonic())
        if left_out is not None and self._log.isEnabledFor(level):
            wanted = "" if partition is None else f" partition {partition}"
            said = _TOPIC_ERRORS.get(info.error_code, "") if info is not None else ""
            self._log.log(
                level,
                "%s for the metadata of topic %r%s (partitions known: %s), up to "
                "max_block_ms=%.0f%s%s",
                head,
                topic,
                wanted,
                "none" if known is None else known,
                self._max_block * 1000,
                said,
                f" ({left_out} similar lines left out)" if left_out else "",
                extra={"topic": topic, "partition": partition, "partitions_known": known},
            )
        return again
