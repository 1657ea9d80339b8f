from collections.abc import Callable, Sequence
from typing import Any

def murmur2(data: bytes | bytearray | memoryview, /) -> int: ...
def _partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int, /) -> int: ...
def _time_to_switch(produced: int, limit: int, filled: int, size: int, /) -> bool: ...
def headers_bytes(headers: Sequence[tuple[str | bytes, bytes | None]], /) -> bytes: ...
def encode_record(
    buf: bytearray,
    batch_size: int,
    count: int,
    timestamp_delta: int,
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    /,
) -> int: ...
def encode_run(
    buf: bytearray,
    room: int,
    count: int,
    fixed: bytes,
    hdr: bytes,
    values: Sequence[bytes | bytearray | memoryview | None],
    keys: Sequence[bytes | bytearray | memoryview | None] | None,
    order: Sequence[int] | None,
    start: int,
    stop: int,
    /,
) -> int: ...
def bind_batch_layout(
    batch_type: type[Any], builder_type: type[Any], open_state: object, /
) -> tuple[Callable[..., int], Callable[..., bool]]:
    ...  # the compiled ProducerBatch.append_unkeyed and append_keyed, methods of batch_type
def byte_lengths(column: list[Any], out: Any, /) -> bool: ...
def reservations(out: Any, fixed: int, value_lengths: Any, key_lengths: Any, limit: int, /) -> int: ...
def fill_counting(out: Any, start: int, count: int, first: int, /) -> None: ...
def bind_lane_layout(
    lane_type: type[Any], record_bound: int, handle_overhead: int, switch_code: int,
    pool_type: type[Any], /
) -> Callable[..., Any]:
    ...  # the compiled UnkeyedLane.append, a method of lane_type
def bind_keyed_lane_layout(
    lane_type: type[Any], record_bound: int, handle_overhead: int, pool_type: type[Any], /
) -> Callable[..., Any]:
    ...  # the compiled KeyedLane.append, a method of lane_type
def bind_shortcut_layout(
    shortcut_type: type[Any], unkeyed_lane_type: type[Any], keyed_lane_type: type[Any], /
) -> Callable[..., Any]:
    ...  # the compiled EnqueueShortcut.take, a method of shortcut_type
