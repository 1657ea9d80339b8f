"""What a started :class:`~aioproducer.Producer` has and a new one has not.

:class:`Running` holds the parts that exist only once ``start()`` connected:
the client and its connections, the sender task, the transaction manager (for
a ``transactional_id``), the admission pipeline, the bulk appender and
enqueue's lanes. :meth:`Running.start` builds all of them in one place, in the
order the Java producer wires its ``Sender`` and ``TransactionManager`` in
``KafkaProducer``'s constructor, so the producer holds ``Running | None``
instead of one optional attribute per part.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..bulk.appender import BulkAppender
from ..engine.admission import Admission
from ..engine.idempotence import SequenceState
from ..engine.keyed_lane import KeyedLane
from ..engine.sender import Sender
from ..engine.sticky import forget_idle_topics
from ..engine.transactions import TransactionManager
from ..engine.unkeyed_lane import UnkeyedLane
from ..net.client import KafkaClient

if TYPE_CHECKING:
    from ..config import ProducerConfig
    from ..engine.accumulator import RecordAccumulator
    from ..engine.buffer_pool import BufferPool
    from ..engine.shortcut import EnqueueShortcut
    from ..engine.sticky import StickyPartitioner
    from ..net.metadata_wait import MetadataWait
    from ..telemetry.producer_metrics import ProducerMetrics

__all__ = ["Parts", "Running"]


@dataclass(frozen=True, slots=True)
class Parts:
    """The parts a producer makes in its constructor, which ``start()`` wires together."""

    config: ProducerConfig
    client_id: str
    acc: RecordAccumulator
    pool: BufferPool
    sticky: StickyPartitioner
    metrics: ProducerMetrics
    metadata_wait: MetadataWait
    shortcut: EnqueueShortcut
    max_block: float
    max_unkeyed: int
    serializing: bool


@dataclass(frozen=True, slots=True)
class Running:
    """A started producer's parts; every one set (``txn`` is None without a ``transactional_id``)."""

    client: KafkaClient
    sender: Sender
    txn: TransactionManager | None
    admission: Admission
    bulk: BulkAppender
    lane: UnkeyedLane
    keyed_lane: KeyedLane | None

    @staticmethod
    def connect(parts: Parts) -> KafkaClient:
        """The producer's client, not connected yet."""
        cfg = parts.config
        return KafkaClient(
            cfg.bootstrap_servers,
            client_id=parts.client_id,
            request_timeout_ms=cfg.request_timeout_ms,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            reconnect_backoff_ms=cfg.reconnect_backoff_ms,
            reconnect_backoff_max_ms=cfg.reconnect_backoff_max_ms,
            connections_max_idle_ms=cfg.connections_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            allow_auto_create_topics=cfg.allow_auto_create_topics,
            metrics=parts.metrics if cfg.metrics_enabled else None,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            metadata_recovery_strategy=cfg.metadata_recovery_strategy,
            metadata_recovery_rebootstrap_trigger_ms=cfg.metadata_recovery_rebootstrap_trigger_ms,
            forget_topics=functools.partial(forget_idle_topics, parts.acc, parts.sticky),
            security=cfg.security,
        )

    @classmethod
    def build(
        cls,
        parts: Parts,
        client: KafkaClient,
        loop: asyncio.AbstractEventLoop,
        check_open: Callable[[], None],
    ) -> Running:
        """Every part of a started producer over ``client`` (bootstrapped), its sender started.

        ``check_open`` raises unless the producer is open (the bulk appender asks
        between slices)."""
        cfg = parts.config
        acc, pool = parts.acc, parts.pool
        acc.loop = loop  # where the records' handles run their callbacks
        seq = SequenceState() if cfg.idempotent else None
        txn = None
        if cfg.transactional_id is not None and seq is not None:
            # validate() makes every transactional producer idempotent.
            txn = TransactionManager(
                client,
                seq,
                transactional_id=cfg.transactional_id,
                transaction_timeout_ms=cfg.transaction_timeout_ms,
                max_block_ms=cfg.max_block_ms,
                retry_backoff_ms=cfg.retry_backoff_ms,
                wake_sender=lambda: sender.wakeup(),
            )
        sender = Sender(
            cfg, client, acc, pool, seq, txn, parts.metrics if cfg.metrics_enabled else None
        )
        sender.start()
        admission = Admission(
            accumulator=acc,
            pool=pool,
            sticky=parts.sticky,
            client=client,
            sender=sender,
            txn=txn,
            shortcut=parts.shortcut,
            partitioner=cfg.partitioner,
            ignore_keys=cfg.partitioner_ignore_keys,
            max_block=parts.max_block,
            metadata_wait=parts.metadata_wait,
            fills_lanes=not parts.serializing,
        )
        bulk = BulkAppender(
            cfg,
            client,
            admission,
            parts.sticky,
            txn,
            sender.wakeup,
            check_open,
            parts.metadata_wait,
        )
        # The lanes wake the sender for a batch they fill, as Admission.place does.
        lane = UnkeyedLane(parts.sticky, pool, client, parts.max_unkeyed, sender.wakeup)
        keyed_lane = None
        if cfg.partitioner is None and not cfg.partitioner_ignore_keys and not parts.serializing:
            # Only where the full path would hash the key to its partition too.
            keyed_lane = KeyedLane(acc.queues, pool, client, parts.max_unkeyed, sender.wakeup)
        parts.shortcut.lane, parts.shortcut.keyed_lane = lane, keyed_lane
        return cls(client, sender, txn, admission, bulk, lane, keyed_lane)
