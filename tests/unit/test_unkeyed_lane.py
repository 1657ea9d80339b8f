"""The compiled unkeyed lane (UnkeyedLane) decides and does what its pure twin (UnkeyedLanePy) does.

Two identical worlds (the partitioner's filling and produced dicts, a buffer
pool, a client whose metadata snapshot changes) go through
the same random steps: appends of random sizes that the batch takes, refuses,
ends the sticky turn with or fills; the batch dying; the topic's metadata replaced;
the pool running low or being marked exhausted; the topic forgotten and a new
batch filling. After each step both must have answered alike (a future or
None), made the same handles, called the batch with the same arguments, charged the pool alike,
woken the sender alike and moved the partitioner alike. A last test runs a real batch through both.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import ProducerBatch, pack_sizes
from aioproducer.engine.buffer_pool import BufferPool
from aioproducer.engine.record_handle import RecordHandle
from aioproducer.engine.sticky import StickyPartitioner
from aioproducer.engine.unkeyed_lane import UNKEYED_RECORD_BOUND, UnkeyedLane, UnkeyedLanePy
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilder
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()
FULL = batch_module.FULL


@pytest.fixture(scope="module")
def lanes() -> tuple[type[Any], type[Any]]:
    """The pure lane and the compiled one (both, whichever the package chose)."""
    return UnkeyedLanePy, required(K).UnkeyedLane


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


class _ScriptedOutcome:
    """An outcome whose handles are tokens (the timestamp, "now", is not compared)."""

    def __init__(self, calls: list[tuple[Any, ...]], tokens: itertools.count[int]) -> None:
        self.calls = calls
        self.tokens = tokens

    def handle(self, delta: int, timestamp_ms: int, sizes: int) -> tuple[Any, ...]:
        self.calls.append(("handle", delta, type(timestamp_ms), sizes))
        return ("handle", next(self.tokens))


class _ScriptedBatch:
    """A batch whose append_unkeyed answers what the test says, and remembers its calls."""

    def __init__(self, calls: list[tuple[Any, ...]], tokens: itertools.count[int]) -> None:
        self.calls = calls
        self.answer: Any = batch_module.APPENDED
        self.record_count = 0
        self.outcome = _ScriptedOutcome(calls, tokens)

    def append_unkeyed(self, *args: Any) -> int:
        timestamp, value, reserve, bound, produced, topic, limit = args
        self.calls.append((type(timestamp), value, reserve, bound, dict(produced), topic, limit))
        if self.answer:
            self.record_count += 1
        return self.answer  # type: ignore[no-any-return]


class _World:
    def __init__(
        self, lane_cls: type[Any], total: int, max_size: int, plain_pool: bool = False
    ) -> None:
        self.sticky = StickyPartitioner(batch_size=1000)
        self.pool: Any = _PlainPool(total) if plain_pool else BufferPool(total)
        # Wakes and moves in one list: their order is compared too.
        self.moves: list[tuple[str, Any]] = []
        self.client = SimpleNamespace(snapshot=SimpleNamespace(topics={}))
        self.tokens = itertools.count()
        self.lane = lane_cls(
            self.sticky,
            self.pool,
            self.client,
            max_size,  # type: ignore[arg-type]
            lambda: self.moves.append(("wake", self.pool.available)),
        )
        self.lane.move_on = lambda topic, info: self.moves.append((topic, info))
        self.calls: list[tuple[Any, ...]] = []
        self.batch: _ScriptedBatch | None = None

    def fill(self, info: object) -> None:
        self.batch = _ScriptedBatch(self.calls, self.tokens)
        self.sticky.filling["t"] = (weakref.ref(self.batch), info)  # type: ignore[arg-type]

    def observed(self) -> tuple[Any, ...]:
        return (
            self.pool.available,
            self.pool.exhausted,
            list(self.calls),
            list(self.moves),
            dict(self.sticky.produced),
            "t" in self.sticky.filling,
        )


_STEPS = st.one_of(
    st.tuples(
        st.just("append"),
        st.integers(0, 400),
        st.sampled_from(
            [
                batch_module.APPENDED,
                batch_module.REFUSED,
                batch_module.SWITCH,
                batch_module.APPENDED + FULL,
                batch_module.SWITCH + FULL,
                True,
                3,
            ]
        ),
    ),
    st.tuples(st.just("kill")),
    st.tuples(st.just("metadata")),
    st.tuples(st.just("exhaust"), st.booleans()),
    st.tuples(st.just("take"), st.integers(0, 3000)),
    st.tuples(st.just("forget")),
    st.tuples(st.just("refill")),
)


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(0, 4000),
    max_size=st.sampled_from([0, 50, 200, 1 << 20]),
    steps=st.lists(_STEPS, min_size=1, max_size=40),
    plain_pool=st.booleans(),
)
def test_the_compiled_lane_equals_the_pure_lane(
    lanes: tuple[type[Any], type[Any]],
    total: int,
    max_size: int,
    steps: list[tuple[Any, ...]],
    plain_pool: bool,
) -> None:
    pure, compiled = (_World(cls, total, max_size, plain_pool) for cls in lanes)
    infos = [object(), object(), object()]
    for world in (pure, compiled):
        world.client.snapshot.topics["t"] = infos[0]
        world.fill(infos[0])
    current = 0
    for i, step in enumerate(steps):
        if step[0] == "append":
            _, length, answer = step
            value = b"v" * length
            for world in (pure, compiled):
                if world.batch is not None:
                    world.batch.answer = answer
            expected = pure.lane.append("t", value)
            got = compiled.lane.append("t", value)
            assert got == expected, (i, step)
        elif step[0] == "kill":
            for world in (pure, compiled):
                # The only strong reference, in no cycle: the weak one dies at once
                # (no collection needed, which in a long test run is slow).
                world.batch = None
                assert (
                    world.sticky.filling.get("t") is None or world.sticky.filling["t"][0]() is None
                )
        elif step[0] == "metadata":
            current = (current + 1) % len(infos)
            for world in (pure, compiled):
                world.client.snapshot = SimpleNamespace(topics={"t": infos[current]})
        elif step[0] == "exhaust":
            for world in (pure, compiled):
                world.pool.set_exhausted(step[1])
        elif step[0] == "take":
            for world in (pure, compiled):
                world.pool.take(min(step[1], world.pool.available))
        elif step[0] == "forget":
            for world in (pure, compiled):
                world.sticky.filling.pop("t", None)
        else:
            for world in (pure, compiled):
                world.fill(infos[current])
        assert compiled.observed() == pure.observed(), (i, step)


def test_a_real_batch_through_both_lanes(lanes: tuple[type[Any], type[Any]]) -> None:
    """The direct call into the batch kernel: same records, pool and sticky count."""
    loop = asyncio.new_event_loop()
    try:
        results = []
        for cls in lanes:
            append = cls.append
            sticky = StickyPartitioner(batch_size=2000)
            pool = BufferPool(1 << 20)
            info = object()
            client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": info}))
            moves: list[str] = []
            lane = cls(
                sticky,
                pool,
                client,
                1 << 20,  # type: ignore[arg-type]
                functools.partial(moves.append, "wake"),
            )
            lane.move_on = lambda topic, _info, moves=moves: moves.append(topic)
            batch = ProducerBatch(
                "t", 0, codec=Codec.NONE, batch_size=3000, now=0.0, delivery_timeout=60, loop=loop
            )
            sticky.filling["t"] = (weakref.ref(batch), info)  # type: ignore[arg-type]
            answers = [append(lane, "t", bytes([i]) * (i * 7 % 150)) for i in range(60)]
            taken = [a for a in answers if a is not None]
            assert all(type(h) is RecordHandle and not h.done() for h in taken)
            batch.complete(100)
            placed = [(h.result().offset, h.result().serialized_value_size) for h in taken]
            results.append(
                (
                    len(taken),
                    answers.index(None),
                    moves,
                    pool.available,
                    dict(sticky.produced),
                    batch.reserved,
                    batch.record_count,
                    placed,
                )
            )
        assert results[1] == results[0]
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
    values = [b"a" * 30, b"b" * 100, b"", b"c" * 5]
    probe = RecordBatchBuilder(codec=Codec.NONE, batch_size=1 << 20)
    for ts, value in [(base, b"first")] + [(base + 3_600_000, v) for v in values]:
        probe.append(ts, None, value, None)
    loop = asyncio.new_event_loop()
    try:
        for cls in lanes:
            append = cls.append
            sticky = StickyPartitioner(batch_size=1 << 20)  # its turn never ends here
            info: Any = object()
            client = SimpleNamespace(snapshot=SimpleNamespace(topics={"t": info}))
            batch = ProducerBatch(
                "t",
                0,
                codec=Codec.NONE,
                batch_size=probe.size_in_bytes,
                now=0.0,
                delivery_timeout=60,
            )
            wakes: list[int] = []
            lane = cls(
                sticky,
                BufferPool(1 << 20),
                client,
                1 << 20,  # type: ignore[arg-type]
                _record_count_on_wake(batch, wakes),
            )
            assert batch.try_append(base, None, b"first", None, pack_sizes(-1, 5))
            sticky.filling["t"] = (weakref.ref(batch), info)
            assert all(append(lane, "t", value) is not None for value in values)
            assert batch.is_full() and wakes == [5], (append, wakes)
            assert append(lane, "t", b"") is None and wakes == [5]
    finally:
        loop.close()


def test_the_compiled_lane_checks_its_receiver(lanes: tuple[type[Any], type[Any]]) -> None:
    compiled = lanes[1]
    with pytest.raises(TypeError):
        compiled.append(object(), "t", b"v")
    with pytest.raises(TypeError):
        compiled.append(compiled.__new__(compiled), "t")
    with pytest.raises(AttributeError):  # fields never set: as a pure lane's unset slots
        compiled.append(compiled.__new__(compiled), "t", b"v")


def test_the_package_chose_one_lane_and_its_constants_match() -> None:
    k = required(K)
    assert UnkeyedLane is (k.UnkeyedLane if batch_module.kernels is not None else UnkeyedLanePy)
    assert (k.UNKEYED_RECORD_BOUND, k.RECORD_HANDLE_OVERHEAD) == (
        UNKEYED_RECORD_BOUND,
        batch_module.RECORD_HANDLE_OVERHEAD,
    )
    assert not any(name.startswith("bind_") for name in dir(k))


@pytest.mark.parametrize("edge", ["no entry", "huge max", "huge pool"])
def test_edges_answer_as_the_pure_lane(lanes: tuple[type[Any], type[Any]], edge: str) -> None:
    """A None entry, and ints past 64 bits where the pure lane just compares."""
    answers = []
    for cls in lanes:
        append = cls.append
        # The largest pool a counter holds (2**63 - 1 bytes): a record's bound is far below it.
        world = _World(
            cls,
            (1 << 63) - 1 if edge == "huge pool" else 4000,
            1 << 70 if edge == "huge max" else 1 << 20,
        )
        world.client.snapshot.topics["t"] = info = object()
        world.fill(info)
        if edge == "no entry":
            world.sticky.filling["t"] = None  # type: ignore[assignment]
        answers.append((append(world.lane, "t", b"v" * 10), world.observed()))
    assert answers[1] == answers[0]


class _MeddlingTopic(str):
    """A topic whose comparison (a hash collision in ``filling``) runs ``hook`` once."""

    hook: Any = None

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        hook, _MeddlingTopic.hook = _MeddlingTopic.hook, None
        if hook is not None:
            hook()
        return str.__eq__(self, other)


@pytest.mark.parametrize("change", ["forget", "refill"])
def test_a_filling_dict_changed_mid_lookup_does_not_crash(
    lanes: tuple[type[Any], type[Any]], change: str
) -> None:
    """The topic's ``__eq__`` empties ``filling`` or puts a new batch there while it is looked
    up: both lanes answer alike, and nothing freed is used (.ci/sanitize, PYTHONMALLOC=malloc)."""
    answers = []
    for cls in lanes:
        world = _World(cls, 1 << 20, 1 << 20)
        world.client.snapshot.topics["t"] = info = object()
        world.fill(info)

        def meddle(world: _World = world, info: object = info) -> None:
            world.sticky.filling.clear()  # the entry and its weak reference freed
            if change == "refill":
                world.fill(info)

        _MeddlingTopic.hook = meddle
        answer = world.lane.append(_MeddlingTopic("t"), b"v" * 10)
        assert _MeddlingTopic.hook is None, "the lookup compared the topic"
        answers.append((answer is None, world.observed()))
    assert answers[1] == answers[0]
