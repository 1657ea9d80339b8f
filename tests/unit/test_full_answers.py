"""A batch's appends answer FULL when the record left it full, and the lanes read that answer alike.

``ProducerBatch.append_unkeyed`` and ``append_keyed`` add :data:`FULL` to
their answer exactly when the record left the batch full (``is_full()``),
compiled as in the pure reference; the shortcut lanes then wake the sender,
as enqueue's full path does (Java's ``batchIsFull``). A batch of another class
may answer anything: the compiled lanes read such an answer with the same
operators, in the same order around the pool's charge, as the pure lanes.
"""

from __future__ import annotations

import weakref
from collections import deque
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import FULL, BatchCorePy
from aioproducer.engine.buffer_pool import BufferPool
from aioproducer.engine.keyed_lane import KeyedLanePy
from aioproducer.engine.sticky import StickyPartitioner
from aioproducer.engine.unkeyed_lane import UnkeyedLanePy
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilderPy
from tests.support.batch_twins import batch_class
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def k() -> ModuleType:
    return required(K)


@pytest.fixture(scope="module")
def lane_twins(k: ModuleType) -> tuple[tuple[type[Any], type[Any]], tuple[type[Any], type[Any]]]:
    """(UnkeyedLanePy, UnkeyedLane) and (KeyedLanePy, KeyedLane): both, whichever the package chose."""
    return (UnkeyedLanePy, k.UnkeyedLane), (KeyedLanePy, k.KeyedLane)


@pytest.mark.parametrize("kind", ["unkeyed", "keyed"])
@pytest.mark.parametrize("own_size", ["as built", "smaller"])
def test_full_is_answered_exactly_when_the_batch_is_full(
    k: ModuleType, kind: str, own_size: str
) -> None:
    """Every batch size over a span (some land exactly on a record's end): the same
    answers from both, with FULL exactly when is_full() (by the batch's own batch_size)."""
    cores = (BatchCorePy, k.BatchCore)
    values = [None if i % 7 == 3 else bytes([i]) * (i * 13 % 90) for i in range(40)]
    fills = 0
    for batch_size in range(62, 1500, 3):
        answers: list[list[Any]] = [[], []]
        # The reference all through (the pure builder too), and the kernel with the compiled one.
        twins = (RecordBatchBuilderPy, k.RecordBatchBuilder)
        for core, got, builder_cls in zip(cores, answers, twins):
            batch = batch_class(core)(
                "t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0, delivery_timeout=60
            )
            append = (
                batch_class(core).append_unkeyed
                if kind == "unkeyed"
                else batch_class(core).append_keyed
            )
            batch.builder = builder_cls(codec=Codec.NONE, batch_size=batch_size)
            if own_size == "smaller":
                batch.batch_size = batch_size - 40  # full before its builder refuses
            produced: dict[str, int] = {}
            for i, value in enumerate(values):
                if kind == "unkeyed":
                    answer = append(batch, 5 + i, value, 10, 30, produced, "t", 700)
                else:
                    answer = append(batch, 5 + i, b"k", value, 10, 30)
                got.append(answer)
                if answer:
                    assert bool(answer & FULL) == batch.is_full(), (batch_size, i)
                    fills += batch.is_full()
        assert answers[1] == answers[0], batch_size
    assert fills > 40  # batches were filled exactly (or past a smaller own size), in both


class _Odd:
    """An answer of a batch of another class: true, not APPENDED, its ``&`` as the test says."""

    def __init__(self, flags: int | None) -> None:
        self.flags = flags

    def __bool__(self) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        if self.flags == -1:
            raise LookupError("no answer")
        return True

    def __and__(self, flag: int) -> int:
        if self.flags is None:
            raise ArithmeticError("no flags")
        return self.flags & flag


class _Outcome:
    def handle(self, delta: int, timestamp_ms: int, sizes: int) -> object:
        return object()


class _Batch:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.record_count = 0
        self.outcome = _Outcome()

    def append_unkeyed(self, *args: Any) -> Any:
        return self.answer

    def append_keyed(self, *args: Any) -> Any:
        return self.answer


class _Events(list[tuple[str, int]]):
    """The lane's wakes and moves, each with the pool's free memory at the time."""

    def __init__(self, pool: BufferPool) -> None:
        super().__init__()
        self.pool = pool

    def wake(self) -> None:
        self.append(("wake", self.pool.available))

    def move(self, topic: str, info: object) -> int:
        self.append(("move", self.pool.available))
        return 0


def _run(append: Any, lane: Any, *args: Any) -> Any:
    """The lane's answer (a handle's type, or None), or the error it raised (by type and message)."""
    try:
        answer = append(lane, *args)
    except Exception as exc:  # noqa: BLE001 - the same error from both, or the test fails
        return type(exc), str(exc)
    return None if answer is None else type(answer)


@pytest.mark.parametrize(
    "flags", [None, -1, 0, FULL, batch_module.SWITCH, FULL | batch_module.SWITCH]
)
def test_the_unkeyed_lanes_read_an_odd_answer_alike(lane_twins: Any, flags: int | None) -> None:
    """Read once the pool is charged: the sender woken before the partitioner moves on."""
    outcomes = []
    for cls in lane_twins[0]:
        append = cls.append
        sticky = StickyPartitioner(batch_size=1000)
        pool = BufferPool(1 << 20)
        events = _Events(pool)
        info: Any = object()
        client: Any = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": info}))
        lane = cls(sticky, pool, client, 1 << 20, events.wake)  # type: ignore[arg-type]
        lane.move_on = events.move
        batch: Any = _Batch(_Odd(flags))
        sticky.filling["t"] = (weakref.ref(batch), info)
        outcomes.append((_run(append, lane, "t", b"v" * 10), pool.available, list(events)))
    assert outcomes[1] == outcomes[0]
    assert outcomes[0][1] < 1 << 20  # charged, whatever was read after


@pytest.mark.parametrize("flags", [-1, 0, FULL])
def test_the_keyed_lanes_read_an_odd_answer_alike(lane_twins: Any, flags: int) -> None:
    """``!=`` APPENDED is FULL; the pool is charged before the append (a refusal gives it back)."""
    outcomes = []
    for cls in lane_twins[1]:
        append = cls.append
        pool = BufferPool(1 << 20)
        events = _Events(pool)
        info = SimpleNamespace(partitions=(0,), tps=(("t", 0),))
        client: Any = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": info}))
        queues: Any = {("t", 0): deque([_Batch(_Odd(flags))])}
        lane = cls(queues, pool, client, 1 << 20, events.wake)  # type: ignore[arg-type]
        outcomes.append((_run(append, lane, "t", b"k", b"v"), pool.available, list(events)))
    assert outcomes[1] == outcomes[0]
    # The record was taken: its bytes stay reserved, even when its answer's != raised.
    assert outcomes[0][1] < 1 << 20
