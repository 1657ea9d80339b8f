"""The compiled keyed shortcut (KeyedLane.append) decides and does what its pure reference does.

Two identical worlds (the accumulator's per-partition queues, a buffer pool, a
client whose metadata snapshot changes, a future factory) go through the same
random steps: appends of random keys and values that the batch takes or
refuses; queues emptied and refilled; the topic's metadata replaced (with
another partition count) or forgotten; the pool running low or being marked
exhausted. After each step both must have answered alike (a future or None),
called the same batch with the same arguments, and charged the pool alike. A
last test runs real batches through both.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.buffer_pool import BufferPool
from aioproducer.engine.keyed_lane import KEYED_RECORD_BOUND, KeyedLane
from aioproducer.engine.partitioner import _murmur2_pure
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def compiled_append() -> Any:
    required(K)
    # Bound here too: with AIOPRODUCER_NO_EXTENSIONS=1 the package leaves the pure lane in place.
    return K.bind_keyed_lane_layout(
        KeyedLane, KEYED_RECORD_BOUND, batch_module.RECORD_HANDLE_OVERHEAD, BufferPool
    )


class _ScriptedBatch:
    """A batch whose append_keyed answers what the test says, and remembers its calls."""

    def __init__(self, name: str, calls: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.calls = calls
        self.answer = True

    def append_keyed(self, *args: Any) -> bool:
        self.calls.append((self.name, *args))
        return self.answer


class _PlainPool:
    def __init__(self, total: int) -> None:
        self.available = total
        self.exhausted = False


def _info(partitions: int) -> SimpleNamespace:
    return SimpleNamespace(
        partitions=tuple(range(partitions)), tps=tuple(("t", p) for p in range(partitions))
    )


class _World:
    def __init__(self, total: int, max_size: int, plain_pool: bool) -> None:
        self.queues: dict[tuple[str, int], deque[Any]] = {}
        self.pool: Any = _PlainPool(total) if plain_pool else BufferPool(total)
        self.client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": _info(4)}))
        tokens = itertools.count()
        self.lane = KeyedLane(
            self.queues, self.pool, self.client, lambda: ("future", next(tokens)), max_size  # type: ignore[arg-type]
        )
        self.calls: list[tuple[Any, ...]] = []
        self.batches: dict[int, _ScriptedBatch] = {}

    def fill(self, partition: int) -> None:
        batch = self.batches[partition] = _ScriptedBatch(f"p{partition}", self.calls)
        self.queues.setdefault(("t", partition), deque()).append(batch)

    def observed(self) -> tuple[Any, ...]:
        return (self.pool.available, self.pool.exhausted, list(self.calls),
                {tp: [b.name for b in dq] for tp, dq in self.queues.items()})


_KEYS = st.binary(min_size=0, max_size=40)
_STEPS = st.one_of(
    st.tuples(st.just("append"), _KEYS, st.integers(0, 400), st.booleans()),
    st.tuples(st.just("fill"), st.integers(0, 5)),
    st.tuples(st.just("empty"), st.integers(0, 5)),
    st.tuples(st.just("metadata"), st.integers(0, 6)),
    st.tuples(st.just("forget")),
    st.tuples(st.just("exhaust"), st.booleans()),
    st.tuples(st.just("take"), st.integers(0, 3000)),
)


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(0, 4000),
    max_size=st.sampled_from([0, 60, 200, 1 << 20]),
    plain_pool=st.booleans(),
    steps=st.lists(_STEPS, min_size=1, max_size=40),
)
def test_the_compiled_keyed_lane_equals_the_pure_lane(
    compiled_append: Any, total: int, max_size: int, plain_pool: bool, steps: list[tuple[Any, ...]]
) -> None:
    pure, compiled = _World(total, max_size, plain_pool), _World(total, max_size, plain_pool)
    for world in (pure, compiled):
        for p in range(4):
            world.fill(p)
    for i, step in enumerate(steps):
        if step[0] == "append":
            _, key, length, answer = step
            value = b"v" * length
            for world in (pure, compiled):
                for batch in world.batches.values():
                    batch.answer = answer
            expected = KeyedLane._append_pure(pure.lane, "t", key, value)
            got = compiled_append(compiled.lane, "t", key, value)
            assert got == expected, (i, step)
        elif step[0] == "fill":
            for world in (pure, compiled):
                world.fill(step[1])
        elif step[0] == "empty":
            for world in (pure, compiled):
                dq = world.queues.get(("t", step[1]))
                if dq:
                    dq.clear()
        elif step[0] == "metadata":
            for world in (pure, compiled):
                world.client.snapshot = SimpleNamespace(topics={"t": _info(step[1])})
        elif step[0] == "forget":
            for world in (pure, compiled):
                world.client.snapshot.topics.pop("t", None)
        elif step[0] == "exhaust":
            for world in (pure, compiled):
                world.pool.exhausted = step[1]
        else:
            for world in (pure, compiled):
                world.pool.available = max(0, world.pool.available - step[1])
        assert compiled.observed() == pure.observed(), (i, step)


def test_the_partition_is_javas_for_the_key(compiled_append: Any) -> None:
    """toPositive(murmur2(key)) % partitions, over every partition of the topic."""
    for append in (KeyedLane._append_pure, compiled_append):
        world = _World(1 << 20, 1 << 20, plain_pool=False)
        world.client.snapshot.topics["t"] = _info(7)
        for p in range(7):
            world.fill(p)
        keys = [b"", b"a", b"key-1", bytes(range(256)), b"\xff" * 13]
        for key in keys:
            assert append(world.lane, "t", key, b"v") is not None
        assert [c[0] for c in world.calls] == [
            f"p{(_murmur2_pure(k) & 0x7FFFFFFF) % 7}" for k in keys
        ]


def test_real_batches_end_alike(compiled_append: Any) -> None:
    """The lane over real ProducerBatches: the same records, bytes and memory in both."""
    loop = asyncio.new_event_loop()
    try:
        results = []
        for append in (KeyedLane._append_pure, compiled_append):
            queues: dict[tuple[str, int], deque[Any]] = {}
            for p in range(3):
                queues[("t", p)] = deque([ProducerBatch("t", p, codec=Codec.NONE, batch_size=600,
                                                        now=0.0, delivery_timeout=60)])
            pool = BufferPool(50_000)
            client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": _info(3)}))
            lane = KeyedLane(queues, pool, client, loop.create_future, 1 << 20)  # type: ignore[arg-type]
            answers = [append(lane, "t", b"k%d" % i, b"x" * (i % 50)) is not None for i in range(60)]
            batches = [dq[-1] for dq in queues.values()]
            results.append((
                answers, pool.available,
                [(b.record_count, list(b.sizes), b.reserved, b.max_record_size) for b in batches],
                [[(r.offset, r.key, r.value, r.headers) for r in parsed.records]
                 for b in batches for parsed in parse_record_batches(b.builder.build())],
            ))
        pure, compiled = results
        assert compiled == pure
        assert sum(pure[0]) < 60  # some were refused: their batch was full
    finally:
        loop.close()
