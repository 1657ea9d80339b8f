"""Differential fuzz: each compiled kernel against its pure-Python twin, on hostile input.

murmur2 (engine/partitioner.py), resolve_futures (engine/resolve.py), the bulk
column passes (bulk/input.py, bulk/bounds.py) and future_factory
(``functools.partial(asyncio.Future, loop=loop)``) are called with the same
arguments: subclasses of list, tuple, int and bytes, memoryviews of every
format and stride, int64 edges, objects whose ``__index__`` or ``__getitem__``
change the containers being read, and (3.12+) objects with ``__buffer__``.
Results must be equal, and so must the exception's type (and its message where
the twins' contract says so). Hypothesis is derandomized with no example
database, so CI runs the same examples every time. .ci/sanitize runs this
module under AddressSanitizer and UBSan, which turn a wrong read into a report.
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import struct
import textwrap
from array import array
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.bulk.bounds import fill_counting_pure, reservations_pure
from aioproducer.bulk.input import _lengths
from aioproducer.engine.batch import RecordMetadata, pack_sizes
from aioproducer.engine.partitioner import _murmur2_pure
from aioproducer.engine.resolve import resolve_pure
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()
ROOT = Path(__file__).resolve().parents[2]

FUZZ = settings(max_examples=120, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def k() -> ModuleType:
    return required(K)


def outcome(fn: Callable[..., Any], *args: Any) -> tuple:
    """What a call did: ("ok", result) or ("raised", type, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # the comparison is the point
        return ("raised", type(exc), str(exc))


def kind(result: tuple) -> tuple:
    """An outcome without the exception's message (where only the type is contracted)."""
    return result[:2]


# -- murmur2 -----------------------------------------------------------------


class BytesSub(bytes):
    """A bytes subclass that lies about its items: hashed as its bytes all the same."""

    def __getitem__(self, i: Any) -> Any:
        return 0

    def __len__(self) -> int:
        return 1


_FORMATS = "bBhHiIlLqQfdc?"


def buffer_forms(data: bytes) -> list[Any]:
    """``data`` as every bytes-like object that holds exactly those bytes (in C order)."""
    view = memoryview(data)
    forms: list[Any] = [data, bytearray(data), BytesSub(data), view, view.toreadonly()]
    for fmt in _FORMATS:
        size = struct.calcsize(fmt)
        if len(data) % size == 0:
            forms.append(view.cast(fmt))
            if len(data) >= 2 * size and len(data) % (2 * size) == 0:
                forms.append(view.cast(fmt, [2, len(data) // (2 * size)]))
    for code in "bBhHiIlLqQfd":
        arr = array(code)
        if len(data) % arr.itemsize == 0:
            arr.frombytes(data)
            forms.append(arr)
    return forms


def strided_forms(data: bytes) -> list[tuple[Any, bytes]]:
    """Non-contiguous views, each with the bytes it holds in C order."""
    view = memoryview(data)
    out = [(view[::2], data[::2]), (view[::-1], data[::-1]), (view[1::3], data[1::3])]
    if len(data) % 4 == 0 and data:
        ints = view.cast("i")
        out.append((ints[::2], b"".join(data[i:i + 4] for i in range(0, len(data), 8))))
    return out


@FUZZ
@given(data=st.binary(max_size=64))
def test_murmur2_hashes_every_buffer_as_its_bytes(k: ModuleType, data: bytes) -> None:
    expected = _murmur2_pure(data)
    for obj in buffer_forms(data):
        assert outcome(k.murmur2, obj) == outcome(_murmur2_pure, obj) == ("ok", expected), obj
    for obj, raw in strided_forms(data):
        assert outcome(k.murmur2, obj) == outcome(_murmur2_pure, obj) == ("ok", _murmur2_pure(raw))


def test_murmur2_of_signed_and_strided_buffers_agrees_between_twins(k: ModuleType) -> None:
    # The pure twin used to hash their items (negative for 'b'), the compiled one
    # their bytes or refused a non-contiguous view with BufferError.
    data = bytes(range(256))
    for obj in (memoryview(data).cast("b"), array("b", data), memoryview(data)[::2],
                array("h", [1, -2, 300]), BytesSub(b"abcdef")):
        assert k.murmur2(obj) == _murmur2_pure(obj) == _murmur2_pure(memoryview(obj).tobytes())


@pytest.mark.parametrize("obj", ["key", 7, None, [1, 2], 1.5, object()], ids=lambda o: type(o).__name__)
def test_murmur2_refuses_what_has_no_buffer_alike(k: ModuleType, obj: Any) -> None:
    assert outcome(k.murmur2, obj) == outcome(_murmur2_pure, obj)
    assert outcome(k.murmur2, obj)[1] is TypeError


@pytest.mark.skipif(sys.version_info < (3, 12), reason="__buffer__ is Python 3.12's (PEP 688)")
def test_murmur2_of_a_python_buffer_that_mutates_its_source(k: ModuleType) -> None:
    class Shifty:
        def __init__(self) -> None:
            self.data = bytearray(b"0123456789" * 10)

        def __buffer__(self, flags: int) -> memoryview:
            view = memoryview(bytes(self.data))
            self.data[:] = b"x"  # what it held is gone; the view keeps its copy
            return view

    assert k.murmur2(Shifty()) == _murmur2_pure(Shifty()) == _murmur2_pure(b"0123456789" * 10)


# -- resolve_futures ---------------------------------------------------------


def run_both(k: ModuleType, n: int, *args: Any, futures: Callable[[Any, int], list] | None = None,
             metadata: Any = RecordMetadata) -> tuple[tuple, tuple]:
    """Each twin on fresh futures: (outcome, futures' states) per twin."""
    loop = asyncio.new_event_loop()
    try:
        seen = []
        for fn in (k.resolve_futures, resolve_pure):
            futs = futures(loop, n) if futures else [loop.create_future() for _ in range(n)]
            result = outcome(fn, futs, *args[:2], metadata, *args[2:])
            states = [(type(f.result()), f.result()) if f.done() and not f.cancelled() else f.done()
                      for f in list(futs)]
            seen.append((result, states))
        return seen[0], seen[1]
    finally:
        loop.close()


_INT64_EDGES = [0, 1, -1, 2**31, 2**32 - 1, 2**62, 2**63 - 2, 2**63 - 1, 2**63, 2**64, 2**70, -2**63,
                -2**63 - 1, -2**70]


class IntSub(int):
    pass


@FUZZ
@given(
    n=st.integers(0, 6),
    bounds=st.tuples(st.integers(0, 6), st.integers(0, 6)),
    base=st.sampled_from(_INT64_EDGES),
    deltas=st.one_of(st.none(), st.lists(st.sampled_from(_INT64_EDGES + [IntSub(5), True]),
                                         min_size=6, max_size=6)),
    log_append=st.sampled_from([-1, 0, 2**63, -2**63 - 1, 1_700_000_000_000]),
    stamps=st.lists(st.sampled_from(_INT64_EDGES + [IntSub(3)]), min_size=6, max_size=6),
    sizes=st.lists(st.one_of(st.sampled_from([0, 2**64 - 1, 2**64, -1, 2**70]),
                             st.integers(0, 2**64 - 1)), min_size=6, max_size=6),
    metadata=st.sampled_from([RecordMetadata, tuple]),
)
def test_resolve_futures_equals_the_pure_twin_at_int64_edges(
    k: ModuleType, n: int, bounds: tuple[int, int], base: int, deltas: list | None,
    log_append: int, stamps: list, sizes: list, metadata: type,
) -> None:
    start, stop = sorted(min(b, n) for b in bounds)
    compiled, pure = run_both(k, n, start, stop, "t", 0, base, deltas, log_append, stamps, sizes,
                              asyncio.InvalidStateError, metadata=metadata)
    assert compiled == pure


def test_an_offset_past_int64_is_exact(k: ModuleType) -> None:
    # base_offset + delta beyond int64 used to wrap negative in C.
    for base, deltas in ((2**63 - 1, [1]), (2**63 - 1, None), (2**64, None), (1, [2**63 - 1])):
        compiled, pure = run_both(k, 2, 0, 1, "t", 0, base, deltas and deltas * 2, -1, [0, 0],
                                  [pack_sizes(1, 1)] * 2, asyncio.InvalidStateError)
        assert compiled == pure
        assert compiled[1][0][1].offset == base + (deltas[0] if deltas else 0)


class NamedPair(tuple):
    def __new__(cls, *args: Any) -> NamedPair:  # never called: tuple.__new__ is
        raise AssertionError("the metadata class's own __new__ was called")


class WithDict(tuple):
    pass


@pytest.mark.parametrize("metadata", [RecordMetadata, tuple, NamedPair, WithDict, IntSub, int,
                                      "RecordMetadata"], ids=repr)
def test_resolve_futures_builds_metadata_as_tuple_new(k: ModuleType, metadata: Any) -> None:
    compiled, pure = run_both(k, 3, 0, 3, "t", 2, 10, None, -1, [1, 2, 3], [pack_sizes(1, 2)] * 3,
                              asyncio.InvalidStateError, metadata=metadata)
    if compiled[0][0] == "ok" or pure[0][0] == "ok":
        assert compiled == pure
    else:  # the compiled twin refuses a non-tuple class before any record
        assert kind(compiled[0]) == kind(pure[0]) and compiled[0][1] is TypeError


def test_struct_sequences_are_refused_as_by_tuple_new(k: ModuleType) -> None:
    # Allocated as a plain tuple, a struct sequence's dealloc read past its six
    # items: the interpreter crashed. In a child process, so a crash fails this
    # test instead of the run.
    code = textwrap.dedent("""
        import asyncio, os, time
        from aioproducer._speedups import _kernels as k
        from aioproducer.engine.resolve import resolve_pure
        loop = asyncio.new_event_loop()
        for cls in (time.struct_time, os.stat_result, type(os.times())):
            seen = []
            for fn in (k.resolve_futures, resolve_pure):
                fut = loop.create_future()
                try:
                    fn([fut], 0, 1, cls, "t", 0, 5, None, -1, [1], [1 << 32 | 1],
                       asyncio.InvalidStateError)
                    seen.append(("ok", fut.result()))
                except Exception as exc:
                    seen.append((type(exc).__name__, str(exc), fut.done()))
            assert seen[0] == seen[1], seen
            print(seen[0][0])
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["TypeError"] * 3


def test_a_bad_delta_fails_after_the_records_before_it(k: ModuleType) -> None:
    # Both twins resolve records in order and stop at the first bad one.
    compiled, pure = run_both(k, 3, 0, 3, "t", 0, 10, [0, 1, "x"], -1, [1, 2, 3],
                              [pack_sizes(1, 2)] * 3, asyncio.InvalidStateError)
    assert compiled == pure and compiled[0][1] is TypeError
    assert [s is False for s in compiled[1]] == [False, False, True]


class Shrinking(list):
    """A list whose every read drops its last item: the kernel must re-check bounds."""

    def __getitem__(self, i: Any) -> Any:
        item = super().__getitem__(i)
        if len(self) > 1:
            self.pop()
        return item


class Index:
    """A delta whose __index__ empties the deltas list being read."""

    def __init__(self, target: list, value: int) -> None:
        self.target, self.value = target, value

    def __index__(self) -> int:
        self.target.clear()
        return self.value


@FUZZ
@given(n=st.integers(1, 8), shrink=st.sampled_from(["futures", "deltas", "stamps", "sizes"]))
def test_resolve_futures_survives_containers_changed_under_it(k: ModuleType, n: int, shrink: str) -> None:
    loop = asyncio.new_event_loop()
    try:
        futs = [loop.create_future() for _ in range(n)]
        parts = {"futures": futs, "deltas": list(range(n)), "stamps": [7] * n,
                 "sizes": [pack_sizes(1, 1)] * n}
        parts[shrink] = Shrinking(parts[shrink])
        held = list(futs)
        try:
            k.resolve_futures(parts["futures"], 0, n, RecordMetadata, "t", 0, 100, parts["deltas"], -1,
                              parts["stamps"], parts["sizes"], asyncio.InvalidStateError)
        except IndexError:
            pass
        for j, fut in enumerate(held):  # each done at most once, with its own offset
            assert not fut.done() or fut.result() == RecordMetadata("t", 0, 100 + j, 7, 1, 1)
        deltas: list[Any] = []
        deltas.extend([Index(deltas, 1)] * n)
        fresh = [loop.create_future() for _ in range(n)]
        assert kind(outcome(k.resolve_futures, fresh, 0, n, RecordMetadata, "t", 0, 5, deltas, -1,
                            [1] * n, [0] * n, asyncio.InvalidStateError)) == ("raised", TypeError)
    finally:
        loop.close()


def test_a_set_result_that_empties_the_futures_is_survived(k: ModuleType) -> None:
    class Clearing:
        def __init__(self, futures: list) -> None:
            self.futures, self.results = futures, []

        def set_result(self, result: Any) -> None:
            self.results.append(result)
            self.futures.clear()

    futures: list[Any] = []
    futures.extend(Clearing(futures) for _ in range(3))
    held = list(futures)
    with pytest.raises(IndexError):
        k.resolve_futures(futures, 0, 3, RecordMetadata, "t", 0, 0, None, -1, [1] * 3, [0] * 3,
                          asyncio.InvalidStateError)
    assert [len(h.results) for h in held] == [1, 0, 0]


# -- the bulk column passes --------------------------------------------------

_LENGTHS = st.one_of(st.sampled_from([-1, 0, 1, 2**62, 2**63 - 1, -2**63]), st.integers(-1, 1 << 20))


@FUZZ
@given(column=st.lists(st.one_of(st.none(), st.binary(max_size=20),
                                 st.builds(bytearray, st.binary(max_size=4)),
                                 st.builds(BytesSub, st.binary(max_size=4))), max_size=12))
def test_byte_lengths_equals_the_pure_lengths_when_it_answers(k: ModuleType, column: list) -> None:
    out = array("q", [0]) * len(column)
    if k.byte_lengths(column, out):
        assert out == _lengths(column)
    else:  # only for elements that are not exactly bytes or None
        assert any(v is not None and type(v) is not bytes for v in column)


@FUZZ
@given(fixed=st.sampled_from([0, 1, 70, 2**62, 2**63 - 1, -2**63]),
       values=st.lists(_LENGTHS, max_size=8), keyed=st.booleans(),
       keys=st.lists(_LENGTHS, min_size=8, max_size=8),
       limit=st.sampled_from([-1, 0, 100, 2**63 - 1, 2**63, 2**70, -2**70]))
def test_reservations_equal_the_pure_twin(k: ModuleType, fixed: int, values: list, keyed: bool,
                                          keys: list, limit: int) -> None:
    vlen = array("q", values)
    klen = array("q", keys[: len(values)]) if keyed else None
    out = array("q", [0]) * (len(values) + 1)
    pure = outcome(reservations_pure, fixed, vlen, klen, limit)
    compiled = outcome(k.reservations, out, fixed, vlen, klen, limit)
    if pure[0] == "ok":
        assert compiled == ("ok", pure[1][1]) and out == pure[1][0]
    else:  # past int64: array('q')'s OverflowError, message and all
        assert compiled == pure


@FUZZ
@given(size=st.integers(0, 6), start=st.sampled_from([-1, 0, 1, 3, 6, 7, 2**63, 2**64, -2**64]),
       count=st.sampled_from([-1, 0, 1, 2, 6, 2**63, 2**64]),
       first=st.sampled_from(_INT64_EDGES + [IntSub(4), True]))
def test_fill_counting_equals_the_pure_twin(k: ModuleType, size: int, start: int, count: int,
                                            first: int) -> None:
    pure_out, compiled_out = array("q", range(size)), array("q", range(size))
    assert outcome(k.fill_counting, compiled_out, start, count, first) == outcome(
        fill_counting_pure, pure_out, start, count, first)
    assert compiled_out == pure_out


def test_fill_counting_checks_the_range_before_the_positions(k: ModuleType) -> None:
    # The compiled twin used to refuse the position first (OverflowError) where
    # the pure one said the range is outside the array (IndexError).
    for start, count, first in ((-1, 1, 2**64), (2**64, 1, 0), (0, 5, 2**63)):
        out = array("q", [0, 0])
        assert outcome(k.fill_counting, out, start, count, first) == outcome(
            fill_counting_pure, array("q", [0, 0]), start, count, first)


def test_reservations_past_int64_fail_like_the_pure_twin(k: ModuleType) -> None:
    # Signed overflow in C (undefined behaviour) used to wrap the totals.
    for fixed, values, limit in ((2**62, [2**62, 2**62], 0), (-2**63, [-1], 0), (0, [1], 2**64)):
        out = array("q", [0]) * (len(values) + 1)
        vlen = array("q", values)
        pure = outcome(reservations_pure, fixed, vlen, None, limit)
        compiled = outcome(k.reservations, out, fixed, vlen, None, limit)
        assert compiled == (pure if pure[0] == "raised" else ("ok", pure[1][1]))


# -- future_factory ----------------------------------------------------------


@pytest.mark.parametrize("args", [(), (1,), ("x", "y")], ids=repr)
def test_future_factory_equals_partial_future(k: ModuleType, args: tuple) -> None:
    loop = asyncio.new_event_loop()
    try:
        made = [outcome(maker, *args) for maker in (k.future_factory(loop),
                                                   functools.partial(asyncio.Future, loop=loop))]
        if made[0][0] == "ok":
            assert [(type(f), f.get_loop(), f.done()) for _, f in made] == [(asyncio.Future, loop, False)] * 2
        else:
            assert kind(made[0]) == kind(made[1]) and made[0][1] is TypeError
        assert outcome(k.future_factory(loop)) != outcome(k.future_factory(loop))  # a new one per call
    finally:
        loop.close()

