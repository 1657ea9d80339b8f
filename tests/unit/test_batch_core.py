"""The batch core (BatchCore in C, BatchCorePy) owns the fields its appends use.

Both twins expose the same fields with the same answers and errors, keep
ProducerBatch's weak references and other slots working, and never append
a record to a batch that code run mid-append (a topic's ``__hash__``) sealed
or gave another builder. The appends' answers on random input are compared in
test_kernels_equal.py and test_full_answers.py.
"""

from __future__ import annotations

import weakref
from typing import Any

import pytest

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import BatchCorePy, ProducerBatch
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RecordBatchBuilderPy
from tests.support.batch_twins import batch_class
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()


@pytest.fixture(params=["pure", "compiled"])
def core(request: pytest.FixtureRequest) -> type[Any]:
    return BatchCorePy if request.param == "pure" else required(K).BatchCore


def _batch(core: type[Any], batch_size: int = 1000) -> Any:
    batch = batch_class(core)(
        "t", 0, codec=Codec.NONE, batch_size=batch_size, now=0.0, delivery_timeout=60
    )
    batch.builder = (
        RecordBatchBuilderPy if core is BatchCorePy else required(K).RecordBatchBuilder
    )(codec=Codec.NONE, batch_size=batch_size)
    return batch


def test_the_fields_read_and_write_alike(core: type[Any]) -> None:
    batch = _batch(core)
    assert (batch.state, batch.reserved, batch.max_record_size, batch.batch_size) == (
        batch_module.OPEN,
        0,
        0,
        1000,
    )
    batch.reserved = 5
    batch.max_record_size = 7
    assert batch.release_reserved() == 5 and batch.reserved == 0 and batch.max_record_size == 7
    batch.seal()
    assert batch.state is batch_module.SEALED and batch.sealed
    ref = weakref.ref(batch)  # ProducerBatch's own __weakref__ slot
    assert ref() is batch
    batch.attempts = 3  # a slot of the subclass
    assert batch.attempts == 3
    with pytest.raises(AttributeError):
        batch.no_such_field = 1


def test_an_unset_state_raises_attribute_error_in_both(core: type[Any]) -> None:
    bare = batch_class(core).__new__(batch_class(core))
    with pytest.raises(AttributeError):
        _ = bare.state
    with pytest.raises(AttributeError):
        bare.append_keyed(1, b"k", b"v", 1, 1)


class _SealingTopic(str):
    """A topic whose hash runs ``hook`` once, then hashes as its str."""

    hook: Any = None

    def __hash__(self) -> int:
        hook, _SealingTopic.hook = _SealingTopic.hook, None
        if hook is not None:
            hook()
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)


@pytest.mark.parametrize("change", ["seal", "new builder"])
def test_no_record_goes_into_a_batch_changed_mid_append(core: type[Any], change: str) -> None:
    """The topic's hash (the sticky count's lookup) seals the batch or replaces its builder:
    whenever that runs, no record goes in after it (the compiled core checks again last)."""
    batch = _batch(core)
    old_builder = batch.builder
    seen: list[int] = []

    def hook() -> None:
        seen.append(old_builder.record_count)
        if change == "seal":
            batch.seal()
        else:
            batch.builder = type(old_builder)(codec=Codec.NONE, batch_size=1000)

    _SealingTopic.hook = hook
    produced: dict[str, int] = {}
    answer = batch.append_unkeyed(5, b"value", 10, 30, produced, _SealingTopic("t"), 700)
    assert seen, "the hook ran"
    # Whatever was appended was appended before the change; nothing after it.
    assert old_builder.record_count == seen[0]
    assert bool(answer) == (seen[0] == 1)
    assert batch.reserved == (10 if answer else 0)
    assert produced == ({"t": 30} if answer else {})


def test_producer_batch_extends_the_active_core() -> None:
    active = required(K).BatchCore if batch_module.kernels is not None else BatchCorePy
    assert ProducerBatch.__base__ is active
    assert "state" not in ProducerBatch.__slots__ and "__weakref__" in ProducerBatch.__slots__


class _SealingIndex:
    """A size whose ``__index__`` would seal the batch, were it called mid-append."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def __index__(self) -> int:
        self.batch.seal()
        return 10


def test_the_compiled_appends_run_no_code_of_their_numbers() -> None:
    """Sizes and timestamps are read as ints (no ``__index__``): a non-int is a TypeError
    before anything is read or changed, so no such code can seal the batch mid-append."""
    k = required(K)
    batch = _batch(k.BatchCore)
    with pytest.raises(TypeError):
        batch.append_keyed(5, b"k", b"v", _SealingIndex(batch), 40)
    with pytest.raises(TypeError):
        batch.append_unkeyed(_SealingIndex(batch), b"v", 10, 40, {}, "t", 100)
    assert batch.state is batch_module.OPEN and batch.record_count == 0 and batch.reserved == 0


def _fresh_kernels() -> Any:
    """Another module object of the extension (multi-phase init: a state of its own)."""
    import importlib.util

    spec = importlib.util.find_spec("aioproducer._speedups._kernels")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_each_module_object_has_its_own_state() -> None:
    """Nothing is process-wide: a second module object's types, open state and
    appends are its own, and the first keeps working once the second is gone."""
    import gc

    k = required(K)
    other = _fresh_kernels()
    assert other is not k and other.BatchCore is not k.BatchCore

    def make(module: Any) -> Any:
        batch = type("Batch", (module.BatchCore,), {"__slots__": ()})()
        batch.state = batch_module.OPEN
        batch.builder = module.RecordBatchBuilder(codec=Codec.NONE, batch_size=1000)
        batch.batch_size = 1000
        return batch

    fresh = make(other)
    # Not registered with the new module yet: no state is open to it.
    assert fresh.append_keyed(5, b"k", b"v", 10, 40) == batch_module.REFUSED
    other.register_open_state(batch_module.OPEN)
    assert fresh.append_keyed(5, b"k", b"v", 10, 40) == batch_module.APPENDED
    # Each module's core takes its own builder type only.
    fresh.builder = k.RecordBatchBuilder(codec=Codec.NONE, batch_size=1000)
    with pytest.raises(TypeError, match="compiled RecordBatchBuilder"):
        fresh.append_keyed(5, b"k", b"v", 10, 40)
    del fresh, other
    gc.collect()
    mine = _batch(k.BatchCore)
    assert mine.append_keyed(5, b"k", b"v", 10, 40) == batch_module.APPENDED
    counter = k.BufferCounter(100)
    assert counter.try_reserve(60) and not counter.try_reserve(60)


@pytest.mark.parametrize(("reserved", "reserve"), [((1 << 63) - 5, 10), (-(1 << 63) + 5, -10)])
def test_counters_past_int64_are_refused_cleanly(reserved: int, reserve: int) -> None:
    """The compiled core's counters are int64: an append that would leave that range raises
    OverflowError and changes nothing (the pure twin's ints have no such bound)."""
    k = required(K)
    batch = _batch(k.BatchCore)
    batch.reserved = reserved
    produced: dict[str, int] = {}
    with pytest.raises(OverflowError):
        batch.append_unkeyed(5, b"v", reserve, 30, produced, "t", 700)
    with pytest.raises(OverflowError):
        batch.append_unkeyed(5, b"v", 0, 1 << 62, {"t": 1 << 62}, "t", 700)
    assert (batch.record_count, batch.reserved, produced) == (0, reserved, {})
    with pytest.raises(OverflowError):
        batch.reserved = 1 << 63
