from collections.abc import Callable, Iterable, Sequence
from typing import Any

def murmur2(data: bytes | bytearray | memoryview, /) -> int: ...
def _partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int, /) -> int: ...
def _time_to_switch(produced: int, limit: int, filled: int, size: int, /) -> bool: ...

class RecordBatchBuilder:
    """The compiled twin of aioproducer.protocol.records.RecordBatchBuilderPy (see _builder.c)."""

    def __init__(
        self,
        *,
        codec: Any = ...,
        batch_size: int = 16384,
        is_transactional: bool = False,
        compression_level: int | None = None,
    ) -> None: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def is_sealed(self) -> bool: ...
    @property
    def record_count(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def codec(self) -> Any: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def compression_level(self) -> int | None: ...
    def append(
        self, timestamp_ms: int, key: Any, value: Any, headers: Iterable[Any] | None = None
    ) -> int | None: ...
    def append_run(
        self,
        timestamp_ms: int,
        values: Sequence[Any],
        start: int,
        stop: int,
        keys: Sequence[Any] | None = None,
        headers: Iterable[Any] | None = None,
        order: Sequence[Any] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> int: ...
    def has_room_for(
        self,
        key_len: int | None,
        value_len: int | None,
        headers: Iterable[Any] | None = None,
        timestamp_ms: int | None = None,
    ) -> bool: ...
    def build(
        self, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1
    ) -> bytes: ...

class BatchCore:
    """The compiled twin of aioproducer.engine.batch.BatchCorePy (see _batch_core.c)."""

    state: Any
    builder: Any
    outcome: Any
    reserved: int
    max_record_size: int
    batch_size: int
    def append_unkeyed(
        self,
        timestamp_ms: int,
        value: Any,
        reserve: int,
        bound: int,
        produced: dict[str, int],
        topic: str,
        limit: int,
        /,
    ) -> int: ...
    def append_keyed(
        self, timestamp_ms: int, key: Any, value: Any, reserve: int, bound: int, /
    ) -> int: ...

def register_open_state(state: object, /) -> None: ...

class BufferCounter:
    """The compiled twin of aioproducer.engine.buffer_pool.BufferCounterPy (see _counter.c)."""

    def __init__(self, available: int = 0) -> None: ...
    @property
    def available(self) -> int: ...
    @property
    def exhausted(self) -> bool: ...
    def try_reserve(self, n: int, /) -> bool: ...
    def take(self, n: int, /) -> None: ...
    def give(self, n: int, /) -> None: ...
    def set_exhausted(self, flag: object, /) -> None: ...

def byte_lengths(column: list[Any], out: Any, /) -> bool: ...
def reservations(
    out: Any, fixed: int, value_lengths: Any, key_lengths: Any, limit: int, /
) -> int: ...
def fill_counting(out: Any, start: int, count: int, first: int, /) -> None: ...

UNKEYED_RECORD_BOUND: int
KEYED_RECORD_BOUND: int
RECORD_HANDLE_OVERHEAD: int

class UnkeyedLane:
    """The compiled twin of aioproducer.engine.unkeyed_lane.UnkeyedLanePy (see _lanes.c)."""

    batch_size: Any
    client: Any
    filling: Any
    max_size: Any
    move_on: Any
    pool: Any
    produced: Any
    wake: Any
    def __init__(
        self, sticky: Any, pool: Any, client: Any, max_size: int, wake: Callable[[], None]
    ) -> None: ...
    def append(self, topic: str, value: bytes, /) -> Any: ...

class KeyedLane:
    """The compiled twin of aioproducer.engine.keyed_lane.KeyedLanePy (see _lanes.c)."""

    client: Any
    deques: Any
    max_size: Any
    pool: Any
    wake: Any
    def __init__(
        self, deques: Any, pool: Any, client: Any, max_size: int, wake: Callable[[], None]
    ) -> None: ...
    def append(self, topic: str, key: bytes, value: bytes, /) -> Any: ...

class EnqueueShortcut:
    """The compiled twin of aioproducer.engine.shortcut.EnqueueShortcutPy (see _shortcut.c)."""

    countdown: Any
    keyed_lane: Any
    lane: Any
    loop_mark: Any
    plain: Any
    topics_seen: Any
    def __init__(self, loop_mark: Any, countdown: int, topics_seen: Any) -> None: ...
    def take(
        self, topic: str, value: Any, key: Any, partition: Any, timestamp_ms: Any, headers: Any, /
    ) -> Any: ...
