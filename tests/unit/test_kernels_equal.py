"""The C kernels (aioproducer._speedups._kernels) produce exactly what their pure-Python twins do.

Random keys, values, nulls, headers (None values, non-ASCII names), timestamps and
varint boundaries (lengths 63/64 and 8191/8192, where a zigzag varint grows a
byte; negative and large timestamp deltas); murmur2 on random bytes, empty
included. The extension is imported directly, so these tests also run (and
compare) when ``AIOPRODUCER_NO_EXTENSIONS=1`` selects the pure path for the rest
of the package. The lanes' appends to a batch (a record, its memory and, unkeyed,
the sticky count) are compared the same way.
They skip only where the extension is not built and CI is not
``"true"``; in CI an unbuilt extension fails them.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine import partitioner as partitioner
from aioproducer.engine.batch import ProducerBatch
from aioproducer.protocol import records
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilder
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(scope="module")
def k() -> ModuleType:
    return required(K)


# Lengths on both sides of the varint steps (zigzag: 63 -> 1 byte, 64 -> 2; 8191 -> 2, 8192 -> 3).
_EDGE_LENGTHS = st.sampled_from([0, 1, 62, 63, 64, 65, 127, 128, 8190, 8191, 8192, 8193])
_LENGTHS = st.one_of(_EDGE_LENGTHS, st.integers(0, 300))
_BLOBS = _LENGTHS.flatmap(lambda n: st.binary(min_size=n, max_size=n))
_MAYBE = st.one_of(st.none(), _BLOBS)
_NAMES = st.one_of(st.text(max_size=20), st.sampled_from(["ключ", "名前", "é" * 70, "x" * 64]))
_HEADERS = st.lists(st.tuples(_NAMES, _MAYBE), max_size=4)
# Timestamp deltas around the zigzag edges, negative ones included.
_DELTAS = st.one_of(
    st.sampled_from([0, 1, -1, 63, 64, -64, -65, 4095, 4096, -4096, -4097, 8191, 8192,
                     -8192, -8193, 1 << 40, -(1 << 40)]),
    st.integers(-(1 << 20), 1 << 20),
)
_BATCH_SIZES = st.sampled_from([100, 300, 1000, 16_384, 1 << 20])


@given(data=st.one_of(st.binary(max_size=64), _BLOBS))
def test_murmur2_equals_the_pure_version(k: ModuleType, data: bytes) -> None:
    expected = partitioner._murmur2_pure(data)
    assert k.murmur2(data) == expected
    assert k.murmur2(bytearray(data)) == expected
    assert k.murmur2(memoryview(data)) == expected


def test_murmur2_known_values(k: ModuleType) -> None:
    # Java's Utils.murmur2 (the pure version is checked against these in test_partitioner).
    for data in (b"", b"a", b"ab", b"abc", b"abcd", b"21"):
        assert k.murmur2(data) == partitioner._murmur2_pure(data)


@given(headers=_HEADERS)
def test_headers_bytes_equals_the_pure_version(k: ModuleType, headers: list) -> None:
    assert k.headers_bytes(headers) == records._headers_bytes_pure(headers)


def test_headers_bytes_takes_bytes_names_and_rejects_bad_pairs(k: ModuleType) -> None:
    headers = [(b"raw", b"v"), ("t", None)]
    assert k.headers_bytes(headers) == records._headers_bytes_pure(headers)  # type: ignore[arg-type]
    for bad in ([("n", 5)], [("a", b"1", b"2")], [("\udc80", b"v")]):
        with pytest.raises((TypeError, ValueError)) as pure_error:
            records._headers_bytes_pure(bad)  # type: ignore[arg-type]
        with pytest.raises(pure_error.type):
            k.headers_bytes(bad)


def _state(builder: RecordBatchBuilder) -> tuple:
    return (bytes(builder._buf), builder.record_count, builder.base_timestamp,
            builder.max_timestamp)


@settings(max_examples=150)
@given(
    batch_size=_BATCH_SIZES,
    base=st.integers(0, 1 << 42),
    rows=st.lists(st.tuples(_DELTAS, _MAYBE, _MAYBE, st.one_of(st.none(), _HEADERS)),
                  min_size=1, max_size=30),
)
def test_append_equals_the_pure_version(k: ModuleType, batch_size: int, base: int, rows: list) -> None:
    pure = RecordBatchBuilder(batch_size=batch_size)
    compiled = RecordBatchBuilder(batch_size=batch_size)
    with mock.patch.object(records, "kernels", k):
        for delta, key, value, headers in rows:
            ts = max(0, base + delta)
            expected = pure._append_pure(ts, key, value, headers)
            assert compiled._append_compiled(ts, key, value, headers) == expected
            assert _state(compiled) == _state(pure)
    assert compiled.build(producer_id=7, producer_epoch=1, base_sequence=3) == pure.build(
        producer_id=7, producer_epoch=1, base_sequence=3
    )


def test_append_refuses_what_the_pure_version_refuses(k: ModuleType) -> None:
    with mock.patch.object(records, "kernels", k):
        for key, value in ((b"k", 12), ("text", b"v"), (None, object())):
            pure = RecordBatchBuilder()
            compiled = RecordBatchBuilder()
            with pytest.raises(TypeError):
                pure._append_pure(1, key, value)  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                compiled._append_compiled(1, key, value)  # type: ignore[arg-type]
            assert _state(compiled) == _state(pure)
        sealed = RecordBatchBuilder()
        sealed.append(1, None, b"v")
        sealed.build()
        with pytest.raises(RuntimeError):
            sealed._append_compiled(2, None, b"v")


_COLUMN = st.lists(st.tuples(_MAYBE, _MAYBE), min_size=1, max_size=60)


@settings(max_examples=150)
@given(
    batch_size=_BATCH_SIZES,
    first=st.lists(st.tuples(_MAYBE, _MAYBE), max_size=3),
    delta=_DELTAS,
    column=_COLUMN,
    keyed=st.booleans(),
    headers=st.one_of(st.none(), _HEADERS),
    bounds=st.tuples(st.integers(0, 60), st.integers(0, 60)),
    shuffle=st.one_of(st.none(), st.randoms(use_true_random=False)),
    as_views=st.booleans(),
)
def test_append_run_equals_the_pure_loops(
    k: ModuleType, batch_size: int, first: list, delta: int, column: list, keyed: bool,
    headers: list | None, bounds: tuple[int, int], shuffle, as_views: bool,
) -> None:
    values = [v for _, v in column]
    keys = [key for key, _ in column] if keyed else None
    if as_views:
        values = [None if v is None else memoryview(v) for v in values]
    start, stop = sorted(min(b, len(column)) for b in bounds)
    order = None
    if shuffle is not None:
        order = list(range(len(column)))
        shuffle.shuffle(order)
    base = 1_700_000_000_000
    built = []
    for kernel in (None, k.encode_run):
        builder = RecordBatchBuilder(batch_size=batch_size, codec=Codec.NONE)
        for key, value in first:  # records already in the batch: offsets and room
            builder._append_pure(base, key, value)
        with mock.patch.object(records, "_encode_run", kernel):
            taken = builder.append_run(base + delta if first else base, values, start, stop,
                                       keys, headers, order)
        built.append((taken, _state(builder)))
    assert built[1] == built[0]


def test_a_failed_run_leaves_the_buffer_as_it_was(k: ModuleType) -> None:
    builder = RecordBatchBuilder()
    builder.append(1, None, b"kept")
    before = _state(builder)
    with mock.patch.object(records, "_encode_run", k.encode_run), pytest.raises(TypeError):
        builder.append_run(1, [b"a", b"b", 3], 0, 3)  # type: ignore[list-item]
    assert _state(builder) == before


def test_the_switch_names_the_active_path() -> None:
    forced_pure = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))
    assert records.COMPILED == (K is not None and not forced_pure)
    active = records.RecordBatchBuilder.append
    assert active is (RecordBatchBuilder._append_compiled if records.COMPILED
                      else RecordBatchBuilder._append_pure)
    assert (partitioner.murmur2 is partitioner._murmur2_pure) == (not records.COMPILED)
    assert (records._encode_run is None) == (not records.COMPILED)
    assert (ProducerBatch.append_unkeyed is ProducerBatch._append_unkeyed_pure) == (
        not records.COMPILED
    )


def test_records_that_fill_the_batch_exactly_fit_in_both(k: ModuleType) -> None:
    # Every batch size over a span: some land exactly on a record's end, where
    # ``size > room`` (fits) and ``size >= room`` (would not) differ.
    values = [bytes([i]) * (i * 7 % 90) for i in range(40)]
    keys = [None if i % 3 else b"key-%d" % i for i in range(40)]
    for batch_size in range(62, 1500, 3):
        runs, singles = [], []
        for kernel in (None, k.encode_run):
            builder = RecordBatchBuilder(batch_size=batch_size)
            with mock.patch.object(records, "_encode_run", kernel):
                runs.append((builder.append_run(5, values, 0, 40, keys), _state(builder)))
        with mock.patch.object(records, "kernels", k):
            for append in (RecordBatchBuilder._append_pure, RecordBatchBuilder._append_compiled):
                builder = RecordBatchBuilder(batch_size=batch_size)
                taken = [append(builder, 5 + i, keys[i], values[i], None) for i in range(40)]
                singles.append((taken, _state(builder)))
        assert runs[1] == runs[0], batch_size
        assert singles[1] == singles[0], batch_size


# -- the unkeyed shortcut's append ------------------------------------------------

# Value lengths where the record's own size crosses a varint step (a record
# without key or headers is its value plus 6 to 8 bytes: 63/64 and 8191/8192).
_UNKEYED_LENGTHS = st.one_of(_EDGE_LENGTHS, st.integers(52, 66), st.integers(8180, 8195),
                             st.integers(0, 300))
_UNKEYED_VALUES = st.one_of(
    st.none(), _UNKEYED_LENGTHS.flatmap(lambda n: st.binary(min_size=n, max_size=n))
)
_STEP = st.one_of(
    st.tuples(st.just("append"), _DELTAS, _UNKEYED_VALUES, st.integers(0, 1000),
              st.integers(0, 20_000)),
    st.tuples(st.just("seal")),
    st.tuples(st.just("build")),
)


def _kernel_method(k: ModuleType) -> object:
    """The compiled append_unkeyed, bound to ProducerBatch as the batch module binds it."""
    return k.bind_batch_layout(ProducerBatch, RecordBatchBuilder, batch_module.OPEN)[0]


def _keyed_kernel_method(k: ModuleType) -> object:
    """The compiled append_keyed, bound likewise."""
    return k.bind_batch_layout(ProducerBatch, RecordBatchBuilder, batch_module.OPEN)[1]


def _batch_state(batch: ProducerBatch) -> tuple:
    return (_state(batch.builder), batch.builder.is_sealed, batch.state, batch.reserved,
            batch.max_record_size)


def _outcome(call: object, *args: object) -> object:
    try:
        return call(*args)  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the same error type from both, or the test fails
        return type(exc)


@settings(max_examples=200)
@given(
    batch_size=st.one_of(_BATCH_SIZES, st.integers(62, 400)),
    limit=st.sampled_from([1, 100, 300, 1000, 16_384]),
    produced_before=st.one_of(st.none(), st.integers(0, 40_000)),
    base=st.integers(0, 1 << 42),
    steps=st.lists(_STEP, min_size=1, max_size=40),
)
def test_append_unkeyed_equals_the_pure_version(
    k: ModuleType, batch_size: int, limit: int, produced_before: int | None, base: int, steps: list,
) -> None:
    kernel = _kernel_method(k)
    batches = [ProducerBatch("t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0,
                             delivery_timeout=60) for _ in range(2)]
    produced: list[dict[str, int]] = [{}, {}]
    if produced_before is not None:
        produced = [{"t": produced_before}, {"t": produced_before}]
    pure, compiled = batches
    # The reference all through: the pure record encoder too.
    with mock.patch.object(RecordBatchBuilder, "append", RecordBatchBuilder._append_pure):
        for i, step in enumerate(steps):
            if step[0] == "append":
                _, delta, value, reserve, bound = step
                ts = max(0, base + delta)
                expected = _outcome(pure._append_unkeyed_pure, ts, value, reserve, bound,
                                    produced[0], "t", limit)
                got = _outcome(kernel, compiled, ts, value, reserve, bound, produced[1], "t", limit)
                assert got == expected, (i, step)
            elif step[0] == "seal":
                pure.seal()
                compiled.seal()
            elif pure.record_count:
                assert compiled.builder.build(producer_id=3) == pure.builder.build(producer_id=3)
            assert _batch_state(compiled) == _batch_state(pure), (i, step)
            assert produced[1] == produced[0]


_KEYS = st.one_of(
    st.none(), st.one_of(_EDGE_LENGTHS, st.integers(0, 70)).flatmap(
        lambda n: st.binary(min_size=n, max_size=n))
)
_KEYED_STEP = st.one_of(
    st.tuples(st.just("append"), _DELTAS, _KEYS, _UNKEYED_VALUES, st.integers(0, 1000),
              st.integers(0, 20_000)),
    st.tuples(st.just("seal")),
    st.tuples(st.just("build")),
)


@settings(max_examples=200)
@given(
    batch_size=st.one_of(_BATCH_SIZES, st.integers(62, 400)),
    base=st.integers(0, 1 << 42),
    steps=st.lists(_KEYED_STEP, min_size=1, max_size=40),
)
def test_append_keyed_equals_the_pure_version(
    k: ModuleType, batch_size: int, base: int, steps: list,
) -> None:
    """Keys and values across the varint steps, nulls, timestamps before and
    after the first, batches filling up, sealed and built: the same answers,
    lists, counters and bytes."""
    kernel = _keyed_kernel_method(k)
    pure, compiled = [ProducerBatch("t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0,
                                    delivery_timeout=60) for _ in range(2)]
    with mock.patch.object(RecordBatchBuilder, "append", RecordBatchBuilder._append_pure):
        for i, step in enumerate(steps):
            if step[0] == "append":
                _, delta, key, value, reserve, bound = step
                ts = max(0, base + delta)
                expected = _outcome(pure._append_keyed_pure, ts, key, value, reserve, bound)
                got = _outcome(kernel, compiled, ts, key, value, reserve, bound)
                assert got == expected, (i, step)
            elif step[0] == "seal":
                pure.seal()
                compiled.seal()
            elif pure.record_count:
                assert compiled.builder.build(producer_id=3) == pure.builder.build(producer_id=3)
            assert _batch_state(compiled) == _batch_state(pure), (i, step)


def test_the_compiled_appends_take_only_an_int_timestamp(k: ModuleType) -> None:
    # The lanes stamp records themselves (the handle needs the timestamp first).
    batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=1000, now=0.0, delivery_timeout=60)
    with pytest.raises(TypeError, match="timestamp_ms must be an int"):
        _keyed_kernel_method(k)(batch, None, b"key", b"value", 10, 40)  # type: ignore[operator]
    with pytest.raises(TypeError, match="timestamp_ms must be an int"):
        _kernel_method(k)(batch, None, b"v", 1, 1, {}, "t", 200)  # type: ignore[operator]
    assert batch.record_count == 0


def test_the_lanes_appends_grow_a_batch_within_its_size(k: ModuleType) -> None:
    # append_unkeyed and append_keyed (the lanes' appends) grow the buffer as
    # encode_record does: by doubling, never past the batch size.
    unkeyed, keyed = _kernel_method(k), _keyed_kernel_method(k)
    empty = sys.getsizeof(bytearray())
    for batch_size in (1_000, 16_384):
        for append in ("unkeyed", "keyed"):
            batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0,
                                  delivery_timeout=60)
            allocations = set()
            for i in range(batch_size):
                if append == "unkeyed":
                    taken = unkeyed(batch, 5, b"x" * 100, 10, 130, {}, "t", 1 << 30)
                else:
                    taken = keyed(batch, 5, b"k", b"x" * 100, 10, 133)
                if not taken:
                    break
                held = sys.getsizeof(batch.builder._buf) - empty
                allocations.add(held)
                assert held <= _ALLOWED(batch_size)
            assert i > 5 and len(allocations) <= 12, (append, sorted(allocations))


def test_unkeyed_records_that_fill_the_batch_exactly_fit_in_both(k: ModuleType) -> None:
    # Every batch size over a span: some land exactly on a record's end.
    kernel = _kernel_method(k)
    values = [None if i % 7 == 3 else bytes([i]) * (i * 13 % 90) for i in range(40)]
    with mock.patch.object(RecordBatchBuilder, "append", RecordBatchBuilder._append_pure):
        for batch_size in range(62, 1500, 3):
            states = []
            for append in (ProducerBatch._append_unkeyed_pure, kernel):
                batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0,
                                      delivery_timeout=60)
                produced: dict[str, int] = {}
                answers = [append(batch, 5 + i, value, 10, 30, produced, "t", 700)  # type: ignore[operator]
                           for i, value in enumerate(values)]
                states.append((answers, produced, _batch_state(batch)))
            assert states[1] == states[0], batch_size


def test_append_unkeyed_answers_and_refusals(k: ModuleType) -> None:
    kernel = _kernel_method(k)
    for append in (ProducerBatch._append_unkeyed_pure, kernel):
        batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=300, now=0.0, delivery_timeout=60)
        produced: dict[str, int] = {}
        answers = [append(batch, 1000 + i, b"v" * 50, 100, 80, produced, "t", 200)  # type: ignore[operator]
                   for i in range(6)]
        # 80, 160: under the limit; 240, 320: over it with no room for another
        # such record; the fifth does not fit (4 x 58 bytes + 61 + 58 > 300).
        assert answers == [batch_module.APPENDED, batch_module.APPENDED, batch_module.SWITCH,
                           batch_module.SWITCH, batch_module.REFUSED, batch_module.REFUSED]
        assert produced == {"t": 320} and batch.record_count == 4
        assert (batch.reserved, batch.max_record_size) == (400, 80)
        batch.seal()
        assert append(batch, 2000, b"", 1, 1, produced, "t", 200) == batch_module.REFUSED  # type: ignore[operator]
        # Bad input raises and changes nothing.
        open_batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=300, now=0.0,
                                   delivery_timeout=60)
        before = _batch_state(open_batch)
        with pytest.raises(TypeError):
            append(open_batch, 1, 12, 1, 1, {}, "t", 200)  # type: ignore[operator]
        assert _batch_state(open_batch) == before
    with pytest.raises(TypeError):
        kernel(object(), 1, b"v", 1, 1, {}, "t", 200)  # type: ignore[operator]


def _ALLOWED(batch_size: int) -> int:
    """The most memory a batch's buffer may hold: its size, and CPython's eighth on top."""
    return batch_size + batch_size // 8 + 8


def test_a_batch_buffer_grows_by_doubling_up_to_the_batch_size(k: ModuleType) -> None:
    # The compiled appends reserve twice the buffer's length when it is full
    # (a bytearray alone grows by an eighth): few copies on the way to a full
    # batch, and never more memory than the batch size allows.
    for batch_size in (1_000, 16_384, 65_536, *range(1_000, 20_000, 389)):
        buf = bytearray(61)
        empty = sys.getsizeof(bytearray())
        allocations = {sys.getsizeof(buf)}
        count = 0
        while k.encode_record(buf, batch_size, count, 0, None, b"x" * 100, None) != -1:
            count += 1
            allocations.add(sys.getsizeof(buf))
            # CPython itself adds up to an eighth when a resize is a small step.
            assert sys.getsizeof(buf) - empty <= _ALLOWED(batch_size)
        pure = RecordBatchBuilder(batch_size=batch_size)
        while pure._append_pure(0, None, b"x" * 100) is not None:
            pass
        assert pure.record_count == count and buf == pure._buf
        assert len(allocations) <= 12, sorted(allocations)


def test_short_runs_grow_a_batch_by_doubling_within_its_size(k: ModuleType) -> None:
    # Many short runs (one per bulk call or per partition) grow the buffer by
    # doubling too, and never past the batch size; a record that fills the
    # batch exactly does not double it either.
    empty = sys.getsizeof(bytearray())
    for run in (1, 4, 16):
        for batch_size in (16_384, *range(1_000, 5_000, 331)):
            builder = RecordBatchBuilder(batch_size=batch_size, codec=Codec.NONE)
            allocations = set()
            with mock.patch.object(records, "_encode_run", k.encode_run):
                while builder.append_run(1, [b"x" * 100] * run, 0, run, None, None) == run:
                    held = sys.getsizeof(builder._buf) - empty
                    allocations.add(held)
                    assert held <= _ALLOWED(batch_size), (run, batch_size)
            assert len(allocations) <= 12, (run, batch_size, sorted(allocations))
    builder = RecordBatchBuilder(batch_size=1_000, codec=Codec.NONE)
    with mock.patch.object(records, "_encode_run", k.encode_run):
        builder.append_run(1, [b"x" * 700], 0, 1, None, None)
        room = builder.batch_size - len(builder._buf)
        builder.append_run(1, [b"y" * (room - 9)], 0, 1, None, None)  # fills it to the byte
    assert len(builder._buf) == 1_000
    assert sys.getsizeof(builder._buf) - empty <= _ALLOWED(1_000)


def test_a_run_reserves_what_its_records_need_within_the_room(k: ModuleType) -> None:
    # A run of like records reserves their room in one step, no more than they
    # take; unlike records never make it reserve more than the batch's room.
    empty = sys.getsizeof(bytearray())
    for values in ([b"x" * 100] * 100, [b"x" * 10] + [b"y" * 900] * 20, [b"z" * 5000, b"a", b"b"]):
        for batch_size in (2_000, 1 << 20):
            builder = RecordBatchBuilder(batch_size=batch_size, codec=Codec.NONE)
            with mock.patch.object(records, "_encode_run", k.encode_run):
                taken = builder.append_run(1, values, 0, len(values), None, None)
            assert taken
            held = sys.getsizeof(builder._buf) - empty
            assert held <= max(batch_size, len(builder._buf)) + 1
            if len(set(values)) == 1 and taken == len(values):
                # like records: about their bytes (not twice, as doubling would)
                assert held <= len(builder._buf) * 1.15 + 8
