"""Producers kept across the tasks of one Spark Python worker, on one event loop.

Spark reuses its Python workers across tasks (``spark.python.worker.reuse``,
on by default), one task at a time per worker. Starting a producer per task
costs a bootstrap connection, a metadata round trip and, when idempotent, an
InitProducerId, and a cold start of every batch size estimate; Spark's own
sink keeps its producers in a per-executor cache for the same reason
(``CachedKafkaProducer`` / ``InternalKafkaProducerPool`` in spark-sql-kafka).

:class:`WorkerLoop` is one event loop per process on a daemon thread: a task
hands its coroutine to it (``asyncio.run_coroutine_threadsafe``) instead of
starting a loop of its own, so producers stay connected between tasks.
:class:`ProducerPool` keeps the idle producers of that loop, keyed by their
properties. A producer goes back only after a task whose every record was
acknowledged; one whose task failed or was interrupted is closed, so nothing
of that task (records, a broken connection, an error state) reaches the next.
Idle producers are closed at interpreter exit, within :data:`EXIT_CLOSE_S`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from .. import Producer, errors

__all__ = ["EXIT_CLOSE_S", "ProducerPool", "WorkerLoop", "worker_loop"]

log = logging.getLogger("aioproducer.spark")

T = TypeVar("T")

# Bound on closing the idle producers at interpreter exit (all of them together).
EXIT_CLOSE_S = 5.0
# Bound on each idle producer's close when it leaves the pool.
_CLOSE_S = 5.0
# Idle producers kept per worker; the least recently used goes beyond that.
MAX_IDLE = 4
# Bound on the loop thread's start.
_START_WAIT_S = 30.0
# Bound on a cancelled task's coroutine winding down (it closes its producer).
_CANCEL_WAIT_S = 30.0

PoolKey = tuple[tuple[str, str], ...]


class ProducerPool:
    """Idle started producers by their properties; used on one loop only."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self._idle: OrderedDict[PoolKey, Producer] = OrderedDict()
        self._max_idle = max_idle
        self.started = 0  # producers this pool started
        self.reused = 0  # acquisitions that got an idle producer

    @staticmethod
    def key(props: Mapping[str, str]) -> PoolKey:
        return tuple(sorted(props.items()))

    def __len__(self) -> int:
        return len(self._idle)

    async def acquire(self, props: Mapping[str, str]) -> tuple[Producer, bool]:
        """A started producer for ``props`` and whether it was idle in the pool."""
        producer = self._idle.pop(self.key(props), None)
        if producer is not None:
            self.reused += 1
            return producer, True
        producer = Producer.from_config(dict(props))
        try:
            await producer.start()
        except BaseException:
            await _close_quietly(producer, 0)
            raise
        self.started += 1
        return producer, False

    async def release(self, props: Mapping[str, str], producer: Producer) -> None:
        """Keep ``producer`` (its task succeeded: nothing pending, no error) for the next task."""
        key = self.key(props)
        previous = self._idle.pop(key, None)
        self._idle[key] = producer
        evicted = [previous] if previous is not None else []
        while len(self._idle) > self._max_idle:
            evicted.append(self._idle.popitem(last=False)[1])
        for old in evicted:
            await _close_quietly(old, _CLOSE_S)

    async def close(self) -> None:
        """Close every idle producer (each bounded by its own close timeout)."""
        idle = list(self._idle.values())
        self._idle.clear()
        await asyncio.gather(*(_close_quietly(p, _CLOSE_S) for p in idle))


async def _close_quietly(producer: Producer, timeout: float) -> None:
    # Nothing is pending in an idle producer; a failed close only loses a
    # connection the process is about to drop anyway.
    try:
        await producer.close(timeout)
    except (errors.KafkaError, asyncio.TimeoutError, OSError) as exc:
        log.debug("[%s] closing a pooled producer failed: %s", producer.client_id, exc)


class WorkerLoop:
    """An event loop on a daemon thread, with the process's :class:`ProducerPool`."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.pool = ProducerPool()
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name="aioproducer-spark-loop", daemon=True
        )
        self._thread.start()
        # Starting a thread takes microseconds; the bound only keeps a broken
        # interpreter (no threads left) from hanging the task.
        if not started.wait(_START_WAIT_S):
            raise RuntimeError(f"the sink's event loop thread did not start in {_START_WAIT_S} s")

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (its own timeouts bound it).

        Interrupted meanwhile (KeyboardInterrupt, a signal's exception), the
        coroutine is cancelled and given :data:`_CANCEL_WAIT_S` to wind down:
        its ``finally`` closes the producer rather than pool it.
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            if not future.done():
                future.cancel()
                # The interruption is what is reported, not how the coroutine ended.
                concurrent.futures.wait([future], _CANCEL_WAIT_S)
            raise

    def close(self, timeout: float = EXIT_CLOSE_S) -> None:
        """Close the pooled producers within ``timeout`` s, then stop the loop."""
        # A forked child inherits this object but not the loop's thread.
        if self.pid != os.getpid() or not self.loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(self.pool.close(), self.loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.debug("closing the pooled producers took longer than %.1f s", timeout)
        except Exception as exc:  # noqa: BLE001 - exiting: report, do not raise
            log.debug("closing the pooled producers failed: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


_worker: WorkerLoop | None = None
_worker_lock = threading.Lock()


def worker_loop() -> WorkerLoop:
    """This process's :class:`WorkerLoop`, started on first use.

    A forked child (Spark's daemon forks its workers) does not inherit the
    parent's loop thread: a loop made in another process is replaced.
    """
    global _worker
    with _worker_lock:
        if _worker is None or _worker.pid != os.getpid():
            _worker = WorkerLoop()
            atexit.register(_worker.close)
        return _worker
