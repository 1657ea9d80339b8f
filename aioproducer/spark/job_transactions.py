"""The driver's half of the transactional sink's two-phase commit.

Each task of a transactional write prepares its Kafka transaction (flushed,
left open) and reports it in its commit message. Spark calls the writer's
``commit()`` on the driver only when every task has succeeded, with exactly one
message per partition; :func:`commit_job` then commits each prepared
transaction. ``abort()`` gets the messages of the tasks that succeeded (None
for the others): :func:`abort_job` aborts the prepared transactions and, for
each partition without a message, fences its transactional id, which aborts
whatever a failed or still running attempt left open instead of holding
``read_committed`` consumers back until the transaction times out.

The commit is not atomic across tasks: if some transactions commit and one
cannot (it was fenced, or timed out because the job outlasted
``kafka.transaction.timeout.ms``), the committed ones stay committed and the
error names both sets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .. import PreparedTransaction, Producer, errors
from .columns import SinkWriteError
from .options import SinkOptions

__all__ = ["abort_job", "commit_job"]

log = logging.getLogger("aioproducer.spark")

# Transactions completed (or ids fenced) at once by the driver.
_CONCURRENCY = 16

Outcome = tuple[str, BaseException | None]


def _prepared_of(messages: Sequence[Any]) -> list[PreparedTransaction]:
    return [m.prepared for m in messages if getattr(m, "prepared", None) is not None]


async def _each(
    items: Sequence[Any], name: Callable[[Any], str], work: Callable[[Any], Awaitable[None]]
) -> list[Outcome]:
    """Run ``work`` on every item, a few at a time; an outcome per item, in order."""
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def one(item: Any) -> Outcome:
        async with gate:
            try:
                await work(item)
            except (errors.KafkaError, asyncio.TimeoutError, OSError) as exc:
                return name(item), exc
            return name(item), None

    return list(await asyncio.gather(*(one(item) for item in items)))


async def _complete(
    options: SinkOptions, prepared: list[PreparedTransaction], commit: bool
) -> list[Outcome]:
    if not prepared:
        return []
    props = options.driver_properties()
    async with Producer.from_config(props) as courier:
        return await _each(
            prepared,
            lambda p: p.transactional_id,
            lambda p: courier.complete_transaction(p, commit=commit),
        )


async def _fence(options: SinkOptions, partitions: list[int]) -> list[Outcome]:
    async def fence_one(partition: int) -> None:
        props = options.task_properties(partition)
        props["client.id"] = f"aioproducer-spark-abort-{partition}"
        async with Producer.from_config(props) as producer:
            # InitProducerId bumps the epoch and aborts an open transaction.
            await producer.init_transactions()

    return await _each(partitions, options.transactional_id, fence_one)


def _describe(outcomes: list[Outcome]) -> str:
    return "; ".join(
        f"{tid}: {type(exc).__name__}: {exc}" for tid, exc in outcomes if exc is not None
    )


def commit_job(options: SinkOptions, messages: Sequence[Any]) -> int:
    """Commit every task's prepared transaction; return how many were committed.

    Raises SinkWriteError naming the transactions that could not be committed
    (and how many were), so the job fails rather than report a partial write.
    """
    prepared = _prepared_of(messages)
    outcomes = asyncio.run(_complete(options, prepared, commit=True))
    failed = [o for o in outcomes if o[1] is not None]
    if failed:
        raise SinkWriteError(
            f"committed {len(outcomes) - len(failed)} of {len(outcomes)} task transactions; "
            f"not committed: {_describe(failed)}. A transaction that stays open longer than "
            f"kafka.transaction.timeout.ms is aborted by the broker: raise it (up to the "
            f"brokers' transaction.max.timeout.ms) for jobs that run longer"
        )
    return len(outcomes)


def abort_job(options: SinkOptions, messages: Sequence[Any]) -> str:
    """Abort the prepared transactions and fence the partitions that reported none.

    Best effort, never raises: what could not be aborted is described in the
    returned text (the broker aborts it after ``kafka.transaction.timeout.ms``).
    """

    async def run() -> list[Outcome]:
        aborted = await _complete(options, _prepared_of(messages), commit=False)
        missing = [i for i, m in enumerate(messages) if getattr(m, "prepared", None) is None]
        return aborted + await _fence(options, missing)

    try:
        outcomes = asyncio.run(run())
    except (errors.KafkaError, asyncio.TimeoutError, OSError) as exc:
        return f"aborting the tasks' transactions failed: {type(exc).__name__}: {exc}"
    failed = _describe(outcomes)
    done = sum(1 for _, exc in outcomes if exc is None)
    text = f"{done} of {len(outcomes)} task transactions aborted"
    return f"{text}; not aborted: {failed}" if failed else text
