"""Regressions of the record batch builder: each defect a differential fuzz found, named.

The compiled encoder used to hold borrowed references, a buffer's length and
capacity, and a borrowed ``order`` list across calls into the caller's code
(``bytes(name)``, a Sequence's ``__getitem__``, an iterator): a use after free
or a heap overflow. Bytes-like objects that are not contiguous single bytes,
int64 edges and a few error contracts came out differently from the two twins.
Each test runs on both builders (``builder_cls``: the pure reference and the
compiled type), and fails on the code before the builder owned its state.
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

import pytest

from aioproducer.protocol.record_parsing import parse_record_batches
from tests.support.builders import PURE, builder_cls, require_compiled  # noqa: F401 - a fixture

pytestmark = pytest.mark.filterwarnings("error")


def outcome(call: Any, *args: Any, **kwargs: Any) -> tuple:
    """What a call did: ("ok", result) or ("raised", type, message)."""
    try:
        return ("ok", call(*args, **kwargs))
    except Exception as exc:  # the comparison is the point
        return ("raised", type(exc), str(exc))


def records_of(builder: Any) -> list[tuple]:
    """The records of a builder's batch, as the parser reads them (CRC checked)."""
    (batch,) = parse_record_batches(
        bytes(builder.build(producer_id=1, producer_epoch=0, base_sequence=0))
    )
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records]


def expected(builder_cls: Any, rows: list[tuple]) -> list[tuple]:
    reference = builder_cls(batch_size=1 << 20)
    for ts, key, value, headers in rows:
        assert reference.append(ts, key, value, headers) is not None
    return records_of(reference)


# -- headers read while the caller's code changes them ------------------------


class ClearingName:
    """A header name that empties the headers list when asked for its bytes."""

    def __init__(self, headers: list) -> None:
        self.headers = headers

    def __bytes__(self) -> bytes:
        self.headers.clear()
        return b"name"


def test_a_header_name_whose_bytes_clears_the_headers_is_refused(builder_cls: Any) -> None:
    """A name is a str or bytes-like: an object with only __bytes__ is refused, and
    never called (it emptied the list the compiled encoder was reading)."""
    headers: list[Any] = []
    headers += [(ClearingName(headers), b"v"), ("after", b"w")]
    builder = builder_cls()
    with pytest.raises(
        TypeError, match=r"^headers\[0\] name must be a str or bytes-like, got ClearingName$"
    ):
        builder.append(1, None, b"value", headers)
    assert len(headers) == 2 and builder.record_count == 0
    assert builder.append(1, None, b"value", [("after", b"w")]) == 0


class ClearingPair:
    """A (name, value) pair that empties the headers list while it is unpacked."""

    def __init__(self, headers: list, pair: tuple) -> None:
        self.headers, self.pair = headers, pair

    def __iter__(self) -> Any:
        self.headers.clear()
        return iter(self.pair)


def test_a_pair_that_clears_the_headers_is_read_from_a_snapshot(builder_cls: Any) -> None:
    headers: list[Any] = []
    headers += [ClearingPair(headers, ("a", b"1")), ("b", b"2"), ("c", None)]
    builder = builder_cls()
    assert builder.append(7, b"k", b"v", headers) == 0
    assert headers == []  # the pair's code ran, and emptied the caller's list
    assert records_of(builder) == expected(
        builder_cls, [(7, b"k", b"v", [("a", b"1"), ("b", b"2"), ("c", None)])]
    )


def test_an_iterator_of_headers_is_read_as_its_pairs(builder_cls: Any) -> None:
    pairs = [("a", b"1"), ("b", None)]
    builder = builder_cls()
    assert builder.append(3, None, b"v", iter(pairs)) == 0
    assert builder.append_run(4, [b"x"], 0, 1, None, (p for p in pairs)) == 1
    assert records_of(builder) == expected(
        builder_cls, [(3, None, b"v", pairs), (4, None, b"x", pairs)]
    )


# -- runs whose sequences run the caller's code ---------------------------------


class Reentrant(list):
    """Values whose ``__getitem__`` appends a record to the builder being filled."""

    def __init__(self, items: list, builder: Any, at: int) -> None:
        super().__init__(items)
        self.builder, self.at = builder, at

    def __getitem__(self, i: Any) -> Any:
        if i == self.at:
            self.builder.append(99, b"inner", b"record")
        return super().__getitem__(i)


def test_a_run_whose_values_append_to_the_builder_is_refused(builder_cls: Any) -> None:
    """The run's records were encoded past a length that moved: all of them refused,
    the record appended meanwhile kept (it used to be overwritten, the count kept)."""
    builder = builder_cls(batch_size=1 << 16)
    builder.append(5, None, b"first")
    values = Reentrant([b"v%d" % i for i in range(30)], builder, at=10)
    with pytest.raises(RuntimeError, match="changed while a run was appended"):
        builder.append_run(5, values, 0, 30)
    assert builder.record_count == 2
    assert records_of(builder) == expected(
        builder_cls, [(5, None, b"first", []), (99, b"inner", b"record", [])]
    )


class Reaching(list):
    """Values whose ``__getitem__`` reaches for the builder's buffer where there is one."""

    def __init__(self, items: list, builder: Any, change: str) -> None:
        super().__init__(items)
        self.builder, self.change = builder, change
        self.held: list[Any] = []

    def __getitem__(self, i: Any) -> Any:
        buf = getattr(self.builder, "_buf", None)  # the pure twin's private bytearray
        if i == 3 and buf is not None:
            if self.change == "clear":
                buf.clear()
            elif self.change == "grow":
                buf += bytes(5000)
            else:
                self.held.append(memoryview(buf))
        return super().__getitem__(i)


@pytest.mark.parametrize("change", ["clear", "grow", "view"])
def test_a_run_cannot_reach_the_compiled_builders_buffer(change: str) -> None:
    """The compiled builder's bytes are its own: no object of the caller's refers
    to them (it used to write past a shrunk buffer, or leave uninitialised bytes)."""
    builder = require_compiled()(batch_size=1 << 16)
    builder.append(5, None, b"first")
    values = Reaching([b"v%d" % i for i in range(20)], builder, change)
    assert builder.append_run(6, values, 0, 20) == 20
    rows = [(5, None, b"first", [])] + [(6, None, b"v%d" % i, []) for i in range(20)]
    assert records_of(builder) == expected(type(builder), rows)


class SharedSlice:
    """An ``order`` whose slices are one list it keeps (and the values empty)."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __getitem__(self, s: slice) -> list:
        return self.items


class ClearingValues(list):
    def __init__(self, items: list, order: SharedSlice) -> None:
        super().__init__(items)
        self.order = order

    def __getitem__(self, i: Any) -> Any:
        self.order.items.clear()
        return super().__getitem__(i)


def test_an_order_emptied_by_the_values_is_read_from_a_snapshot(builder_cls: Any) -> None:
    order = SharedSlice([4, 0, 3, 1])
    values = ClearingValues([b"a", b"b", b"c", b"d", b"e"], order)
    builder = builder_cls()
    assert builder.append_run(1, values, 0, 4, None, None, order) == 4
    assert order.items == []
    rows = [(1, None, v, []) for v in (b"e", b"a", b"d", b"b")]
    assert records_of(builder) == expected(builder_cls, rows)


# -- bytes-like objects ---------------------------------------------------------


class BytesSub(bytes):
    """A bytes subclass that lies about its length and items: encoded as its bytes."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: Any) -> Any:
        return 0


DATA = bytes(range(48))
FORMS = {
    "cast-b": memoryview(DATA).cast("b"),
    "cast-i": memoryview(DATA).cast("i"),
    "cast-2d": memoryview(DATA).cast("B", [4, 12]),
    "array-b": array("b", DATA),
    "array-i": array("i", DATA),
    "strided": memoryview(DATA)[::2],
    "reversed": memoryview(DATA)[::-1],
    "strided-i": memoryview(DATA).cast("i")[::2],
    "bytes-subclass": BytesSub(DATA),
    "bytearray": bytearray(DATA),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_bytes_like_object_is_encoded_as_its_bytes(builder_cls: Any, form: str) -> None:
    """Whatever its format, shape or strides: the bytes it holds in C order
    (memoryview(x).tobytes()), as key, value, header name and header value."""
    obj = FORMS[form]
    raw = memoryview(obj).tobytes()
    builder = builder_cls()
    assert builder.append(1, obj, obj, [(obj, obj)]) == 0
    assert builder.append_run(2, [obj, None], 0, 2, [obj, obj], [("h", obj)]) == 2
    assert builder.append_run(3, [obj] * 40, 0, 40, lengths=[len(raw)] * 40) == 40
    got = records_of(builder)
    assert got[0][1:] == (1, raw, raw, [(raw.decode(), raw)])  # the parser reads names as UTF-8
    assert [r[2:] for r in got[1:3]] == [(raw, raw, [("h", raw)]), (raw, None, [("h", raw)])]
    assert [r[3] for r in got[3:]] == [raw] * 40


@pytest.mark.skipif(sys.version_info < (3, 12), reason="__buffer__ is Python 3.12's (PEP 688)")
def test_a_python_buffer_that_appends_to_the_builder_is_read_once(builder_cls: Any) -> None:
    class Sneaky:
        def __init__(self, builder: Any) -> None:
            self.builder, self.calls = builder, 0

        def __buffer__(self, flags: int) -> memoryview:
            self.calls += 1
            self.builder.append(50, None, b"inner")
            return memoryview(b"outer-%d" % self.calls)

    builder = builder_cls()
    value = Sneaky(builder)
    assert builder.append(51, None, value) == 1  # after the record its buffer appended
    assert value.calls == 1
    with pytest.raises(RuntimeError, match="changed while a run was appended"):
        builder.append_run(52, [b"a", value, b"c"], 0, 3)
    assert value.calls == 2
    rows = [(50, None, b"inner", []), (51, None, b"outer-1", []), (50, None, b"inner", [])]
    assert records_of(builder) == expected(builder_cls, rows)


# -- int64 edges ------------------------------------------------------------------

_INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (2**63, None),
        (-(2**63) - 1, None),
        (2**70, None),
        (0, 2**63),
        (-(2**63), _INT64_MAX),
        (_INT64_MAX, -(2**63)),
        (_INT64_MAX, -2),
        (-(2**63), 0),
    ],
)
def test_timestamps_and_deltas_outside_int64_are_refused(
    builder_cls: Any, first: int, then: int | None
) -> None:
    """A batch's timestamps are int64, and so is each delta from the first: past
    them a clear ValueError, the builder unchanged (they used to wrap, or fail
    at build() with struct.error, or with OverflowError in one twin only)."""
    builder = builder_cls()
    if then is None:
        message = rf"^timestamp_ms {first} is outside the int64 range$"
        with pytest.raises(ValueError, match=message):
            builder.append(first, None, b"v")
        with pytest.raises(ValueError, match=message):
            builder.append_run(first, [b"v"], 0, 1)
        with pytest.raises(ValueError, match=message):
            builder.has_room_for(0, 1, None, first)
        assert (builder.record_count, builder.base_timestamp, builder.size_in_bytes) == (0, -1, 61)
        return
    assert builder.append(first, None, b"v") == 0
    with pytest.raises(ValueError, match="timestamp_ms"):
        builder.append(then, None, b"w")
    with pytest.raises(ValueError, match="timestamp_ms"):
        builder.append_run(then, [b"w"], 0, 1)
    with pytest.raises(ValueError, match="timestamp_ms"):
        builder.has_room_for(0, 1, None, then)
    assert (builder.record_count, builder.base_timestamp, builder.max_timestamp) == (
        1,
        first,
        first,
    )
    assert records_of(builder)[0][1] == first


# -- the contract's smaller differences ---------------------------------------------


def test_an_empty_run_leaves_an_empty_batch_as_it_was(builder_cls: Any) -> None:
    builder = builder_cls()
    assert builder.append_run(77, [b"x"], 1, 1) == 0
    assert (builder.record_count, builder.base_timestamp, builder.max_timestamp) == (0, -1, -1)


BAD_CALLS = [
    ("append", (1, "text", b"v"), {}, TypeError, "key must be bytes-like or None, got str"),
    ("append", (1, None, 12), {}, TypeError, "value must be bytes-like or None, got int"),
    ("append", (1.5, None, 12), {}, TypeError, "timestamp_ms must be an int, got float"),
    (
        "append",
        (1, None, b"v", [("n", 5)]),
        {},
        TypeError,
        "headers[0] value must be bytes-like or None, got int",
    ),
    (
        "append",
        (1, None, b"v", [("a", b"1", b"2")]),
        {},
        ValueError,
        "headers[0] must be a (name, value) pair, got 3 items",
    ),
    ("append", (1, None, b"v", [5]), {}, TypeError, "'int' object is not iterable"),
    (
        "append",
        (1, None, b"v", [(7, b"v")]),
        {},
        TypeError,
        "headers[0] name must be a str or bytes-like, got int",
    ),
    (
        "append_run",
        (1, [b"a", 3], 0, 2),
        {},
        TypeError,
        "values[1] must be bytes-like or None, got int",
    ),
    (
        "append_run",
        (1, [b"a", b"b"], 0, 2, [None, "k"]),
        {},
        TypeError,
        "keys[1] must be bytes-like or None, got str",
    ),
    ("append_run", (1, [b"a"], 0, 2), {}, IndexError, "list index out of range"),
    (
        "append_run",
        (1, [b"a"], 0, 1.0),
        {},
        TypeError,
        "'float' object cannot be interpreted as an integer",
    ),
    (
        "build",
        (),
        {"producer_epoch": 2**15},
        ValueError,
        "producer_epoch 32768 is outside the int16 range",
    ),
    (
        "build",
        (),
        {"base_sequence": -(2**31) - 1},
        ValueError,
        "base_sequence -2147483649 is outside the int32 range",
    ),
    ("build", (), {"producer_id": "7"}, TypeError, "producer_id must be an int, got str"),
    ("has_room_for", (None, "3"), {}, TypeError, "value_len must be an int or None, got str"),
]


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "error", "message"),
    BAD_CALLS,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)],
)
def test_bad_input_gets_the_same_typed_error_from_both(
    builder_cls: Any,
    method: str,
    args: tuple,
    kwargs: dict,
    error: type,
    message: str,
) -> None:
    builder = builder_cls()
    if method == "build":
        builder.append(1, None, b"v")
    before = (builder.record_count, builder.size_in_bytes, builder.is_sealed)
    assert outcome(getattr(builder, method), *args, **kwargs) == ("raised", error, message)
    assert (builder.record_count, builder.size_in_bytes, builder.is_sealed) == before


def test_construction_checks_its_arguments(builder_cls: Any) -> None:
    assert outcome(builder_cls, batch_size="big")[:2] == ("raised", TypeError)
    assert outcome(builder_cls, codec=9)[:2] == ("raised", ValueError)
    assert outcome(builder_cls, compression_level="max")[:2] == ("raised", TypeError)
    builder = builder_cls(codec=3, batch_size=True, is_transactional=[1], compression_level=5)
    assert (
        builder.codec.name,
        builder.batch_size,
        builder.is_transactional,
        builder.compression_level,
    ) == ("LZ4", 1, True, 5)
    assert PURE is not None
