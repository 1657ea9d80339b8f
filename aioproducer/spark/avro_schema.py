"""An Avro schema from a Spark struct type, and the conversions a row needs to fit it.

The mapping is Spark's own (``to_avro``'s ``SchemaConverters``): booleans,
ints (byte, short and int as ``int``), longs, floats, doubles, strings (char
and varchar too), binary as ``bytes``, decimals as ``bytes`` with the
``decimal`` logical type, dates as ``int``/``date``, timestamps as
``long``/``timestamp-micros`` (``local-timestamp-micros`` without a time zone),
arrays, maps with string keys, and structs as records, a nested record named
after its field in its parent's namespace. One difference: a nullable field is
the union ``["null", T]`` with ``"default": null`` (Spark writes ``[T,
"null"]`` without a default), so that a field added later with a default keeps
a subject BACKWARD compatible in the registry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from .columns import SinkSchemaError

__all__ = ["avro_schema", "row_fixer"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTS = (ByteType, ShortType, IntegerType)
_STRINGS = (StringType, CharType, VarcharType)
Fixer = Callable[[Any], Any]


def _type(dt: DataType, nullable: bool, name: str, namespace: str, path: str) -> Any:
    avro: Any
    if isinstance(dt, BooleanType):
        avro = "boolean"
    elif isinstance(dt, _INTS):
        avro = "int"
    elif isinstance(dt, LongType):
        avro = "long"
    elif isinstance(dt, FloatType):
        avro = "float"
    elif isinstance(dt, DoubleType):
        avro = "double"
    elif isinstance(dt, _STRINGS):
        avro = "string"
    elif isinstance(dt, BinaryType):
        avro = "bytes"
    elif isinstance(dt, DecimalType):
        avro = {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": dt.precision,
            "scale": dt.scale,
        }
    elif isinstance(dt, DateType):
        avro = {"type": "int", "logicalType": "date"}
    elif isinstance(dt, TimestampType):
        avro = {"type": "long", "logicalType": "timestamp-micros"}
    elif isinstance(dt, TimestampNTZType):
        avro = {"type": "long", "logicalType": "local-timestamp-micros"}
    elif isinstance(dt, NullType):
        return "null"
    elif isinstance(dt, ArrayType):
        avro = {
            "type": "array",
            "items": _type(dt.elementType, dt.containsNull, name, namespace, f"{path}[]"),
        }
    elif isinstance(dt, MapType):
        if not isinstance(dt.keyType, _STRINGS):
            raise SinkSchemaError(
                f"field {path!r} is a map with {dt.keyType.simpleString()} keys; Avro maps "
                "have string keys (cast the keys to string)"
            )
        avro = {
            "type": "map",
            "values": _type(dt.valueType, dt.valueContainsNull, name, namespace, f"{path}{{}}"),
        }
    elif isinstance(dt, StructType):
        avro = _record(dt, name, namespace, path)
    else:
        raise SinkSchemaError(
            f"field {path!r} is of type {dt.simpleString()}, which the sink cannot write "
            "as Avro (cast it, e.g. to string or long)"
        )
    return ["null", avro] if nullable else avro


def _record(st: StructType, name: str, namespace: str, path: str) -> dict[str, Any]:
    child_namespace = f"{namespace}.{name}" if namespace else name
    fields = []
    for f in st.fields:
        where = f"{path}.{f.name}" if path else f.name
        if not _NAME.fullmatch(f.name):
            raise SinkSchemaError(
                f"field {where!r} is not a valid Avro name (letters, digits and "
                "underscores, not starting with a digit); rename it with an alias"
            )
        avro = _type(f.dataType, f.nullable, f.name, child_namespace, where)
        entry: dict[str, Any] = {"name": f.name, "type": avro}
        if isinstance(avro, list) and avro[0] == "null":
            entry["default"] = None
        fields.append(entry)
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = fields
    return record


def avro_schema(struct: StructType, name: str, namespace: str, column: str) -> dict[str, Any]:
    """The Avro record schema of ``struct`` (the ``column`` is named in errors)."""
    return _record(struct, name, namespace, column)


# -- the rows' Python values, made fit for fastavro --------------------------------------


def _fixer(dt: DataType) -> Fixer | None:
    """A function making one value of type ``dt`` as Arrow decodes it fit fastavro, or None.

    Arrow's ``to_pylist`` gives maps as lists of (key, value) pairs; fastavro
    writes dicts. Everything else fits as it is (timestamps are aware datetimes).
    """
    if isinstance(dt, ArrayType):
        item = _fixer(dt.elementType)
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(dt, MapType):
        value = _fixer(dt.valueType)
        if value is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: value(x) for k, x in v}
    if isinstance(dt, StructType):
        inner = [(f.name, fix) for f in dt.fields if (fix := _fixer(f.dataType)) is not None]
        if not inner:
            return None

        def fix_record(v: Any) -> Any:
            if v is None:
                return None
            for field_name, fix in inner:
                v[field_name] = fix(v[field_name])
            return v

        return fix_record
    return None


def row_fixer(struct: StructType, *, arrow: bool) -> Fixer | None:
    """What turns a decoded row (a dict) of ``struct`` into what fastavro writes, if anything.

    Rows from Spark ``Row``s (``asDict(recursive=True)``) need nothing: maps are
    dicts, and fastavro reads a naive timestamp as local time, as Spark means it.
    """
    return _fixer(struct) if arrow else None
