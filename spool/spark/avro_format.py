"""Avro values <-> Arrow struct columns with fastavro, typed as spark-avro types them.

Mapping (spark-avro's): record -> struct, enum -> string, fixed/bytes ->
binary, array, map -> map<string, ...>, ``[null, T]`` -> nullable T,
``[int, long]`` -> long, ``[float, double]`` -> double; logical date ->
date, timestamp-millis/micros -> timestamp, local-timestamp-millis/micros ->
timestamp_ntz, decimal -> decimal; other logical types read as their
underlying type. Other unions and recursive records raise ``ValueError``.
``spark_to_avro`` derives a schema from a Spark type as ``to_avro`` does
(nullable -> ``[T, "null"]``, timestamps as timestamp-micros).

Reading (``decode_avro``), value by value: a value that starts with byte 0
and decodes exactly (every byte used) after a 5-byte Confluent header (magic
0, 4-byte schema id) is taken as framed, else as plain Avro binary; the
schema id is not checked here (with ``schema.registry.url`` the id names the
writer schema: ``avro_registry.py``). A value
that decodes neither way -> null (spark-avro's PERMISSIVE mode). Writing
(``encode_avro``): fastavro's schemaless writer, with the Confluent header
when a schema id is given.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spool.spark.ddl import arrow_type

CONFLUENT_MAGIC = 0


_SPARK_LOGICAL = {
    "date",
    "timestamp-millis",
    "timestamp-micros",
    "local-timestamp-millis",
    "local-timestamp-micros",
    "decimal",
}
_AVRO_PRIMITIVE: dict[str, DataType] = {
    "string": StringType(),
    "bytes": BinaryType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
}


def _full_name(schema: Mapping, namespace: str | None) -> tuple[str, str | None]:
    name = schema["name"]
    ns = schema.get("namespace", namespace)
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{ns}.{name}" if ns else name), ns


def avro_to_spark(schema: Any, names: dict[str, Any], namespace: str | None, path: tuple) -> tuple[DataType, Any]:
    """(Spark type, reader schema) for an Avro schema; the reader schema drops the logical
    types spark-avro does not map (so fastavro returns their underlying values)."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVE:
            return _AVRO_PRIMITIVE[schema], schema
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        for key in (full, schema):
            if key in names:
                if names[key] is None:
                    raise ValueError(f"recursive type {key} is not supported")
                return names[key][0], key
        raise ValueError(f"unknown Avro type {schema!r}")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        converted = [avro_to_spark(b, names, namespace, path) for b in branches]
        kinds = sorted(b if isinstance(b, str) else "" for b in branches)
        if len(converted) == 1:
            return converted[0][0], [b if b == "null" else converted[0][1] for b in schema]
        if kinds == ["int", "long"]:
            return LongType(), schema
        if kinds == ["double", "float"]:
            return DoubleType(), schema
        raise ValueError(f"union {json.dumps(schema)} is not supported (only [null, T], [int, long], [float, double])")
    if not isinstance(schema, Mapping) or "type" not in schema:
        raise ValueError(f"invalid Avro schema {schema!r}")
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical is not None and logical not in _SPARK_LOGICAL:
        plain = {k: v for k, v in schema.items() if k != "logicalType"}
        return avro_to_spark(plain if kind in ("fixed",) else kind, names, namespace, path)
    if logical == "date" and kind == "int":
        return DateType(), schema
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return TimestampType(), schema
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return TimestampNTZType(), schema
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if not 0 < precision <= 38:
            raise ValueError(f"decimal precision {precision} is beyond Spark's 38")
        if kind == "fixed":
            full, _ = _full_name(schema, namespace)
            names[full] = (DecimalType(precision, scale), schema)
        return DecimalType(precision, scale), schema
    if kind in ("record", "enum", "fixed"):
        full, ns = _full_name(schema, namespace)
        if kind == "enum":
            names[full] = (StringType(), schema)
            return StringType(), schema
        if kind == "fixed":
            names[full] = (BinaryType(), schema)
            return BinaryType(), schema
        names[full] = None  # being defined: a reference now is recursion
        fields, reader_fields = [], []
        for f in schema["fields"]:
            t, reader = avro_to_spark(f["type"], names, ns, (*path, f["name"]))
            fields.append(StructField(f["name"], t, True))
            reader_fields.append({**f, "type": reader})
        out = StructType(fields)
        names[full] = (out, full)
        return out, {**schema, "fields": reader_fields}
    if kind == "array":
        t, reader = avro_to_spark(schema["items"], names, namespace, path)
        return ArrayType(t, True), {**schema, "items": reader}
    if kind == "map":
        t, reader = avro_to_spark(schema["values"], names, namespace, path)
        return MapType(StringType(), t, True), {**schema, "values": reader}
    if isinstance(kind, str | list) and kind not in ("record", "enum", "fixed", "array", "map"):
        return avro_to_spark(kind, names, namespace, path)
    raise ValueError(f"invalid Avro schema {schema!r}")


def spark_to_avro(t: DataType, name: str, namespace: str) -> Any:
    """An Avro schema for Spark type ``t``, as ``to_avro`` derives one (nullable -> [T, null])."""
    if isinstance(t, StructType):
        ns = f"{namespace}.{name}" if namespace else name
        return {
            "type": "record",
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "fields": [
                {"name": f.name, "type": [spark_to_avro(f.dataType, f.name, ns), "null"]}
                for f in t.fields
            ],
        }
    if isinstance(t, ArrayType):
        return {"type": "array", "items": [spark_to_avro(t.elementType, name, namespace), "null"]}
    if isinstance(t, MapType):
        if not isinstance(t.keyType, StringType):
            raise ValueError("Avro maps need string keys")
        return {"type": "map", "values": [spark_to_avro(t.valueType, name, namespace), "null"]}
    if isinstance(t, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if isinstance(t, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(t, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(t, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    simple = {
        StringType: "string",
        BinaryType: "bytes",
        BooleanType: "boolean",
        ByteType: "int",
        ShortType: "int",
        IntegerType: "int",
        LongType: "long",
        FloatType: "float",
        DoubleType: "double",
    }
    if type(t) in simple:
        return simple[type(t)]
    raise ValueError(f"type {t.simpleString()} has no Avro mapping")


@lru_cache(maxsize=64)
def parsed(schema_json: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(schema_json))


def _offsets(values: pa.Array) -> tuple[np.ndarray, bytes | memoryview]:
    """Start offsets (n + 1) into the data buffer and the buffer, of a binary array."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset :][: len(values) + 1]
    data = values.buffers()[2]
    return offsets, (b"" if data is None else memoryview(data))


def decode_avro(values: pa.Array, reader_schema: str, t: StructType) -> pa.Array:
    """Binary Avro values (framed or plain) -> a struct column of Spark type ``t``."""
    from fastavro import schemaless_reader

    schema = parsed(reader_schema)
    offsets, data = _offsets(values)
    stream = io.BytesIO(data)  # one stream over every value: no bytes object per value
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    framed = np.zeros(len(values), dtype=bool)
    starts, ends = offsets[:-1], offsets[1:]
    if len(data):
        first = np.frombuffer(data, dtype=np.uint8)[np.minimum(starts, len(data) - 1)]
        framed = (ends - starts >= 5) & (first == CONFLUENT_MAGIC)
    out = []
    for i in range(len(values)):
        if not valid[i]:
            out.append(None)
            continue
        start, end = int(starts[i]), int(ends[i])
        record = None
        if framed[i]:
            record = _read_exact(schemaless_reader, stream, start + 5, end, schema)
        if record is None:
            record = _read_exact(schemaless_reader, stream, start, end, schema)
        out.append(record)
    return pa.array(out, type=arrow_type(t))


def encode_avro(column: pa.Array, writer_schema: str, schema_id: int | None) -> pa.Array:
    """A struct column -> Avro binary values (a null struct -> a null value)."""
    from fastavro import schemaless_writer

    schema = parsed(writer_schema)
    header = b"" if schema_id is None else struct.pack(">bI", CONFLUENT_MAGIC, schema_id)
    stream = io.BytesIO()  # every value into one buffer, cut by the offsets
    ends = np.zeros(len(column) + 1, dtype=np.int32)
    for i, row in enumerate(column.to_pylist(maps_as_pydicts="strict")):
        if row is not None:
            stream.write(header)
            schemaless_writer(stream, schema, row)
        ends[i + 1] = stream.tell()
    validity = column.is_valid().buffers()[1] if column.null_count else None
    return pa.Array.from_buffers(
        pa.binary(), len(column), [validity, pa.py_buffer(ends), pa.py_buffer(stream.getbuffer())]
    )


def _read_exact(reader: Any, stream: io.BytesIO, start: int, end: int, schema: Any,
                reader_schema: Any = None) -> dict | None:
    """The record that the bytes start..end of ``stream`` hold exactly, else None
    (``schema`` the writer's; ``reader_schema`` the one to resolve it into, if another)."""
    stream.seek(start)
    try:
        record = reader(stream, schema, reader_schema)
    except Exception:  # noqa: BLE001 - any decode failure means "not this reading"
        return None
    return record if stream.tell() == end and isinstance(record, dict) else None
