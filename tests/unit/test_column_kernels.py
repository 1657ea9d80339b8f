"""The bulk path's compiled column passes equal their pure-Python references.

``byte_lengths`` (a list's lengths, -1 for None, or "not all bytes"),
``reservations`` (running totals of each record's buffer reservation and the
first record over the limit) and ``fill_counting`` (consecutive positions) are
compared with :mod:`aioproducer.bulk.bounds` and :mod:`aioproducer.bulk.input`
on random columns: nulls, empty values, lengths at the varint steps, keys or
none, limits that cut anywhere. The extension is imported directly, so the
comparison runs under ``AIOPRODUCER_NO_EXTENSIONS=1`` too; it skips only where
the extension is not built and CI is not ``"true"``.
"""

from __future__ import annotations

from array import array
from types import ModuleType
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer import errors
from aioproducer.bulk import bounds
from aioproducer.bulk import input as bulk_input
from aioproducer.bulk.bounds import fill_counting_pure, record_reservations, reservations_pure
from aioproducer.bulk.input import read_columns
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def k() -> ModuleType:
    return required(K)


_LENGTHS = st.one_of(st.integers(0, 300), st.sampled_from([63, 64, 8191, 8192, 100_000]))
_VALUE = st.one_of(st.none(), _LENGTHS.map(lambda n: b"v" * n))


@settings(max_examples=200, deadline=None)
@given(column=st.lists(_VALUE, max_size=60))
def test_byte_lengths_equal_the_pure_lengths(k: ModuleType, column: list[bytes | None]) -> None:
    out = array("q", [7]) * len(column)
    assert k.byte_lengths(column, out) is True
    assert out == bulk_input._lengths(column)


@pytest.mark.parametrize(
    "odd", [bytearray(b"ab"), memoryview(b"ab"), "text", 3, type("Sub", (bytes,), {})(b"x")]
)
def test_byte_lengths_refuse_anything_but_bytes_and_none(k: ModuleType, odd: object) -> None:
    column = [b"a", None, odd, b"b"]
    assert k.byte_lengths(column, array("q", [0]) * 4) is False


def test_byte_lengths_check_the_output_length(k: ModuleType) -> None:
    with pytest.raises(ValueError, match="one entry per element"):
        k.byte_lengths([b"a", b"b"], array("q", [0]))


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 50),
    keyed=st.booleans(),
    fixed=st.integers(1, 200),
    limit=st.integers(0, 400),
)
def test_reservations_equal_the_pure_totals(
    k: ModuleType, data: st.DataObject, n: int, keyed: bool, fixed: int, limit: int
) -> None:
    lengths = st.lists(st.one_of(st.just(-1), _LENGTHS), min_size=n, max_size=n)
    vlen = array("q", data.draw(lengths))
    klen = array("q", data.draw(lengths)) if keyed else None
    totals = array("q", [0]) * (n + 1)
    over = k.reservations(totals, fixed, vlen, klen, limit)
    assert (totals, over) == reservations_pure(fixed, vlen, klen, limit)


def test_reservations_refuse_mismatched_arrays(k: ModuleType) -> None:
    with pytest.raises(ValueError, match="mismatched"):
        k.reservations(array("q", [0]) * 3, 10, array("q", [1, 2]), array("q", [1]), 100)
    with pytest.raises(TypeError, match="array\\('q'\\)"):
        k.reservations(array("q", [0]) * 3, 10, array("i", [1, 2]), None, 100)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 40), data=st.data())
def test_fill_counting_equals_the_pure_fill(k: ModuleType, size: int, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, size))
    count = data.draw(st.integers(0, size - start))
    first = data.draw(st.integers(-(2**40), 2**40))
    compiled, pure = array("q", range(size)), array("q", range(size))
    k.fill_counting(compiled, start, count, first)
    fill_counting_pure(pure, start, count, first)
    assert compiled == pure


@pytest.mark.parametrize(
    "start, count", [(2, 3), (5, 0), (-1, 1), (0, -1), (0, 2**61), (2**62, 2**62)]
)
def test_fill_counting_stays_inside_the_array(k: ModuleType, start: int, count: int) -> None:
    """Out of range (huge counts included, which a careless bound check would
    wrap around) is an IndexError on both paths, and nothing is written."""
    for fill in (k.fill_counting, fill_counting_pure):
        out = array("q", [0]) * 4
        with pytest.raises(IndexError):
            fill(out, start, count, 0)
        assert out == array("q", [0]) * 4


def test_fill_counting_refuses_positions_past_int64(k: ModuleType) -> None:
    for fill, error in ((k.fill_counting, OverflowError), (fill_counting_pure, OverflowError)):
        with pytest.raises(error):
            fill(array("q", [0]) * 4, 0, 4, 2**63 - 2)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_record_over_the_limit_is_named_on_both_paths(compiled: bool) -> None:
    values = [b"a" * 10, None, b"b" * 5000, b"c" * 9000]
    cols = read_columns(
        "t", values, None, None, None, None, key_serializer=None, value_serializer=None
    )
    with mock.patch.object(bounds, "kernels", K if compiled else None):
        with pytest.raises(
            errors.RecordTooLargeError, match=r"record 2 is \d+ bytes.*max_request_size"
        ):
            record_reservations(cols, max_request_size=4096, buffer_memory=1 << 20)
        totals = record_reservations(cols, max_request_size=1 << 20, buffer_memory=1 << 20)
    assert len(totals) == len(values) + 1 and totals[0] == 0
    assert [totals[i + 1] - totals[i] for i in range(4)][2] - 5000 == totals[1] - 10
