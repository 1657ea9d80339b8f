"""Differential fuzz: each compiled kernel against its pure-Python twin, on hostile input.

murmur2 (engine/partitioner.py) and the bulk column passes (bulk/input.py,
bulk/bounds.py) are called with the same arguments: subclasses of list, tuple, int and bytes, memoryviews of every
format and stride, int64 edges, objects whose ``__index__`` or ``__getitem__``
change the containers being read, and (3.12+) objects with ``__buffer__``.
Results must be equal, and so must the exception's type (and its message where
the twins' contract says so). Hypothesis is derandomized with no example
database, so CI runs the same examples every time. .ci/sanitize runs this
module under AddressSanitizer and UBSan, which turn a wrong read into a report.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.bulk.bounds import fill_counting_pure, reservations_pure
from aioproducer.bulk.input import _lengths
from aioproducer.engine.partitioner import _murmur2_pure
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()
ROOT = Path(__file__).resolve().parents[2]

FUZZ = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


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
        out.append((ints[::2], b"".join(data[i : i + 4] for i in range(0, len(data), 8))))
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
    for obj in (
        memoryview(data).cast("b"),
        array("b", data),
        memoryview(data)[::2],
        array("h", [1, -2, 300]),
        BytesSub(b"abcdef"),
    ):
        assert k.murmur2(obj) == _murmur2_pure(obj) == _murmur2_pure(memoryview(obj).tobytes())


@pytest.mark.parametrize(
    "obj", ["key", 7, None, [1, 2], 1.5, object()], ids=lambda o: type(o).__name__
)
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


_INT64_EDGES = [
    0,
    1,
    -1,
    2**31,
    2**32 - 1,
    2**62,
    2**63 - 2,
    2**63 - 1,
    2**63,
    2**64,
    2**70,
    -(2**63),
    -(2**63) - 1,
    -(2**70),
]


class IntSub(int):
    pass


# -- the bulk column passes --------------------------------------------------

_LENGTHS = st.one_of(
    st.sampled_from([-1, 0, 1, 2**62, 2**63 - 1, -(2**63)]), st.integers(-1, 1 << 20)
)


@FUZZ
@given(
    column=st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=20),
            st.builds(bytearray, st.binary(max_size=4)),
            st.builds(BytesSub, st.binary(max_size=4)),
        ),
        max_size=12,
    )
)
def test_byte_lengths_equals_the_pure_lengths_when_it_answers(k: ModuleType, column: list) -> None:
    out = array("q", [0]) * len(column)
    if k.byte_lengths(column, out):
        assert out == _lengths(column)
    else:  # only for elements that are not exactly bytes or None
        assert any(v is not None and type(v) is not bytes for v in column)


@FUZZ
@given(
    fixed=st.sampled_from([0, 1, 70, 2**62, 2**63 - 1, -(2**63)]),
    values=st.lists(_LENGTHS, max_size=8),
    keyed=st.booleans(),
    keys=st.lists(_LENGTHS, min_size=8, max_size=8),
    limit=st.sampled_from([-1, 0, 100, 2**63 - 1, 2**63, 2**70, -(2**70)]),
)
def test_reservations_equal_the_pure_twin(
    k: ModuleType, fixed: int, values: list, keyed: bool, keys: list, limit: int
) -> None:
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
@given(
    size=st.integers(0, 6),
    start=st.sampled_from([-1, 0, 1, 3, 6, 7, 2**63, 2**64, -(2**64)]),
    count=st.sampled_from([-1, 0, 1, 2, 6, 2**63, 2**64]),
    first=st.sampled_from(_INT64_EDGES + [IntSub(4), True]),
)
def test_fill_counting_equals_the_pure_twin(
    k: ModuleType, size: int, start: int, count: int, first: int
) -> None:
    pure_out, compiled_out = array("q", range(size)), array("q", range(size))
    assert outcome(k.fill_counting, compiled_out, start, count, first) == outcome(
        fill_counting_pure, pure_out, start, count, first
    )
    assert compiled_out == pure_out


def test_fill_counting_checks_the_range_before_the_positions(k: ModuleType) -> None:
    # The compiled twin used to refuse the position first (OverflowError) where
    # the pure one said the range is outside the array (IndexError).
    for start, count, first in ((-1, 1, 2**64), (2**64, 1, 0), (0, 5, 2**63)):
        out = array("q", [0, 0])
        assert outcome(k.fill_counting, out, start, count, first) == outcome(
            fill_counting_pure, array("q", [0, 0]), start, count, first
        )


def test_reservations_past_int64_fail_like_the_pure_twin(k: ModuleType) -> None:
    # Signed overflow in C (undefined behaviour) used to wrap the totals.
    for fixed, values, limit in ((2**62, [2**62, 2**62], 0), (-(2**63), [-1], 0), (0, [1], 2**64)):
        out = array("q", [0]) * (len(values) + 1)
        vlen = array("q", values)
        pure = outcome(reservations_pure, fixed, vlen, None, limit)
        compiled = outcome(k.reservations, out, fixed, vlen, None, limit)
        assert compiled == (pure if pure[0] == "raised" else ("ok", pure[1][1]))
