"""BufferCounter (C) and BufferCounterPy answer and change alike; BufferPool is the counter's writer.

Random operations (try_reserve, take, give, set_exhausted) with random sizes,
valid or not (negative, past int64, floats, strings, bools, int subclasses),
go to both twins: each must answer the same (a value, or the same exception
type and message) and hold the same ``available`` and ``exhausted`` after.
The pool built on the active twin refuses bad sizes too, and its counter is
written only through its methods.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer._speedups import kernels as active
from aioproducer.engine.buffer_pool import BufferCounter, BufferCounterPy, BufferPool
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()
INT64_MAX = (1 << 63) - 1


class _Int(int):
    """An int subclass: read as its value by both twins."""


_SIZES = st.one_of(
    st.integers(0, 5000),
    st.sampled_from(
        [0, 1, INT64_MAX, INT64_MAX - 1, INT64_MAX + 1, 1 << 80, -1, -(1 << 70), True, False]
    ),
    st.integers(-5, 5).map(_Int),
    st.sampled_from([1.0, "3", None, b"1"]),
)
_OPS = st.tuples(st.sampled_from(["try_reserve", "take", "give", "set_exhausted"]), _SIZES)


def _twins(k: Any) -> list[type[Any]]:
    return [BufferCounterPy, k.BufferCounter]


def _call(counter: Any, op: str, arg: Any) -> tuple[str, Any]:
    try:
        return "answer", getattr(counter, op)(arg)
    except Exception as exc:  # noqa: BLE001 - compared by type and message
        return "raised", (type(exc), str(exc))


@settings(max_examples=300, deadline=None)
@given(start=_SIZES, ops=st.lists(_OPS, max_size=30))
def test_the_twins_answer_and_change_alike(start: Any, ops: list[tuple[str, Any]]) -> None:
    k = required(K)
    made = []
    for twin in _twins(k):
        try:
            made.append(("made", twin(start)))
        except Exception as exc:  # noqa: BLE001 - compared by type and message
            made.append(("raised", (type(exc), str(exc))))
    assert [m[0] for m in made] == [made[0][0]] * 2
    if made[0][0] == "raised":
        assert made[1] == made[0]
        return
    pure, compiled = made[0][1], made[1][1]
    for i, (op, arg) in enumerate(ops):
        assert _call(compiled, op, arg) == _call(pure, op, arg), (i, op, arg)
        assert (compiled.available, compiled.exhausted) == (pure.available, pure.exhausted), (i, op)
        assert type(compiled.available) is int and type(compiled.exhausted) is bool


@pytest.mark.parametrize("twin", ["pure", "compiled"])
def test_the_counter_is_read_only_from_outside(twin: str) -> None:
    counter = BufferCounterPy(10) if twin == "pure" else required(K).BufferCounter(10)
    with pytest.raises(AttributeError):
        counter.available = 1 << 80  # type: ignore[misc]
    with pytest.raises(AttributeError):
        counter.exhausted = True  # type: ignore[misc]
    assert counter.try_reserve(10) and counter.available == 0 and not counter.try_reserve(1)
    counter.give(4)
    counter.set_exhausted(True)
    assert not counter.try_reserve(1) and counter.available == 4


@pytest.mark.parametrize(
    ("size", "error"),
    [(-1, ValueError), (1 << 64, ValueError), (2.0, TypeError), ("1", TypeError)],
)
def test_the_pool_refuses_bad_sizes(size: Any, error: type[Exception]) -> None:
    """A negative or oversized size neither frees nor takes memory: it is an error."""
    pool = BufferPool(100)
    for call in (pool.try_reserve, pool.release):
        with pytest.raises(error):
            call(size)
    assert pool.available == 100 and not pool.exhausted


def test_the_pool_extends_the_active_counter() -> None:
    assert issubclass(BufferPool, BufferCounter)
    assert (BufferCounter is BufferCounterPy) == (active is None)
    pool = BufferPool(7)
    with pytest.raises(AttributeError):
        pool.available = 8  # type: ignore[misc]


@pytest.mark.asyncio
async def test_a_release_grants_the_waiter_and_clears_exhausted() -> None:
    """The pool keeps ``exhausted`` in step with its waiters through the counter's writes."""
    pool = BufferPool(100)
    assert pool.try_reserve(80)
    waiter = asyncio.ensure_future(pool.reserve(50, timeout=60))
    while not pool.exhausted:  # bounded: the waiter registers on its first step
        await asyncio.sleep(0)
    assert not pool.try_reserve(1)  # exhausted: nobody jumps the queue
    pool.release(80)
    await asyncio.wait_for(waiter, 60)
    assert pool.available == 50 and not pool.exhausted
