"""Differential fuzz: the compiled RecordBatchBuilder against its pure twin, RecordBatchBuilderPy.

Both get the same calls (append, append_run, has_room_for, build) with random
and hostile arguments: timestamps at the int64 edges and past them, int
subclasses and bools, keys and values of every bytes-like form (memoryviews of
every format, strided and multi-dimensional ones, arrays, bytes subclasses),
headers as lists, tuples and iterators, names as str (non-ASCII, surrogates),
str subclasses and bytes-like objects, bad types at each place; and objects
whose ``__getitem__``, ``__index__`` or ``__iter__`` append to the builder,
build it, or empty the containers being read (and on 3.12+ a ``__buffer__``
that does so). After each call both must have answered alike (the result, or
the exception's type and message) and hold the same state; at the end both
build the same bytes, which parse. Each twin gets its own fresh objects, made
from one drawn description. Hypothesis is derandomized with no example
database; .ci/sanitize runs this module under AddressSanitizer and UBSan.
"""

from __future__ import annotations

import random
from array import array
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aioproducer.protocol.compression import Codec
from aioproducer.protocol.record_parsing import parse_record_batches
from tests.support.builders import FUZZ, PURE, outcome, require_compiled, state

# -- objects, made fresh for each twin from a drawn description --------------------


class IntSub(int):
    def __sub__(self, other: Any) -> Any:  # never called: read as its value
        raise AssertionError("called")


class StrSub(str):
    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # never called: its characters are read
        raise AssertionError("called")


class BytesSub(bytes):
    def __len__(self) -> int:
        return 0


class OnlyBytes:
    """Has __bytes__ but no buffer: not bytes-like."""

    def __bytes__(self) -> bytes:
        return b"no"


def form(raw: bytes, kind: str) -> Any:
    """``raw`` as a bytes-like object of the given kind (or something else that is not)."""
    view = memoryview(raw)
    if kind == "bytes":
        return raw
    if kind == "bytearray":
        return bytearray(raw)
    if kind == "sub":
        return BytesSub(raw)
    if kind == "view":
        return view
    if kind == "cast-b":
        return view.cast("b")
    if kind == "cast-h" and len(raw) % 2 == 0:
        return view.cast("h")
    if kind == "cast-2d" and len(raw) % 2 == 0 and raw:
        return view.cast("B", [2, len(raw) // 2])
    if kind == "strided":
        return view[::2]
    if kind == "reversed":
        return view[::-1]
    if kind == "array-b":
        return array("b", raw)
    if kind == "array-h" and len(raw) % 2 == 0:
        return array("h", raw)
    if kind == "released":
        released = memoryview(raw)
        released.release()
        return released
    if kind == "int":
        return len(raw)
    if kind == "str":
        return raw.hex()
    if kind == "only-bytes":
        return OnlyBytes()
    return raw


_KINDS = [
    "bytes",
    "bytes",
    "bytes",
    "bytearray",
    "sub",
    "view",
    "cast-b",
    "cast-h",
    "cast-2d",
    "strided",
    "reversed",
    "array-b",
    "array-h",
]
_BAD_KINDS = ["released", "int", "str", "only-bytes"]
_RAW = st.one_of(st.binary(max_size=40), st.sampled_from([b"", b"x" * 63, b"y" * 64, b"z" * 8200]))
# A description: None, or (raw, kind).
_GOOD = st.tuples(_RAW, st.sampled_from(_KINDS))
_DATA = st.one_of(
    st.none(), _GOOD, _GOOD, _GOOD, _GOOD, st.tuples(_RAW, st.sampled_from(_BAD_KINDS))
)


def data(desc: Any) -> Any:
    return None if desc is None else form(*desc)


_USUAL_TS = st.integers(1_700_000_000_000, 1_700_000_100_000)
_TIMESTAMPS = st.one_of(
    _USUAL_TS,
    _USUAL_TS,
    _USUAL_TS,
    _USUAL_TS,
    st.sampled_from(
        [
            0,
            1,
            -1,
            1_700_000_000_000,
            2**31,
            2**62,
            2**63 - 1,
            2**63,
            -(2**63),
            -(2**63) - 1,
            2**64,
            -(2**70),
            8191,
            8192,
            -8192,
        ]
    ),
    st.integers(-(2**64), 2**64),
    st.integers(0, 1 << 42),
    st.sampled_from(["int-sub", "bool", "float", "str"]),
)


def timestamp(desc: Any) -> Any:
    return (
        {"int-sub": IntSub(12), "bool": True, "float": 1.5, "str": "1"}.get(desc, desc)
        if isinstance(desc, str)
        else desc
    )


_NAMES = st.one_of(
    st.text(max_size=12),
    st.text(max_size=12),
    st.text(max_size=12),
    st.sampled_from(["ключ", "é" * 70, "\udc80", "x" * 64]),
    st.tuples(st.just("str-sub"), st.text(max_size=5)),
    st.tuples(
        st.just("data"), st.tuples(st.binary(max_size=8), st.sampled_from(_KINDS + _BAD_KINDS))
    ),
    st.just(7),
)


def name(desc: Any) -> Any:
    if isinstance(desc, tuple):
        return StrSub(desc[1]) if desc[0] == "str-sub" else data(desc[1])
    return desc


_PAIRS = st.lists(
    st.tuples(_NAMES, _DATA, st.sampled_from(["tuple"] * 6 + ["list", "long", "short"])), max_size=4
)
_HEADERS = st.one_of(st.none(), st.tuples(_PAIRS, st.sampled_from(["list", "tuple", "iterator"])))


def headers(desc: Any) -> Any:
    if desc is None:
        return None
    pairs, container = desc
    made = []
    for n, v, shape in pairs:
        pair = (name(n), data(v))
        made.append(
            {"tuple": pair, "list": list(pair), "long": (*pair, b"x"), "short": pair[:1]}[shape]
        )
    return {"list": made, "tuple": tuple(made), "iterator": iter(made)}[container]


# -- random calls -----------------------------------------------------------------

_APPEND = st.tuples(st.just("append"), _TIMESTAMPS, _DATA, _DATA, _HEADERS)
_COLUMN = st.lists(_DATA, max_size=12)
_RUN = st.tuples(
    st.just("run"),
    _TIMESTAMPS,
    _COLUMN,
    st.booleans(),
    st.integers(-3, 14),
    st.integers(-3, 14),
    _HEADERS,
    st.one_of(st.none(), st.integers(0, 2**32)),
    st.booleans(),
)
_ROOM = st.tuples(
    st.just("room"),
    st.one_of(st.none(), st.integers(-2, 9000), st.just(2**70)),
    st.one_of(st.none(), st.integers(-2, 9000)),
    _HEADERS,
    st.one_of(st.none(), _TIMESTAMPS),
)
_BUILD = st.tuples(
    st.just("build"),
    st.sampled_from([-1, 0, 7, 2**63 - 1, 2**63, "1"]),
    st.sampled_from([-1, 0, 2**15 - 1, 2**15]),
    st.sampled_from([-1, 5, 2**31 - 1, 2**31]),
)
_STEPS = st.lists(
    st.one_of(_APPEND, _APPEND, _APPEND, _RUN, _RUN, _RUN, _ROOM, _BUILD), min_size=1, max_size=12
)


def call(builder: Any, step: tuple) -> tuple:
    kind = step[0]
    if kind == "append":
        _, ts, key, value, hdrs = step
        return outcome(builder.append, timestamp(ts), data(key), data(value), headers(hdrs))
    if kind == "run":
        _, ts, column, keyed, start, stop, hdrs, seed, hinted = step
        values = [data(v) for v in column]
        keys = [data(v) for v in reversed(column)] if keyed else None
        order = None
        if seed is not None:
            order = list(range(len(column)))
            random.Random(seed).shuffle(order)
        lengths = [len(v) if isinstance(v, bytes) else -1 for v in values] if hinted else None
        return outcome(
            builder.append_run,
            timestamp(ts),
            values,
            start,
            stop,
            keys,
            headers(hdrs),
            order,
            lengths,
        )
    if kind == "room":
        _, klen, vlen, hdrs, ts = step
        return outcome(
            builder.has_room_for, klen, vlen, headers(hdrs), None if ts is None else timestamp(ts)
        )
    _, pid, epoch, seq = step
    return outcome(builder.build, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def run_both(steps: list, make: Any) -> None:
    compiled_cls = require_compiled()
    twins = [make(PURE), make(compiled_cls)]
    for i, step in enumerate(steps):
        answers = [call(builder, step) for builder in twins]
        assert answers[1] == answers[0], (i, step)
        assert state(twins[1]) == state(twins[0]), (i, step)
    if twins[0].record_count:
        built = [outcome(b.build, producer_id=3, producer_epoch=2, base_sequence=1) for b in twins]
        assert built[1] == built[0]
        if built[0][0] == "ok":
            (batch,) = parse_record_batches(built[0][1])
            assert len(batch.records) == twins[0].record_count


@FUZZ
@given(
    steps=_STEPS,
    batch_size=st.sampled_from([0, 62, 100, 300, 1000, 16_384, 1 << 20]),
    codec=st.sampled_from(
        [Codec.NONE, Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY]
    ),
    transactional=st.booleans(),
)
def test_the_twins_agree_on_random_calls(
    steps: list, batch_size: int, codec: Codec, transactional: bool
) -> None:
    run_both(
        steps, lambda cls: cls(codec=codec, batch_size=batch_size, is_transactional=transactional)
    )


# Valid input only: every call appends (or finds the batch full), across the varint steps.
_VALID_DATA = st.one_of(st.none(), _GOOD)
_VALID_HEADERS = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=10), _VALID_DATA).map(lambda p: (p[0], p[1])), max_size=3
    ).map(lambda pairs: ("valid", pairs)),
)
_DELTAS = st.one_of(
    st.sampled_from([0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8193, 1 << 40, -(1 << 40)]),
    st.integers(-(1 << 20), 1 << 20),
)
_VALID_STEP = st.one_of(
    st.tuples(st.just("append"), _DELTAS, _VALID_DATA, _VALID_DATA, _VALID_HEADERS),
    st.tuples(
        st.just("run"),
        _DELTAS,
        st.lists(st.tuples(_VALID_DATA, _VALID_DATA), max_size=70),
        st.booleans(),
        _VALID_HEADERS,
        st.one_of(st.none(), st.integers(0, 2**32)),
        st.booleans(),
    ),
)


def valid_call(builder: Any, base: int, step: tuple) -> tuple:
    def hdrs(desc: Any) -> Any:
        return None if desc is None else [(n, data(v)) for n, v in desc[1]]

    if step[0] == "append":
        _, delta, key, value, headers_desc = step
        return outcome(builder.append, base + delta, data(key), data(value), hdrs(headers_desc))
    _, delta, rows, keyed, headers_desc, seed, hinted = step
    values = [data(v) for _, v in rows]
    keys = [data(k) for k, _ in rows] if keyed else None
    order = None
    if seed is not None:
        order = list(range(len(rows)))
        random.Random(seed).shuffle(order)
    lengths = [len(v) if isinstance(v, bytes) else -1 for v in values] if hinted else None
    return outcome(
        builder.append_run,
        base + delta,
        values,
        0,
        len(rows),
        keys,
        hdrs(headers_desc),
        order,
        lengths,
    )


@FUZZ
@given(
    steps=st.lists(_VALID_STEP, min_size=1, max_size=20),
    base=st.integers(0, 1 << 42),
    batch_size=st.sampled_from([100, 300, 1000, 16_384, 1 << 20]),
    codec=st.sampled_from([Codec.NONE, Codec.NONE, Codec.LZ4, Codec.ZSTD]),
)
def test_the_twins_write_the_same_bytes(
    steps: list, base: int, batch_size: int, codec: Codec
) -> None:
    twins = [
        PURE(codec=codec, batch_size=batch_size),
        require_compiled()(codec=codec, batch_size=batch_size),
    ]
    for i, step in enumerate(steps):
        answers = [valid_call(builder, base, step) for builder in twins]
        assert answers[1] == answers[0], (i, step)
        assert answers[0][0] == "ok", answers[0]
        assert state(twins[1]) == state(twins[0]), (i, step)
    if twins[0].record_count:
        built = [bytes(b.build(producer_id=7, producer_epoch=1, base_sequence=3)) for b in twins]
        assert built[1] == built[0]
        (batch,) = parse_record_batches(built[0])
        assert len(batch.records) == twins[0].record_count
        assert (batch.base_timestamp, batch.max_timestamp) == (
            twins[0].base_timestamp,
            twins[0].max_timestamp,
        )


@FUZZ
@given(
    args=st.tuples(
        st.sampled_from([0, 3, 9, Codec.LZ4, "gzip", None]),
        st.sampled_from([0, -5, 16384, 2**70, True, 1.5, "1"]),
        st.sampled_from([False, True, 0, [], [1]]),
        st.sampled_from([None, 0, 3, -1, True, 2.0, "9"]),
    )
)
def test_the_twins_are_made_alike(args: tuple) -> None:
    codec, batch_size, transactional, level = args
    made = [
        outcome(
            cls,
            codec=codec,
            batch_size=batch_size,
            is_transactional=transactional,
            compression_level=level,
        )
        for cls in (PURE, require_compiled())
    ]
    if made[0][0] == "raised":
        assert made[1] == made[0]
        return
    assert made[1][0] == "ok"
    pure, compiled = made[0][1], made[1][1]
    # Read as what they are: a Codec, an int, a bool, an int or None.
    assert type(pure.codec) is Codec and type(pure.batch_size) is int
    assert type(pure.is_transactional) is bool and type(pure.compression_level) in (int, type(None))
    for attr in (
        "codec",
        "batch_size",
        "is_transactional",
        "compression_level",
        "record_count",
        "base_timestamp",
        "max_timestamp",
        "size_in_bytes",
        "is_sealed",
    ):
        assert (getattr(compiled, attr), type(getattr(compiled, attr))) == (
            getattr(pure, attr),
            type(getattr(pure, attr)),
        ), attr
