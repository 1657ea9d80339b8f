"""The C kernels (aioproducer._speedups._kernels) produce exactly what their pure-Python twins do.

Random keys, values, nulls, timestamps and varint boundaries (lengths 63/64 and
8191/8192, where a zigzag varint grows a byte; negative and large timestamp
deltas); murmur2 on random bytes, empty included. (The record batch builder's
twins are compared in test_builder_differential.py.) The extension is imported directly, so these tests also run (and
compare) when ``AIOPRODUCER_NO_EXTENSIONS=1`` selects the pure path for the rest
of the package. The lanes' appends to a batch (a record, its memory and, unkeyed,
the sticky count) are compared the same way.
They skip only where the extension is not built and CI is not
``"true"``; in CI an unbuilt extension fails them.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.engine import batch as batch_module
from aioproducer.engine import partitioner as partitioner
from aioproducer.engine.batch import BatchCore, BatchCorePy, ProducerBatch
from aioproducer.protocol import records
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilderPy
from tests.support.batch_twins import batch_class
from tests.support.builders import held_bytes
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
# Timestamp deltas around the zigzag edges, negative ones included.
_DELTAS = st.one_of(
    st.sampled_from(
        [
            0,
            1,
            -1,
            63,
            64,
            -64,
            -65,
            4095,
            4096,
            -4096,
            -4097,
            8191,
            8192,
            -8192,
            -8193,
            1 << 40,
            -(1 << 40),
        ]
    ),
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


def _state(builder: object) -> tuple:
    return (
        builder.size_in_bytes,
        builder.record_count,
        builder.base_timestamp,  # type: ignore[attr-defined]
        builder.max_timestamp,
    )  # type: ignore[attr-defined]


def test_the_switch_names_the_active_path(k: ModuleType) -> None:
    forced_pure = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))
    assert records.COMPILED == (K is not None and not forced_pure)
    assert records.RecordBatchBuilder is (
        k.RecordBatchBuilder if records.COMPILED else RecordBatchBuilderPy
    )
    assert (partitioner.murmur2 is partitioner._murmur2_pure) == (not records.COMPILED)
    assert BatchCore is (k.BatchCore if records.COMPILED else BatchCorePy)
    assert issubclass(ProducerBatch, BatchCore)
    assert not hasattr(k, "bind_batch_layout")
    for gone in ("encode_record", "encode_run", "headers_bytes"):  # the builder's own now
        assert not hasattr(k, gone)


# -- the unkeyed shortcut's append ------------------------------------------------

# Value lengths where the record's own size crosses a varint step (a record
# without key or headers is its value plus 6 to 8 bytes: 63/64 and 8191/8192).
_UNKEYED_LENGTHS = st.one_of(
    _EDGE_LENGTHS, st.integers(52, 66), st.integers(8180, 8195), st.integers(0, 300)
)
_UNKEYED_VALUES = st.one_of(
    st.none(), _UNKEYED_LENGTHS.flatmap(lambda n: st.binary(min_size=n, max_size=n))
)
_STEP = st.one_of(
    st.tuples(
        st.just("append"), _DELTAS, _UNKEYED_VALUES, st.integers(0, 1000), st.integers(0, 20_000)
    ),
    st.tuples(st.just("seal")),
    st.tuples(st.just("build")),
)


def _kernel_method(k: ModuleType) -> object:
    """The compiled append_unkeyed: a method of the compiled batch core."""
    return batch_class(k.BatchCore).append_unkeyed


def _keyed_kernel_method(k: ModuleType) -> object:
    """The compiled append_keyed, likewise."""
    return batch_class(k.BatchCore).append_keyed


def _batch(builder_cls: type, batch_size: int, core: type = BatchCorePy) -> ProducerBatch:
    """A ProducerBatch over ``core`` whose builder is of ``builder_cls``."""
    batch: ProducerBatch = batch_class(core)(
        "t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0, delivery_timeout=60
    )
    batch.builder = builder_cls(codec=Codec.NONE, batch_size=batch_size)
    return batch


def _twins(k: ModuleType, batch_size: int) -> tuple[ProducerBatch, ProducerBatch]:
    """The reference batch (the pure core and builder), and the compiled one (both compiled)."""
    return (
        _batch(RecordBatchBuilderPy, batch_size),
        _batch(k.RecordBatchBuilder, batch_size, k.BatchCore),
    )


def _built(batch: ProducerBatch) -> object:
    return (
        _outcome(lambda: bytes(batch.builder.build(producer_id=3))) if batch.record_count else None
    )


def _batch_state(batch: ProducerBatch) -> tuple:
    return (
        _state(batch.builder),
        batch.builder.is_sealed,
        batch.state,
        batch.reserved,
        batch.max_record_size,
    )


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
    k: ModuleType,
    batch_size: int,
    limit: int,
    produced_before: int | None,
    base: int,
    steps: list,
) -> None:
    kernel = _kernel_method(k)
    produced: list[dict[str, int]] = [{}, {}]
    if produced_before is not None:
        produced = [{"t": produced_before}, {"t": produced_before}]
    # The reference all through: the pure record encoder too.
    pure, compiled = _twins(k, batch_size)
    for i, step in enumerate(steps):
        if step[0] == "append":
            _, delta, value, reserve, bound = step
            ts = max(0, base + delta)
            expected = _outcome(
                BatchCorePy.append_unkeyed, pure, ts, value, reserve, bound, produced[0], "t", limit
            )
            got = _outcome(kernel, compiled, ts, value, reserve, bound, produced[1], "t", limit)
            assert got == expected, (i, step)
        elif step[0] == "seal":
            pure.seal()
            compiled.seal()
        elif pure.record_count:
            assert _built(compiled) == _built(pure)
        assert _batch_state(compiled) == _batch_state(pure), (i, step)
        assert produced[1] == produced[0]
    assert _built(compiled) == _built(pure)


_KEYS = st.one_of(
    st.none(),
    st.one_of(_EDGE_LENGTHS, st.integers(0, 70)).flatmap(
        lambda n: st.binary(min_size=n, max_size=n)
    ),
)
_KEYED_STEP = st.one_of(
    st.tuples(
        st.just("append"),
        _DELTAS,
        _KEYS,
        _UNKEYED_VALUES,
        st.integers(0, 1000),
        st.integers(0, 20_000),
    ),
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
    k: ModuleType,
    batch_size: int,
    base: int,
    steps: list,
) -> None:
    """Keys and values across the varint steps, nulls, timestamps before and
    after the first, batches filling up, sealed and built: the same answers,
    lists, counters and bytes."""
    kernel = _keyed_kernel_method(k)
    pure, compiled = _twins(k, batch_size)
    for i, step in enumerate(steps):
        if step[0] == "append":
            _, delta, key, value, reserve, bound = step
            ts = max(0, base + delta)
            expected = _outcome(BatchCorePy.append_keyed, pure, ts, key, value, reserve, bound)
            got = _outcome(kernel, compiled, ts, key, value, reserve, bound)
            assert got == expected, (i, step)
        elif step[0] == "seal":
            pure.seal()
            compiled.seal()
        elif pure.record_count:
            assert _built(compiled) == _built(pure)
        assert _batch_state(compiled) == _batch_state(pure), (i, step)
    assert _built(compiled) == _built(pure)


def test_the_compiled_appends_take_only_an_int_timestamp(k: ModuleType) -> None:
    # The lanes stamp records themselves (the handle needs the timestamp first).
    batch = _batch(k.RecordBatchBuilder, 1000, k.BatchCore)
    with pytest.raises(TypeError, match="timestamp_ms must be an int"):
        _keyed_kernel_method(k)(batch, None, b"key", b"value", 10, 40)  # type: ignore[operator]
    with pytest.raises(TypeError, match="timestamp_ms must be an int"):
        _kernel_method(k)(batch, None, b"v", 1, 1, {}, "t", 200)  # type: ignore[operator]
    assert batch.record_count == 0


def test_the_lanes_appends_grow_a_batch_within_its_size(k: ModuleType) -> None:
    # append_unkeyed and append_keyed (the lanes' appends) grow the builder's
    # buffer as its append does: by doubling, never past the batch size.
    unkeyed, keyed = _kernel_method(k), _keyed_kernel_method(k)
    for batch_size in (1_000, 16_384):
        for append in ("unkeyed", "keyed"):
            batch = _batch(k.RecordBatchBuilder, batch_size, k.BatchCore)
            allocations = set()
            for i in range(batch_size):
                if append == "unkeyed":
                    taken = unkeyed(batch, 5, b"x" * 100, 10, 130, {}, "t", 1 << 30)
                else:
                    taken = keyed(batch, 5, b"k", b"x" * 100, 10, 133)
                if not taken:
                    break
                held = held_bytes(batch.builder)
                allocations.add(held)
                assert held <= _ALLOWED(batch_size)
            assert i > 5 and len(allocations) <= 12, (append, sorted(allocations))


def test_unkeyed_records_that_fill_the_batch_exactly_fit_in_both(k: ModuleType) -> None:
    # Every batch size over a span: some land exactly on a record's end.
    kernel = _kernel_method(k)
    values = [None if i % 7 == 3 else bytes([i]) * (i * 13 % 90) for i in range(40)]
    for batch_size in range(62, 1500, 3):
        states = []
        for append, batch in zip((BatchCorePy.append_unkeyed, kernel), _twins(k, batch_size)):
            produced: dict[str, int] = {}
            answers = [
                append(batch, 5 + i, value, 10, 30, produced, "t", 700)  # type: ignore[operator]
                for i, value in enumerate(values)
            ]
            states.append((answers, produced, _batch_state(batch), _built(batch)))
        assert states[1] == states[0], batch_size


def test_append_unkeyed_answers_and_refusals(k: ModuleType) -> None:
    kernel = _kernel_method(k)
    for core, append in ((BatchCorePy, BatchCorePy.append_unkeyed), (k.BatchCore, kernel)):
        batch = _batch(
            RecordBatchBuilderPy if core is BatchCorePy else k.RecordBatchBuilder, 300, core
        )
        produced: dict[str, int] = {}
        answers = [
            append(batch, 1000 + i, b"v" * 50, 100, 80, produced, "t", 200)  # type: ignore[operator]
            for i in range(6)
        ]
        # 80, 160: under the limit; 240, 320: over it with no room for another
        # such record; the fifth does not fit (4 x 58 bytes + 61 + 58 > 300).
        assert answers == [
            batch_module.APPENDED,
            batch_module.APPENDED,
            batch_module.SWITCH,
            batch_module.SWITCH,
            batch_module.REFUSED,
            batch_module.REFUSED,
        ]
        assert produced == {"t": 320} and batch.record_count == 4
        assert (batch.reserved, batch.max_record_size) == (400, 80)
        batch.seal()
        assert append(batch, 2000, b"", 1, 1, produced, "t", 200) == batch_module.REFUSED  # type: ignore[operator]
        # Bad input raises and changes nothing.
        open_batch = _batch(
            RecordBatchBuilderPy if core is BatchCorePy else k.RecordBatchBuilder, 300, core
        )
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
    # The compiled builder reserves twice its buffer's length when it is full
    # (a bytearray alone grows by an eighth): few copies on the way to a full
    # batch, and never more memory than the batch size allows.
    for batch_size in (1_000, 16_384, 65_536, *range(1_000, 20_000, 389)):
        builder = k.RecordBatchBuilder(batch_size=batch_size)
        allocations = {held_bytes(builder)}
        while builder.append(0, None, b"x" * 100) is not None:
            allocations.add(held_bytes(builder))
            assert held_bytes(builder) <= _ALLOWED(batch_size)
        pure = RecordBatchBuilderPy(batch_size=batch_size)
        while pure.append(0, None, b"x" * 100) is not None:
            pass
        assert pure.record_count == builder.record_count
        assert bytes(pure.build()) == builder.build()
        assert len(allocations) <= 12, sorted(allocations)


def test_short_runs_grow_a_batch_by_doubling_within_its_size(k: ModuleType) -> None:
    # Many short runs (one per bulk call or per partition) grow the buffer by
    # doubling too, and never past the batch size; a record that fills the
    # batch exactly does not double it either.
    for run in (1, 4, 16):
        for batch_size in (16_384, *range(1_000, 5_000, 331)):
            builder = k.RecordBatchBuilder(batch_size=batch_size, codec=Codec.NONE)
            allocations = set()
            while builder.append_run(1, [b"x" * 100] * run, 0, run, None, None) == run:
                held = held_bytes(builder)
                allocations.add(held)
                assert held <= _ALLOWED(batch_size), (run, batch_size)
            assert len(allocations) <= 12, (run, batch_size, sorted(allocations))
    builder = k.RecordBatchBuilder(batch_size=1_000, codec=Codec.NONE)
    builder.append_run(1, [b"x" * 700], 0, 1, None, None)
    room = builder.batch_size - builder.size_in_bytes
    builder.append_run(1, [b"y" * (room - 9)], 0, 1, None, None)  # fills it to the byte
    assert builder.size_in_bytes == 1_000
    assert held_bytes(builder) <= _ALLOWED(1_000)


def test_a_run_reserves_what_its_records_need_within_the_room(k: ModuleType) -> None:
    # A run of like records reserves their room in one step, no more than they
    # take; unlike records never make it reserve more than the batch's room.
    for values in ([b"x" * 100] * 100, [b"x" * 10] + [b"y" * 900] * 20, [b"z" * 5000, b"a", b"b"]):
        for batch_size in (2_000, 1 << 20):
            builder = k.RecordBatchBuilder(batch_size=batch_size, codec=Codec.NONE)
            taken = builder.append_run(1, values, 0, len(values), None, None)
            assert taken
            held = held_bytes(builder)
            assert held <= max(batch_size, builder.size_in_bytes) + 1
            if len(set(values)) == 1 and taken == len(values):
                # like records: about their bytes (not twice, as doubling would)
                assert held <= builder.size_in_bytes * 1.15 + 8
