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
schema id is not checked (no schema registry yet: Spool issue 20). A value
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


def decode_avro(values: pa.Array, reader_schema: str, t: StructType) -> pa.Array:
    """Binary Avro values (framed or plain) -> a struct column of Spark type ``t``."""
    from fastavro import schemaless_reader

    schema = parsed(reader_schema)
    out = []
    for raw in values.to_pylist():
        if raw is None:
            out.append(None)
            continue
        record = None
        if len(raw) >= 5 and raw[0] == CONFLUENT_MAGIC:
            record = _read_exact(schemaless_reader, raw, 5, schema)
        if record is None:
            record = _read_exact(schemaless_reader, raw, 0, schema)
        out.append(record)
    return pa.array(out, type=arrow_type(t))


def encode_avro(column: pa.Array, writer_schema: str, schema_id: int | None) -> pa.Array:
    """A struct column -> Avro binary values (a null struct -> a null value)."""
    from fastavro import schemaless_writer

    schema = parsed(writer_schema)
    header = b"" if schema_id is None else struct.pack(">bI", CONFLUENT_MAGIC, schema_id)
    t = column.type
    out = []
    for row in column.to_pylist():
        if row is None:
            out.append(None)
            continue
        bio = io.BytesIO()
        bio.write(header)
        schemaless_writer(bio, schema, _avro_datum(row, t))
        out.append(bio.getvalue())
    return pa.array(out, type=pa.binary())


def _read_exact(reader: Any, raw: bytes, start: int, schema: Any) -> dict | None:
    bio = io.BytesIO(raw)
    bio.seek(start)
    try:
        record = reader(bio, schema, None)
    except Exception:  # noqa: BLE001 - any decode failure means "not this reading"
        return None
    return record if bio.tell() == len(raw) and isinstance(record, dict) else None


def _avro_datum(value: Any, t: pa.DataType) -> Any:
    """Arrow's Python value -> what fastavro writes (maps come from Arrow as pairs)."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _avro_datum(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        return {k: _avro_datum(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_avro_datum(v, t.value_type) for v in value]
    return value
