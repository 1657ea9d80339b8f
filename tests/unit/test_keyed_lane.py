"""The compiled keyed lane (KeyedLane) decides and does what its pure twin (KeyedLanePy) does.

Two identical worlds (the accumulator's per-partition queues, a buffer pool, a
client whose metadata snapshot changes, a future factory) go through the same
random steps: appends of random keys and values that the batch takes, fills
or refuses; queues emptied and refilled; the topic's metadata replaced (with
another partition count) or forgotten; the pool running low or being marked
exhausted. After each step both must have answered alike (a future or None),
called the same batch with the same arguments, charged the pool alike and
woken the sender alike. The last tests run real batches through both.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import ProducerBatch, pack_sizes
from aioproducer.engine.buffer_pool import BufferPool
from aioproducer.engine.keyed_lane import KEYED_RECORD_BOUND, KeyedLane, KeyedLanePy
from aioproducer.engine.partitioner import _murmur2_pure
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches
from aioproducer.protocol.records import RecordBatchBuilder
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def lanes() -> tuple[type[Any], type[Any]]:
    """The pure lane and the compiled one (both, whichever the package chose)."""
    return KeyedLanePy, required(K).KeyedLane


class _ScriptedOutcome:
    """An outcome whose handles are tokens (the timestamp, "now", is not compared)."""

    def __init__(
        self, name: str, calls: list[tuple[Any, ...]], tokens: itertools.count[int]
    ) -> None:
        self.name = name
        self.calls = calls
        self.tokens = tokens

    def handle(self, delta: int, timestamp_ms: int, sizes: int) -> tuple[Any, ...]:
        self.calls.append((self.name, "handle", delta, type(timestamp_ms), sizes))
        return ("handle", next(self.tokens))


class _ScriptedBatch:
    """A batch whose append_keyed answers what the test says, and remembers its calls."""

    def __init__(
        self, name: str, calls: list[tuple[Any, ...]], tokens: itertools.count[int]
    ) -> None:
        self.name = name
        self.calls = calls
        self.answer: Any = True
        self.record_count = 0
        self.outcome = _ScriptedOutcome(name, calls, tokens)

    def append_keyed(self, timestamp_ms: Any, *args: Any) -> Any:
        self.calls.append((self.name, type(timestamp_ms), *args))
        if self.answer:
            self.record_count += 1
        return self.answer


class _PlainPool:
    """A pool that is not a BufferPool: the kernel reserves and gives back by method call."""

    def __init__(self, total: int) -> None:
        self.available = total
        self.exhausted = False

    def try_reserve(self, n: int) -> bool:
        if self.exhausted or self.available < n:
            return False
        self.available -= n
        return True

    def release(self, n: int) -> None:
        self.available += n

    def set_exhausted(self, flag: bool) -> None:
        self.exhausted = flag

    def take(self, n: int) -> None:
        self.available -= n


def _info(partitions: int) -> SimpleNamespace:
    return SimpleNamespace(
        partitions=tuple(range(partitions)), tps=tuple(("t", p) for p in range(partitions))
    )


class _World:
    def __init__(self, lane_cls: type[Any], total: int, max_size: int, plain_pool: bool) -> None:
        self.queues: dict[tuple[str, int], deque[Any]] = {}
        self.pool: Any = _PlainPool(total) if plain_pool else BufferPool(total)
        self.client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": _info(4)}))
        self.tokens = itertools.count()
        self.calls: list[tuple[Any, ...]] = []
        self.lane = lane_cls(
            self.queues,
            self.pool,
            self.client,
            max_size,  # type: ignore[arg-type]
            lambda: self.calls.append(("wake", self.pool.available)),
        )
        self.batches: dict[int, _ScriptedBatch] = {}

    def fill(self, partition: int) -> None:
        batch = self.batches[partition] = _ScriptedBatch(f"p{partition}", self.calls, self.tokens)
        self.queues.setdefault(("t", partition), deque()).append(batch)

    def observed(self) -> tuple[Any, ...]:
        return (
            self.pool.available,
            self.pool.exhausted,
            list(self.calls),
            {tp: [b.name for b in dq] for tp, dq in self.queues.items()},
        )


_KEYS = st.binary(min_size=0, max_size=40)
_STEPS = st.one_of(
    st.tuples(
        st.just("append"),
        _KEYS,
        st.integers(0, 400),
        st.sampled_from(
            [
                True,
                False,
                batch_module.APPENDED,
                batch_module.REFUSED,
                batch_module.APPENDED + batch_module.FULL,
                2,
            ]
        ),
    ),
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
    lanes: tuple[type[Any], type[Any]],
    total: int,
    max_size: int,
    plain_pool: bool,
    steps: list[tuple[Any, ...]],
) -> None:
    pure, compiled = (_World(cls, total, max_size, plain_pool) for cls in lanes)
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
            expected = pure.lane.append("t", key, value)
            got = compiled.lane.append("t", key, value)
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
                world.pool.set_exhausted(step[1])
        else:
            for world in (pure, compiled):
                world.pool.take(min(step[1], world.pool.available))
        assert compiled.observed() == pure.observed(), (i, step)


def test_the_partition_is_javas_for_the_key(lanes: tuple[type[Any], type[Any]]) -> None:
    """toPositive(murmur2(key)) % partitions, over every partition of the topic."""
    for cls in lanes:
        append = cls.append
        world = _World(cls, 1 << 20, 1 << 20, plain_pool=False)
        world.client.snapshot.topics["t"] = _info(7)
        for p in range(7):
            world.fill(p)
        keys = [b"", b"a", b"key-1", bytes(range(256)), b"\xff" * 13]
        for key in keys:
            assert append(world.lane, "t", key, b"v") is not None
        assert [c[0] for c in world.calls if c[1] != "handle"] == [
            f"p{(_murmur2_pure(k) & 0x7FFFFFFF) % 7}" for k in keys
        ]


def test_real_batches_end_alike(lanes: tuple[type[Any], type[Any]]) -> None:
    """The lane over real ProducerBatches: the same records, bytes and memory in both."""
    loop = asyncio.new_event_loop()
    try:
        results = []
        for cls in lanes:
            append = cls.append
            queues: dict[tuple[str, int], deque[Any]] = {}
            for p in range(3):
                queues[("t", p)] = deque(
                    [
                        ProducerBatch(
                            "t", p, codec=Codec.NONE, batch_size=600, now=0.0, delivery_timeout=60
                        )
                    ]
                )
            pool = BufferPool(50_000)
            client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": _info(3)}))
            wakes: list[int] = []
            lane = cls(
                queues,
                pool,
                client,
                1 << 20,  # type: ignore[arg-type]
                functools.partial(wakes.append, 0),
            )
            answers = [
                append(lane, "t", b"k%d" % i, b"x" * (i % 50)) is not None for i in range(60)
            ]
            batches = [dq[-1] for dq in queues.values()]
            results.append(
                (
                    answers,
                    pool.available,
                    wakes,
                    [(b.record_count, b.reserved, b.max_record_size) for b in batches],
                    [
                        [(r.offset, r.key, r.value, r.headers) for r in parsed.records]
                        for b in batches
                        for parsed in parse_record_batches(b.builder.build())
                    ],
                )
            )
        pure, compiled = results
        assert compiled == pure
        assert sum(pure[0]) < 60  # some were refused: their batch was full
    finally:
        loop.close()


def _record_count_on_wake(batch: ProducerBatch, wakes: list[int]) -> Callable[[], None]:
    """A lane's wake that notes how many records the batch held when it was called."""
    return lambda: wakes.append(batch.record_count)


def test_the_record_that_fills_its_batch_wakes_the_sender(
    lanes: tuple[type[Any], type[Any]],
) -> None:
    """Only the append that leaves the batch full (is_full()) wakes the sender, in both lanes."""
    # A first record stamped an hour back: the lane's records, stamped now, get
    # 4-byte timestamp deltas however slowly this runs, so the size they fill is known.
    base = time.time_ns() // 1_000_000 - 3_600_000
    key = b"key"
    values = [b"a" * 30, b"b" * 100, b"", b"c" * 5]
    probe = RecordBatchBuilder(codec=Codec.NONE, batch_size=1 << 20)
    for ts, value in [(base, b"first")] + [(base + 3_600_000, v) for v in values]:
        probe.append(ts, key, value, None)
    loop = asyncio.new_event_loop()
    try:
        for cls in lanes:
            append = cls.append
            batch = ProducerBatch(
                "t",
                0,
                codec=Codec.NONE,
                batch_size=probe.size_in_bytes,
                now=0.0,
                delivery_timeout=60,
            )
            assert batch.try_append(base, key, b"first", None, pack_sizes(3, 5))
            client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": _info(1)}))
            wakes: list[int] = []
            lane = cls(
                {("t", 0): deque([batch])},
                BufferPool(1 << 20),
                client,  # type: ignore[arg-type]
                1 << 20,
                _record_count_on_wake(batch, wakes),
            )
            assert all(append(lane, "t", key, value) is not None for value in values)
            assert batch.is_full() and wakes == [5], (append, wakes)
            assert append(lane, "t", key, b"") is None and wakes == [5]
    finally:
        loop.close()


def test_the_package_chose_one_keyed_lane_and_its_bound_matches() -> None:
    k = required(K)
    assert KeyedLane is (k.KeyedLane if batch_module.kernels is not None else KeyedLanePy)
    assert k.KEYED_RECORD_BOUND == KEYED_RECORD_BOUND


class _MeddlingTopic(str):
    """A topic whose comparison (a hash collision in the deques' or metadata's dict) runs ``hook``."""

    hook: Any = None

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        hook, _MeddlingTopic.hook = _MeddlingTopic.hook, None
        if hook is not None:
            hook()
        return str.__eq__(self, other)


def test_a_lane_whose_dicts_change_mid_lookup_does_not_crash(
    lanes: tuple[type[Any], type[Any]],
) -> None:
    """The topic's ``__eq__`` empties the metadata and the queues while they are looked up:
    both lanes answer alike, and nothing freed is used (PYTHONMALLOC=debug, .ci/sanitize)."""
    answers = []
    for cls in lanes:
        world = _World(cls, 1 << 20, 1 << 20, plain_pool=False)
        world.fill(0)

        def meddle(world: _World = world) -> None:
            world.client.snapshot.topics.clear()
            world.queues.clear()
            world.client.snapshot = SimpleNamespace(topics={})

        _MeddlingTopic.hook = meddle
        topic = _MeddlingTopic("t")
        try:
            answer: Any = world.lane.append(topic, b"k", b"v")
        except Exception as exc:  # noqa: BLE001 - compared by type
            answer = type(exc)
        assert _MeddlingTopic.hook is None, "a lookup compared the topic"
        answers.append((answer is None, world.observed()))
    assert answers[1] == answers[0]
