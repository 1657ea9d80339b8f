"""What a record batch builder reads from its callers, checked as its compiled twin checks it.

:class:`~.records.RecordBatchBuilderPy` takes keys, values, timestamps, run
bounds and length hints from user code. These readers turn each into what the
encoder needs or raise the same TypeError, ValueError or OverflowError, with
the same message, as the compiled builder (``_speedups/_builder_io.c``), and
run a caller's own code (``__index__``, ``__buffer__``) at most once.
"""

from __future__ import annotations

import operator
from array import array
from typing import Any

__all__ = [
    "LENGTH_TYPES",
    "SSIZE_MAX",
    "check_timestamp",
    "index_arg",
    "int_arg",
    "length_arg",
    "plain",
    "plain_at",
    "ranged",
    "type_error",
]

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SSIZE_MAX = (1 << 63) - 1  # what an index of a sequence may be (64-bit CPython)


def type_error(data: object, what: str, expect: str) -> TypeError:
    return TypeError(f"{what} {expect}, got {type(data).__name__}")


def plain(data: Any, what: str) -> bytes | memoryview:
    """The bytes a bytes-like object holds, in C order, whatever its format or strides.

    Its buffer is asked for once (a ``__buffer__`` of 3.12+ runs once), and
    held while the returned view lives. The result is something ``len()`` and
    ``bytes.join`` read alike: a view of single bytes, or a copy.
    """
    try:
        view = memoryview(data)
    except TypeError:
        raise type_error(data, what, "must be bytes-like or None") from None
    if view.c_contiguous and view.ndim == 1 and view.itemsize == 1:
        return view
    return view.tobytes()


def int_arg(value: Any, what: str) -> int:
    """``value`` as an exact int: TypeError unless it is an int (a subclass's methods never run)."""
    if not issubclass(type(value), int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    return operator.index(value)


def ranged(value: Any, what: str, bits: int) -> int:
    """An int of ``bits`` bits (signed), else TypeError or ValueError."""
    number = int_arg(value, what)
    if not -(1 << (bits - 1)) <= number < 1 << (bits - 1):
        raise ValueError(f"{what} {number} is outside the int{bits} range")
    return number


def index_arg(value: Any) -> int:
    """A run's start or stop, as ``operator.index`` reads it, within an index's range."""
    index = operator.index(value)
    if not -SSIZE_MAX - 1 <= index <= SSIZE_MAX:
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    return index


def check_timestamp(ts: int) -> None:
    if not INT64_MIN <= ts <= INT64_MAX:
        raise ValueError(f"timestamp_ms {ts} is outside the int64 range")


LENGTH_TYPES = (list, array)  # hints read without running the caller's code


def length_arg(value: Any, what: str) -> int:
    """A length of has_room_for: None is -1 (null); TypeError unless an int."""
    if value is None:
        return -1
    if not issubclass(type(value), int):
        raise TypeError(f"{what} must be an int or None, got {type(value).__name__}")
    return operator.index(value)


def plain_at(data: Any, what: str, index: Any) -> bytes | memoryview:
    """:func:`plain` of a run's element: the error names it as ``values[i]``."""
    try:
        return plain(data, "")
    except TypeError:
        raise type_error(data, f"{what}[{index!s}]", "must be bytes-like or None") from None
