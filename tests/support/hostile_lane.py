"""A compiled lane's append whose topic runs code mid-append (tests/unit/test_builder_reentry.py).

Run as a script under ``PYTHONMALLOC=debug`` (freed memory is overwritten at
once, so a use after free shows as a crash or a wrong number). The topic is a
str subclass whose hash, at its n-th call, runs a hook: it replaces the batch's
outcome (freeing the one the kernel read), or leaves cyclic garbage whose
finalizer, run by the next collection (the record handle's allocation),
replaces the produced count (freeing the one read) and appends to the builder
(so the append is refused and puts the count back). Prints one line per run:
what the append answered, the produced count after it, and the record count.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from aioproducer._speedups import _kernels as K
from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.buffer_pool import BufferPool
from aioproducer.engine.record_handle import BatchOutcome, RecordMetadata
from aioproducer.engine.sticky import StickyPartitioner
from aioproducer.protocol.compression import Codec

BEFORE, MEANWHILE = 123_456_789, 987_654_321


class Topic(str):
    """A topic whose hash runs ``hook`` with the number of the call."""

    hook: Callable[[int], None] = staticmethod(lambda n: None)
    calls = 0

    def __hash__(self) -> int:
        Topic.calls += 1
        Topic.hook(Topic.calls)
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


class Finalizer:
    """Cyclic garbage: the next collection runs ``action``."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.cycle = self
        self.action = action

    def __del__(self) -> None:
        self.action()


def run(loop: asyncio.AbstractEventLoop, case: str, at: int) -> str:
    sticky = StickyPartitioner(batch_size=1 << 20)
    info = object()
    client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": info}))
    lane: Any = K.UnkeyedLane(sticky, BufferPool(1 << 20), client, 1 << 20, lambda: None)  # type: ignore[arg-type]
    lane.move_on = lambda topic, _info: None
    batch = ProducerBatch(
        "t", 0, codec=Codec.NONE, batch_size=1 << 16, now=0.0, delivery_timeout=60, loop=loop
    )
    batch.builder = K.RecordBatchBuilder(codec=Codec.NONE, batch_size=1 << 16)
    sticky.filling["t"] = (weakref.ref(batch), info)  # type: ignore[assignment]
    sticky.produced["t"] = int(str(BEFORE))  # a fresh int, held by the dict only

    def new_outcome() -> None:
        batch.outcome = BatchOutcome(loop, "t", 0, RecordMetadata)  # the old one freed

    def meanwhile() -> None:
        sticky.produced["t"] = int(str(MEANWHILE))  # frees the count the append read
        batch.builder.append(5, None, b"meanwhile", None)
        new_outcome()

    def hook(n: int) -> None:
        if n != at:
            return
        if case == "outcome":
            new_outcome()
        else:
            Finalizer(meanwhile)
            gc.set_threshold(1)  # collected at the next tracked allocation

    Topic.calls, Topic.hook = 0, staticmethod(hook)  # type: ignore[assignment]
    try:
        handle = lane.append(Topic("t"), b"value")
        answer = "appended" if handle is not None and not handle.done() else repr(handle)
    except RuntimeError:
        answer = "RuntimeError"
    finally:
        Topic.hook = staticmethod(lambda n: None)  # type: ignore[assignment]
        gc.set_threshold(700)
    return f"{answer} {sticky.produced['t']} {batch.record_count}"


if __name__ == "__main__":
    event_loop = asyncio.new_event_loop()
    for case in ("outcome", "collection"):
        for at in range(1, 7):
            print(case, at, run(event_loop, case, at), flush=True)
    event_loop.close()
