"""The column contract of the sink and the conversion of Spark data into records.

The contract is Spark's Kafka sink's: ``value`` (string or binary, required),
``key`` (string or binary), ``topic`` (string), ``partition`` (int),
``headers`` (array<struct<key: string, value: binary>>) and ``timestamp``
(timestamp). Other columns are ignored. :func:`plan_columns` checks a schema on
the driver; :func:`arrow_chunks` and :func:`row_chunks` turn a task's input
into chunks of per-topic columns ready for ``Producer.enqueue_many``: Arrow
value and key arrays are handed over as they are (the producer reads them
through Arrow's C code and hashes the key column in one vectorized pass), with
no Python code per row on the sink's side; :func:`split_by_key` groups keyed
Arrow rows by their key's partition for the producer. Schema mistakes
raise :class:`SinkSchemaError` on the driver; rows the sink cannot write raise
:class:`SinkWriteError` in the task. With ``value.format`` (``key.format``)
``avro`` the column is a struct instead, passed on as it is and encoded by
:mod:`aioproducer.spark.avro_columns`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from ..errors import KafkaError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CHUNK_ROWS",
    "Chunk",
    "ColumnPlan",
    "SinkSchemaError",
    "SinkWriteError",
    "TopicColumns",
    "arrow_chunks",
    "plan_columns",
    "row_chunks",
    "split_by_key",
    "splittable",
]

# (topic, value, key, partition, timestamp_ms, headers)
Record = tuple[
    str, bytes | None, bytes | None, int | None, int | None, list[tuple[str, bytes | None]] | None
]

# Rows per chunk at most: large enough to amortise the hand-over to the event
# loop and the per-call costs of enqueue_many, small enough that a chunk of big
# values stays a small multiple of them. Above Spark's default Arrow batch
# (spark.sql.execution.arrow.maxRecordsPerBatch, 10,000 rows), so such a batch
# is one chunk rather than a full one and a remainder.
CHUNK_ROWS = 16384

_HEADERS_TYPE = "array<struct<key:string,value:binary>>"


class SinkSchemaError(ValueError):
    """The DataFrame does not match the sink's column contract."""


class SinkWriteError(KafkaError):
    """A write task could not deliver its records."""

    description = "aioproducer Kafka sink task failed"


@dataclass(frozen=True)
class ColumnPlan:
    """Where each contract column sits in the input (None: absent)."""

    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None
    timestamp: int | None = None
    # The ``topic`` option; it wins over a topic column, as in Spark's Kafka sink.
    fixed_topic: str | None = None
    # Struct columns encoded as Avro (value.format / key.format avro), not bytes.
    value_avro: bool = False
    key_avro: bool = False


@dataclass
class TopicColumns:
    """One topic's rows of a chunk, column by column, as ``enqueue_many`` takes them.

    ``values`` and ``keys`` are Arrow arrays (Arrow input) or lists of bytes;
    the other columns are None when the DataFrame does not have them.
    """

    topic: str
    values: Any
    keys: Any = None
    partitions: list[int | None] | None = None
    timestamps: list[int | None] | None = None
    headers: list[list[tuple[str, bytes | None]] | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> list[Record]:
        """The rows as ``(topic, value, key, partition, timestamp_ms, headers)`` (tests, logs)."""
        n = len(self)
        none = [None] * n
        return list(
            zip(
                [self.topic] * n,
                _plain(self.values),
                none if self.keys is None else _plain(self.keys),
                self.partitions or none,
                self.timestamps or none,
                self.headers or none,
            )
        )


def _plain(column: Any) -> list[bytes | None]:
    if isinstance(column, list):
        return [None if v is None else bytes(v) for v in column]
    return [v.encode() if isinstance(v, str) else v for v in column.to_pylist()]


@dataclass
class Chunk:
    """Rows ready to produce, per topic, plus what they add to the task's counters."""

    parts: list[TopicColumns]
    nbytes: int
    topics: Counter[str]

    @property
    def rows(self) -> int:
        return sum(len(part) for part in self.parts)

    def records(self) -> list[Record]:
        return [record for part in self.parts for record in part.records()]


def _headers_ok(dt: DataType) -> bool:
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in dt.elementType.fields}
    return (
        len(fields) == 2
        and isinstance(fields.get("key"), StringType)
        and isinstance(fields.get("value"), BinaryType)
    )


_EXPECTED: dict[str, tuple[str, Any]] = {
    "key": ("string or binary", lambda dt: isinstance(dt, (StringType, BinaryType))),
    "value": ("string or binary", lambda dt: isinstance(dt, (StringType, BinaryType))),
    "topic": ("string", lambda dt: isinstance(dt, StringType)),
    "partition": ("int", lambda dt: isinstance(dt, IntegerType)),
    "headers": (_HEADERS_TYPE, _headers_ok),
    "timestamp": ("timestamp", lambda dt: isinstance(dt, TimestampType)),
}


def plan_columns(
    schema: StructType, fixed_topic: str | None, *, avro: tuple[str, ...] = ()
) -> ColumnPlan:
    """Check ``schema`` against the contract; raise SinkSchemaError naming the column.

    ``avro``: the columns ("value", "key") written as Avro, which must be structs.
    """
    # Spark resolves column names case-insensitively by default; so do we.
    positions: dict[str, int] = {}
    for index, f in enumerate(schema.fields):
        name = f.name.lower()
        if name not in _EXPECTED:
            continue
        if name in positions:
            raise SinkSchemaError(
                f"the aioproducer sink found two columns named {name!r} "
                f"({schema.fields[positions[name]].name!r} and {f.name!r}); keep one"
            )
        expected, accepts = _EXPECTED[name]
        if name in avro:
            expected, accepts = "struct", lambda dt: isinstance(dt, StructType)
        if not accepts(f.dataType):
            hint = ""
            if name in avro:
                hint = f" (option('{name}.format', 'avro') encodes a struct column)"
            elif name in ("key", "value") and isinstance(f.dataType, StructType):
                hint = f" (or set option('{name}.format', 'avro') to encode the struct as Avro)"
            raise SinkSchemaError(
                f"column {f.name!r} must be of type {expected} for the aioproducer sink, "
                f"but it is {f.dataType.simpleString()}{hint}"
            )
        positions[name] = index
    if "key" in avro and "key" not in positions:
        raise SinkSchemaError(
            "option('key.format', 'avro') needs a 'key' column (a struct); the DataFrame "
            f"has columns: {', '.join(schema.fieldNames()) or 'none'}"
        )
    columns = ", ".join(schema.fieldNames()) or "none"
    if "value" not in positions:
        kind = "a struct" if "value" in avro else "string or binary"
        raise SinkSchemaError(
            f"the aioproducer sink needs a 'value' column ({kind}); "
            f"the DataFrame has columns: {columns}"
        )
    if fixed_topic is None and "topic" not in positions:
        raise SinkSchemaError(
            "no topic: give the aioproducer sink option('topic', ...) or a 'topic' "
            f"column (string); the DataFrame has columns: {columns}"
        )
    return ColumnPlan(
        value=positions["value"],
        key=positions.get("key"),
        topic=None if fixed_topic is not None else positions.get("topic"),
        partition=positions.get("partition"),
        headers=positions.get("headers"),
        timestamp=positions.get("timestamp"),
        fixed_topic=fixed_topic,
        value_avro="value" in avro,
        key_avro="key" in avro,
    )


def _null_topic_error(row_number: int) -> SinkWriteError:
    return SinkWriteError(
        f"row {row_number} of this task has a null 'topic' and no option('topic', ...) "
        "is set: every row needs a topic"
    )


# -- Arrow input (the fast path) -----------------------------------------------------


def _byte_count(column: pa.Array) -> int:
    import pyarrow.compute as pc

    total = pc.sum(pc.binary_length(column)).as_py()
    return int(total or 0)


def _millis_column(column: pa.Array) -> list[int | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    unit = column.type.unit
    scale = {"s": 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    raw = column.cast(pa.int64())
    millis: list[int | None]  # an int64 column's values (pyarrow is untyped)
    if unit == "s":
        millis = pc.multiply(raw, scale).to_pylist()
    elif scale == 1:
        millis = raw.to_pylist()
    else:
        # Integer division truncates; the producer rejects the negative (pre-1970)
        # timestamps where that would differ from flooring.
        millis = pc.divide(raw, scale).to_pylist()
    return millis


def _headers_column(column: pa.Array) -> list[list[tuple[str, bytes | None]] | None]:
    return [
        None if items is None else [(h["key"], h["value"]) for h in items]
        for items in column.to_pylist()
    ]


def _split_by_topic(
    columns: TopicColumns, topic_col: pa.Array, first_row: int
) -> list[TopicColumns]:
    """Rows of each topic of a chunk, in row order within a topic."""
    import pyarrow.compute as pc

    if topic_col.null_count:
        first_null = topic_col.is_null().to_pylist().index(True)
        raise _null_topic_error(first_row + first_null + 1)
    topics = pc.unique(topic_col).to_pylist()
    if len(topics) == 1:
        columns.topic = topics[0]
        return [columns]
    out = []
    for topic in topics:
        rows = pc.indices_nonzero(pc.equal(topic_col, topic))
        picked = rows.to_pylist()
        out.append(
            TopicColumns(
                topic,
                columns.values.take(rows),
                None if columns.keys is None else columns.keys.take(rows),
                *(
                    None if column is None else [column[i] for i in picked]
                    for column in (columns.partitions, columns.timestamps, columns.headers)
                ),
            )
        )
    return out


def arrow_chunks(batches: Iterable[pa.RecordBatch], plan: ColumnPlan) -> Iterator[Chunk]:
    """Slice Arrow record batches into chunks of per-topic columns."""
    seen = 0
    for batch in batches:
        # Equal pieces: a batch a little over the bound is two halves, not a
        # full chunk and a small remainder.
        pieces = -(-batch.num_rows // CHUNK_ROWS)
        size = -(-batch.num_rows // pieces) if pieces else 0
        for offset in range(0, batch.num_rows, size or 1):
            part = batch.slice(offset, size)  # zero-copy
            value_col = part.column(plan.value)
            # Avro columns are structs: their bytes are counted once encoded.
            nbytes = 0 if plan.value_avro else _byte_count(value_col)
            key_col = None
            if plan.key is not None:
                key_col = part.column(plan.key)
                nbytes += 0 if plan.key_avro else _byte_count(key_col)
            columns = TopicColumns(
                plan.fixed_topic or "",
                value_col,
                key_col,
                part.column(plan.partition).to_pylist() if plan.partition is not None else None,
                _millis_column(part.column(plan.timestamp)) if plan.timestamp is not None else None,
                _headers_column(part.column(plan.headers)) if plan.headers is not None else None,
            )
            if plan.fixed_topic is not None:
                parts = [columns]
            else:
                assert plan.topic is not None
                parts = _split_by_topic(columns, part.column(plan.topic), seen)
            seen += part.num_rows
            yield Chunk(parts, nbytes, Counter({p.topic: len(p) for p in parts}))


# -- Keyed rows grouped by partition ------------------------------------------------
#
# Keyed Arrow rows grouped by their partition before they reach the producer.
#
# Kafka's default partitioner puts a keyed record on
# ``toPositive(murmur2(key)) % numPartitions`` (Java's ``BuiltInPartitioner``).
# Handed a chunk of keyed rows, the producer's bulk path hashes the keys in one
# vectorized pass but then places the records one partition run at a time with
# per-record bookkeeping in Python. The sink knows the whole chunk up front, so
# it hashes the keys itself (the same vectorized murmur2), orders the rows by
# partition with a stable sort (Arrow ``take``: C, no Python per row) and makes
# one ``enqueue_many`` call per partition with that partition named: the
# producer then appends each partition's rows as runs, record order within a
# partition kept. The records and where they land are what the producer would
# have chosen itself; only the work moves out of Python's per-record loop.
#
# Rows with a null key have no key partition: they go in one call without a
# partition, and the producer's sticky partitioner (KIP-480) places them.


def splittable(part: TopicColumns) -> bool:
    """Whether ``part``'s rows can be grouped here: Arrow keys and values,
    and no per-row partition, timestamp or headers columns."""
    if part.partitions is not None or part.timestamps is not None or part.headers is not None:
        return False
    try:
        import numpy  # noqa: F401 - the vectorized murmur2 needs it (optional with pyarrow)
        import pyarrow as pa
    except ImportError:
        return False
    keys, values = part.keys, part.values
    if not isinstance(keys, pa.Array) or not isinstance(values, pa.Array):
        return False
    t = keys.type
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    )


def split_by_key(part: TopicColumns, num_partitions: int) -> list[tuple[int | None, TopicColumns]]:
    """``part``'s rows as ``(partition, rows)`` groups, in partition order; the
    null-key rows first, with partition None. Call only where :func:`splittable`."""
    import numpy as np
    import pyarrow as pa

    from .. import arrow_key_partitions

    keys: Any = part.keys
    if len(keys) == 0:
        return [(None, part)]
    chosen = np.frombuffer(arrow_key_partitions(keys, num_partitions), dtype=np.int32)
    low, high = int(chosen.min()), int(chosen.max())
    if low == high:  # one partition (or only null keys): no reordering
        return [(None if low < 0 else low, _without_null_keys(part, low))]
    order = pa.array(np.argsort(chosen, kind="stable"))
    values, keys = part.values.take(order), keys.take(order)
    # Slot 0 counts the null keys (-1), slot p + 1 partition p.
    counts = np.bincount(chosen + 1, minlength=num_partitions + 1).tolist()
    groups: list[tuple[int | None, TopicColumns]] = []
    start = 0
    for slot, count in enumerate(counts):
        if not count:
            continue
        rows = TopicColumns(part.topic, values.slice(start, count), keys.slice(start, count))
        groups.append((slot - 1, rows) if slot else (None, _without_null_keys(rows, -1)))
        start += count
    return groups


def _without_null_keys(part: TopicColumns, partition: int) -> TopicColumns:
    # Rows whose keys are all null are unkeyed records: without a key column
    # the producer takes its run path (sticky partition) instead of record by record.
    if partition >= 0:
        return part
    return TopicColumns(part.topic, part.values)


# -- Row input (streaming on Spark 4.0, which has no Arrow stream writer) -------------


def _to_bytes(value: Any) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _struct(value: Any) -> dict[str, Any] | None:
    """A struct column's Row as a dict (nested Rows too), for the Avro encoder."""
    return None if value is None else value.asDict(recursive=True)


def _to_millis(value: datetime | None) -> int | None:
    if value is None:
        return None
    # Spark hands naive local-time datetimes to Python; timestamp() reads them
    # as local time, which gives back the instant Spark meant.
    return int(value.timestamp() * 1000)


def row_chunks(rows: Iterable[Any], plan: ColumnPlan) -> Iterator[Chunk]:
    """Group Spark Rows into chunks of per-topic columns."""
    seen = 0
    it = iter(rows)
    while True:
        block = list(itertools.islice(it, CHUNK_ROWS))
        if not block:
            return
        parts: dict[str, TopicColumns] = {}
        nbytes = 0
        for row in block:
            seen += 1
            value = _struct(row[plan.value]) if plan.value_avro else _to_bytes(row[plan.value])
            key = None
            if plan.key is not None:
                key = _struct(row[plan.key]) if plan.key_avro else _to_bytes(row[plan.key])
            if plan.fixed_topic is not None:
                topic = plan.fixed_topic
            else:
                topic = row[plan.topic]
                if topic is None:
                    raise _null_topic_error(seen)
            columns = parts.get(topic)
            if columns is None:
                columns = parts[topic] = TopicColumns(
                    topic,
                    [],
                    [] if plan.key is not None else None,
                    [] if plan.partition is not None else None,
                    [] if plan.timestamp is not None else None,
                    [] if plan.headers is not None else None,
                )
            columns.values.append(value)
            if columns.keys is not None:
                columns.keys.append(key)
            if columns.partitions is not None:
                columns.partitions.append(row[plan.partition])
            if columns.timestamps is not None:
                columns.timestamps.append(_to_millis(row[plan.timestamp]))
            if columns.headers is not None:
                raw_headers = row[plan.headers]
                columns.headers.append(
                    None
                    if raw_headers is None
                    else [(h["key"], _to_bytes(h["value"])) for h in raw_headers]
                )
            if not plan.value_avro and value is not None:
                nbytes += len(value)
            if not plan.key_avro and key is not None:
                nbytes += len(key)
        yield Chunk(list(parts.values()), nbytes, Counter({t: len(c) for t, c in parts.items()}))
