"""Struct columns written as Avro through a Schema Registry, in Confluent's wire format.

On the driver, :func:`plan_avro` derives each Avro column's schema from its
struct type (:mod:`.avro_schema`), checks it parses, and, when the subject does
not depend on the rows (a ``topic`` option, or RecordNameStrategy), resolves it
with the registry once: an unreachable registry, a schema refused as
incompatible, a missing subject or a struct that does not fit the latest
version fail the query before any task runs.

In a task, :class:`AvroEncoder` wraps the chunk iterator: each chunk's struct
columns become lists of encoded bytes, on the thread that reads the input, so
the event loop keeps serving the producer. A task makes one
:class:`~aioproducer.schema_registry.AvroSerializer` per column and resolves
its schema id once per topic (on the task's event loop, where the registry
client lives), then encodes every row of every batch with it: no registry call
and no schema parsing per row or per batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import StructType

from ..errors import ConfigurationError
from ..schema_registry import AvroSerializer, SchemaRegistryClient, SchemaValidationError
from .avro_options import AvroColumnOptions, AvroOptions
from .avro_schema import avro_schema, row_fixer
from .columns import Chunk, ColumnPlan, SinkSchemaError, SinkWriteError, TopicColumns

if TYPE_CHECKING:
    from .options import SinkOptions

__all__ = ["AvroEncoder", "avro_encoder", "plan_avro"]

# Bound on one schema resolution seen from the input thread, beyond the
# client's own (timeout per attempt times attempts, plus backoff).
_RESOLVE_SLACK_S = 30.0


def _struct_of(schema: StructType, index: int) -> StructType:
    dt = schema.fields[index].dataType
    assert isinstance(dt, StructType)  # plan_columns checked it
    return dt


def _parse(schema: dict[str, Any], which: str) -> None:
    try:
        import fastavro
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            f"option('{which}.format', 'avro') needs fastavro: pip install 'aioproducer[avro]'"
        ) from exc
    try:
        fastavro.parse_schema(schema)
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as exc:
        raise SinkSchemaError(
            f"the Avro schema derived from the {which} column is not valid: {exc}"
        ) from exc


def plan_avro(schema: StructType, plan: ColumnPlan, options: SinkOptions) -> SinkOptions:
    """``options`` with each Avro column's derived schema; checked with the registry if it can be."""
    avro = options.avro
    if avro is None:
        return options
    columns: dict[str, AvroColumnOptions] = {}
    for which, column, index in (("value", avro.value, plan.value), ("key", avro.key, plan.key)):
        if column is None:
            continue
        assert index is not None
        struct = _struct_of(schema, index)
        derived = avro_schema(struct, column.record_name, column.record_namespace, which)
        _parse(derived, which)
        columns[which] = replace(column, schema_str=json.dumps(derived), spark_type=struct.json())
    avro = replace(avro, value=columns.get("value", avro.value), key=columns.get("key", avro.key))
    topic = options.topic
    checked = [
        c
        for c in avro.columns
        if topic is not None or c.subject_name_strategy == "RecordNameStrategy"
    ]
    if checked:
        asyncio.run(_check_with_registry(avro, checked, topic or "", options))
    return replace(options, avro=avro)


async def _check_with_registry(
    avro: AvroOptions, columns: list[AvroColumnOptions], topic: str, options: SinkOptions
) -> None:
    async with SchemaRegistryClient.from_config(avro.registry) as client:
        for column in columns:
            which = column.which
            serializer = AvroSerializer(
                client, column.schema_str, **avro.serializer_options(column)
            )
            try:
                await serializer.prepare(topic)
            except ConfigurationError:
                raise
            except Exception as exc:
                raise ConfigurationError(
                    f"the {which} column's Avro schema could not be resolved with the Schema "
                    f"Registry: {type(exc).__name__}: {exc}"
                ) from exc
            if avro.use_latest_version:
                subject = avro.subject(column, topic)
                latest = await client.get_latest_version(subject)
                _check_fits(which, json.loads(latest.schema.schema_str), column, subject)


def _check_fits(which: str, latest: Any, column: AvroColumnOptions, subject: str) -> None:
    """The struct's fields against the latest version's record (use.latest.version)."""
    if not isinstance(latest, dict) or latest.get("type") != "record":
        raise ConfigurationError(
            f"use.latest.version: the latest schema of subject {subject!r} is not an Avro "
            f"record, so the {which} struct cannot be written with it"
        )
    struct = StructType.fromJson(json.loads(column.spark_type or "{}"))
    have = set(struct.fieldNames())
    fields = {f["name"]: f for f in latest.get("fields", [])}
    extra = sorted(have - set(fields))
    if extra:
        raise SinkSchemaError(
            f"use.latest.version: the {which} struct has field(s) {extra} that the latest "
            f"schema of subject {subject!r} does not have (its fields: {sorted(fields)})"
        )
    missing = sorted(n for n, f in fields.items() if n not in have and "default" not in f)
    if missing:
        raise SinkSchemaError(
            f"use.latest.version: the latest schema of subject {subject!r} needs field(s) "
            f"{missing} (no default), which the {which} struct does not have"
        )


# -- in the task ----------------------------------------------------------------------


class _Column:
    """One Avro column of a task: its serializer, and the per-row fix-up of decoded values."""

    def __init__(
        self,
        client: SchemaRegistryClient,
        avro: AvroOptions,
        column: AvroColumnOptions,
        arrow: bool,
    ) -> None:
        self.which = column.which
        self.serializer = AvroSerializer(
            client, column.schema_str, **avro.serializer_options(column)
        )
        struct = StructType.fromJson(json.loads(column.spark_type or "{}"))
        self.fix = row_fixer(struct, arrow=arrow)

    def encode(
        self, rows: Any, topic: str, first_row: int | None
    ) -> tuple[list[bytes | None], int]:
        """The encoded rows and their total size; rows are an Arrow struct array or dicts.

        ``first_row``: the task's row number of the first one, when the rows are consecutive.
        """
        values = rows if isinstance(rows, list) else rows.to_pylist()
        fix = self.fix
        if fix is not None:
            values = [fix(v) for v in values]
        serialize = self.serializer.for_topic(topic)
        many = serialize.many  # type: ignore[attr-defined]  # a function attribute (see _framed)
        try:
            out: list[bytes | None] = many(values)
        except SchemaValidationError:
            for i, v in enumerate(values):  # only on failure: which row
                try:
                    serialize(v)
                except SchemaValidationError as exc:
                    where = (
                        f"row {first_row + i + 1} of this task"
                        if first_row is not None
                        else f"row {i + 1} of this chunk's rows for topic {topic!r}"
                    )
                    raise SinkWriteError(f"{where}: the {self.which} column's {exc}") from exc
            raise
        return out, sum(len(b) for b in out if b is not None)


class AvroEncoder:
    """Encodes a task's Avro columns; made and closed on the task's event loop."""

    def __init__(self, avro: AvroOptions, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._client = SchemaRegistryClient.from_config(avro.registry)
        self._avro = avro
        self._columns: dict[bool, dict[bool, _Column]] = {}
        # A prepare is a few requests (register or look up, and get by id at most).
        self._resolve_timeout = 3 * self._client.max_request_s + _RESOLVE_SLACK_S

    def _columns_for(self, arrow: bool) -> dict[bool, _Column]:
        found = self._columns.get(arrow)
        if found is None:
            found = self._columns[arrow] = {
                c.is_key: _Column(self._client, self._avro, c, arrow) for c in self._avro.columns
            }
        return found

    def _prepare(self, columns: dict[bool, _Column], topic: str) -> None:
        """Resolve the schema ids of ``topic`` on the event loop; from the input thread."""
        pending = [c.serializer for c in columns.values() if not c.serializer.prepared(topic)]
        if not pending:
            return

        async def prepare() -> None:
            for serializer in pending:
                await serializer.prepare(topic)

        future = asyncio.run_coroutine_threadsafe(prepare(), self._loop)
        try:
            future.result(self._resolve_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise SinkWriteError(
                f"resolving the Avro schema for topic {topic!r} took over "
                f"{self._resolve_timeout:.0f} s"
            ) from None

    def encoded(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """``chunks`` with their Avro columns encoded (run where the chunks are read)."""
        seen = 0
        for chunk in chunks:
            first = seen if len(chunk.parts) == 1 else None
            for part in chunk.parts:
                columns = self._columns_for(arrow=not isinstance(part.values, list))
                self._prepare(columns, part.topic)
                chunk.nbytes += self._encode_part(columns, part, first)
            seen += chunk.rows
            yield chunk

    def _encode_part(
        self, columns: dict[bool, _Column], part: TopicColumns, first: int | None
    ) -> int:
        nbytes = 0
        value = columns.get(False)
        if value is not None:
            part.values, size = value.encode(part.values, part.topic, first)
            nbytes += size
        key = columns.get(True)
        if key is not None and part.keys is not None:
            part.keys, size = key.encode(part.keys, part.topic, first)
            nbytes += size
        return nbytes

    async def close(self) -> None:
        """Close the registry client's HTTP session."""
        await self._client.close()


def avro_encoder(options: SinkOptions, loop: asyncio.AbstractEventLoop) -> AvroEncoder | None:
    """The task's encoder, or None when no column is written as Avro."""
    return None if options.avro is None else AvroEncoder(options.avro, loop)
