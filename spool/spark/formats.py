"""Schema-aware ``key``/``value`` columns: ``valueFormat=json|avro`` (and ``keyFormat``).

Options (all optional; without them ``key`` and ``value`` stay binary):

* ``valueFormat``: ``json`` or ``avro``; ``valueSchema``: for ``json`` a Spark
  DDL string (``"id string, amount double"``), for ``avro`` an Avro schema
  (JSON text, its top level a record). ``keyFormat``/``keySchema`` do the
  same for ``key``.
* ``valueSchemaId`` / ``keySchemaId`` (avro, writing): frame each record the
  Confluent way (magic byte 0, the id as 4 big-endian bytes, then the Avro
  binary). There is no schema registry yet (Spool issue 20): the schema is
  always the one given in the options, the id is written as given.

Reading (batch and streaming), on the executors, over the Arrow batches the
fetch yields; the other Kafka columns are untouched:

* json, as Spark's ``from_json`` in its default PERMISSIVE mode (checked
  against Spark 4): a null or empty value -> null; a value that is not a JSON
  object, or not JSON -> a struct whose fields are all null; a field whose
  JSON does not fit its type -> that field null, the others kept (an
  array or map with one such element -> null); a string
  field given any other JSON -> that JSON's text; binary fields are base64;
  field names match case-sensitively, unknown fields are ignored; zone-less
  timestamps are read as UTC. Vectorized: the values are joined with
  newlines and parsed by ``pyarrow.json`` with the schema; a block it
  rejects is split in halves until the rejected values are found, and those
  (and values spanning several lines, and schemas with maps or binary)
  go through a per-value Python parser with the rules above.
* avro: ``fastavro`` per value. A value that starts with byte 0 and decodes
  exactly (every byte used) after a 5-byte Confluent header is taken as
  framed; otherwise as plain Avro binary (a plain record can begin with byte
  0, e.g. a null first union field: it decodes as plain when the framed
  reading does not use every byte). A value that decodes neither way -> null
  (spark-avro's PERMISSIVE mode; spark-avro's default is FAILFAST).
  Mapping as spark-avro documents it: record -> struct, enum -> string,
  fixed/bytes -> binary, array, map -> map<string, ...>, ``[null, T]`` ->
  nullable T, ``[int, long]`` -> long, ``[float, double]`` -> double, logical
  date, timestamp-millis/micros -> timestamp, local-timestamp-millis/micros
  -> timestamp_ntz, decimal -> decimal; other logical types read as their
  underlying type. Other unions and recursive records are refused.

Writing: a struct ``key``/``value`` column is encoded (json: as ``to_json``:
null fields left out, timestamps ``yyyy-MM-dd'T'HH:mm:ss.SSSZ`` in UTC,
binary base64; avro: ``valueSchema`` if given, else a schema derived from
the column's type as ``to_avro`` does). A null struct is written as a null
value (a tombstone).

Invalid options raise ``ValueError`` naming the option.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import math
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
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

FORMATS = ("json", "avro")
CONFLUENT_MAGIC = 0
_SMALL = 16  # below this many values a rejected block is parsed value by value
_BLOCK = 1 << 20  # pyarrow.json's block: faster than one block for all (measured); a longer
# value fails its block and goes through the per-value parser

# ---------------------------------------------------------------- Spark DDL


_ATOMIC: dict[str, DataType] = {
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
    "binary": BinaryType(),
    "boolean": BooleanType(),
    "bool": BooleanType(),
    "tinyint": ByteType(),
    "byte": ByteType(),
    "smallint": ShortType(),
    "short": ShortType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class _Ddl:
    """A recursive-descent parser for Spark's DDL: ``name type [NOT NULL] [COMMENT 'x'], ...``."""

    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"unexpected {text[pos:pos + 10]!r}")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok.lower() != want):
            raise ValueError(f"expected {want or 'more'}, got {tok!r}")
        self.i += 1
        return tok

    def name(self) -> str:
        tok = self.take()
        if tok.startswith("`"):
            return tok[1:-1].replace("``", "`")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\d+", tok):
            raise ValueError(f"expected a field name, got {tok!r}")
        return tok

    def fields(self, close: str | None) -> list[StructField]:
        out: list[StructField] = []
        if self.peek() == close:
            return out
        while True:
            name = self.name()
            if self.peek() == ":":
                self.take()
            out.append(StructField(name, self.type(), True))
            if self.peek() is not None and self.peek().lower() == "not":
                self.take()
                self.take("null")  # accepted; fields stay nullable (malformed values are null)
            if self.peek() is not None and self.peek().lower() == "comment":
                self.take()
                if not self.take().startswith("'"):
                    raise ValueError("COMMENT needs a quoted string")
            if self.peek() != ",":
                return out
            self.take(",")

    def type(self) -> DataType:
        word = self.take().lower()
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take("(")
                precision = int(self.take())
                if self.peek() == ",":
                    self.take(",")
                    scale = int(self.take())
                self.take(")")
            if not 0 < precision <= 38 or not 0 <= scale <= precision:
                raise ValueError(f"invalid decimal({precision}, {scale})")
            return DecimalType(precision, scale)
        if word in ("varchar", "char") and self.peek() == "(":
            self.take("(")
            self.take()
            self.take(")")
            return StringType()
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return ArrayType(element, True)
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return MapType(key, value, True)
        if word == "struct":
            self.take("<")
            fields = self.fields(">")
            self.take(">")
            return StructType(fields)
        if word in _ATOMIC:
            return _ATOMIC[word]
        raise ValueError(f"unknown type {word!r}")


def parse_ddl(text: str) -> StructType:
    """A Spark DDL string (``"id string, amount double"`` or ``"struct<...>"``) as a StructType."""
    parser = _Ddl(text)
    if parser.peek() is not None and parser.peek().lower() == "struct" and parser.tokens[1:2] == ["<"]:
        out = parser.type()
    else:
        out = StructType(parser.fields(None))
    if parser.peek() is not None:
        raise ValueError(f"unexpected {parser.peek()!r}")
    if not isinstance(out, StructType) or not out.fields:
        raise ValueError("no fields")
    return out


# ------------------------------------------------------------- Arrow types


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type Spark's Arrow path uses for ``t`` (timestamps in UTC microseconds)."""
    simple = {
        StringType: pa.string(),
        BinaryType: pa.binary(),
        BooleanType: pa.bool_(),
        ByteType: pa.int8(),
        ShortType: pa.int16(),
        IntegerType: pa.int32(),
        LongType: pa.int64(),
        FloatType: pa.float32(),
        DoubleType: pa.float64(),
        DateType: pa.date32(),
        TimestampType: pa.timestamp("us", tz="UTC"),
        TimestampNTZType: pa.timestamp("us"),
    }
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, ArrayType):
        return pa.list_(arrow_type(t.elementType))
    if isinstance(t, MapType):
        return pa.map_(arrow_type(t.keyType), arrow_type(t.valueType))
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType)) for f in t.fields])
    raise ValueError(f"type {t.simpleString()} is not supported")


def _json_wire_type(t: DataType) -> pa.DataType | None:
    """The type pyarrow.json reads ``t`` as (cast to ``arrow_type`` after), None if it cannot."""
    if isinstance(t, BinaryType | MapType):
        return None
    if isinstance(t, DateType):
        return pa.string()
    if isinstance(t, ArrayType):
        inner = _json_wire_type(t.elementType)
        return None if inner is None else pa.list_(inner)
    if isinstance(t, StructType):
        fields = []
        for f in t.fields:
            inner = _json_wire_type(f.dataType)
            if inner is None:
                return None
            fields.append(pa.field(f.name, inner))
        return pa.struct(fields)
    return arrow_type(t)


# ------------------------------------------------------------------- JSON


class _Bad(Exception):
    """A JSON value that does not fit its Spark type: the field becomes null."""


_INT_RANGE = {
    ByteType: (-(2**7), 2**7 - 1),
    ShortType: (-(2**15), 2**15 - 1),
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}


def _parse_timestamp(text: str, aware: bool) -> dt.datetime:
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    value = dt.datetime.fromisoformat(text)
    if not aware:
        return value.replace(tzinfo=None)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _from_json(value: Any, t: DataType) -> Any:
    """One parsed JSON value as Spark's JSON reader converts it to ``t`` (raises _Bad)."""
    if value is None:
        return None
    if isinstance(t, StringType):
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"))
    if isinstance(t, BooleanType):
        if isinstance(value, bool):
            return value
        raise _Bad
    if type(t) in _INT_RANGE:
        low, high = _INT_RANGE[type(t)]
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return value
        raise _Bad
    if isinstance(t, FloatType | DoubleType):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        raise _Bad
    if isinstance(t, DecimalType):
        if isinstance(value, bool) or not isinstance(value, int | float | str | decimal.Decimal):
            raise _Bad
        try:
            d = decimal.Decimal(str(value)).quantize(
                decimal.Decimal(1).scaleb(-t.scale), rounding=decimal.ROUND_HALF_UP
            )
        except (decimal.InvalidOperation, ValueError):
            raise _Bad from None
        if not d.is_finite() or len(d.as_tuple().digits) > t.precision:
            raise _Bad
        return d
    if isinstance(t, TimestampType | TimestampNTZType):
        aware = isinstance(t, TimestampType)
        if isinstance(value, int) and not isinstance(value, bool):  # seconds since the epoch
            stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=value)
            return stamp if aware else stamp.replace(tzinfo=None)
        if isinstance(value, str):
            try:
                return _parse_timestamp(value, aware)
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, DateType):
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip()[:10])
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, BinaryType):
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                raise _Bad from None
        raise _Bad
    if isinstance(t, ArrayType):
        if not isinstance(value, list):
            raise _Bad
        return [_from_json(v, t.elementType) for v in value]  # one bad element: all bad
    if isinstance(t, MapType):
        if not isinstance(value, dict):
            raise _Bad
        return [(k, _from_json(v, t.valueType)) for k, v in value.items()]
    if isinstance(t, StructType):
        if not isinstance(value, dict):
            raise _Bad
        return {f.name: _field(value.get(f.name), f.dataType) for f in t.fields}
    raise _Bad


def _field(value: Any, t: DataType) -> Any:
    try:
        return _from_json(value, t)
    except _Bad:
        return None


_DECODER = json.JSONDecoder()


def json_value(raw: bytes | None, t: StructType) -> dict | None:
    """One Kafka value as ``from_json(value, t)`` (PERMISSIVE) gives it, as a Python dict."""
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = "?"
    if not text:
        return None
    try:
        parsed, _ = _DECODER.raw_decode(text)  # Spark reads the first JSON value of the text
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return {f.name: None for f in t.fields}
    return {f.name: _field(parsed.get(f.name), f.dataType) for f in t.fields}


def _has_line_break(values: pa.Array) -> bool:
    """Whether any value holds a CR or LF (such a value cannot be one line of the input)."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)
    start, end = offsets[values.offset], offsets[values.offset + len(values)]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[start:end]
    return bool(np.count_nonzero(data == 10) or np.count_nonzero(data == 13))


def _joined(values: pa.Array) -> pa.Buffer:
    """The values, each followed by a newline, as one buffer (no per-value Python objects)."""
    lines = pc.binary_join_element_wise(values, pa.scalar(b""), pa.scalar(b"\n"))
    end = np.frombuffer(lines.buffers()[1], dtype=np.int32)[len(lines)]
    return lines.buffers()[2][:end]


# ------------------------------------------------------------------- Avro


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


def _avro_to_spark(schema: Any, names: dict[str, Any], namespace: str | None, path: tuple) -> tuple[DataType, Any]:
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
        converted = [_avro_to_spark(b, names, namespace, path) for b in branches]
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
        return _avro_to_spark(plain if kind in ("fixed",) else kind, names, namespace, path)
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
            t, reader = _avro_to_spark(f["type"], names, ns, (*path, f["name"]))
            fields.append(StructField(f["name"], t, True))
            reader_fields.append({**f, "type": reader})
        out = StructType(fields)
        names[full] = (out, full)
        return out, {**schema, "fields": reader_fields}
    if kind == "array":
        t, reader = _avro_to_spark(schema["items"], names, namespace, path)
        return ArrayType(t, True), {**schema, "items": reader}
    if kind == "map":
        t, reader = _avro_to_spark(schema["values"], names, namespace, path)
        return MapType(StringType(), t, True), {**schema, "values": reader}
    if isinstance(kind, str | list) and kind not in ("record", "enum", "fixed", "array", "map"):
        return _avro_to_spark(kind, names, namespace, path)
    raise ValueError(f"invalid Avro schema {schema!r}")


def _spark_to_avro(t: DataType, name: str, namespace: str) -> Any:
    """An Avro schema for Spark type ``t``, as ``to_avro`` derives one (nullable -> [T, null])."""
    if isinstance(t, StructType):
        ns = f"{namespace}.{name}" if namespace else name
        return {
            "type": "record",
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "fields": [
                {"name": f.name, "type": [_spark_to_avro(f.dataType, f.name, ns), "null"]}
                for f in t.fields
            ],
        }
    if isinstance(t, ArrayType):
        return {"type": "array", "items": [_spark_to_avro(t.elementType, name, namespace), "null"]}
    if isinstance(t, MapType):
        if not isinstance(t.keyType, StringType):
            raise ValueError("Avro maps need string keys")
        return {"type": "map", "values": [_spark_to_avro(t.valueType, name, namespace), "null"]}
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
def _parsed(schema_json: str) -> Any:
    import fastavro

    return fastavro.parse_schema(json.loads(schema_json))


# ----------------------------------------------------------------- formats


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (``key`` or ``value``) is encoded: everything here pickles."""

    column: str  # "key" | "value"
    kind: str  # "json" | "avro"
    spark_type: StructType
    avro_writer: str | None = None  # the Avro schema given or derived, JSON text
    avro_reader: str | None = None  # the same without the logical types Spark does not map
    schema_id: int | None = None

    @property
    def arrow(self) -> pa.StructType:
        return arrow_type(self.spark_type)

    # -------------------------------------------------------------- read

    def decode(self, values: pa.Array) -> pa.Array:
        """Binary values -> the struct column (same length, same order)."""
        if self.kind == "json":
            return self._decode_json(values)
        return self._decode_avro(values)

    def _slow(self, values: pa.Array) -> pa.Array:
        t = self.spark_type
        return pa.array([json_value(v, t) for v in values.to_pylist()], type=self.arrow)

    def _decode_json(self, values: pa.Array) -> pa.Array:
        wire = _json_wire_type(self.spark_type)
        if wire is None or len(values) == 0:
            return self._slow(values)
        if values.null_count == 0 and not _has_line_break(values):
            if pc.min(pc.binary_length(values)).as_py() > 0:
                return self._bisect(values, wire)
        valid = pc.fill_null(pc.greater(pc.binary_length(values), 0), False)
        one_line = pc.invert(pc.fill_null(pc.match_substring_regex(values, "[\r\n]"), True))
        fast = pc.and_(valid, one_line)
        idx = np.arange(len(values))
        fast_np = fast.to_numpy(zero_copy_only=False)
        fast_idx, slow_idx = idx[fast_np], idx[~fast_np]
        parts = [self._bisect(values.take(fast_idx), wire), self._slow(values.take(slow_idx))]
        order = np.concatenate([fast_idx, slow_idx])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return pa.concat_arrays(parts).take(pa.array(inverse))

    def _bisect(self, values: pa.Array, wire: pa.StructType) -> pa.Array:
        n = len(values)
        if n == 0:
            return pa.array([], type=self.arrow)
        if n <= _SMALL:
            return self._slow(values)
        try:
            out = self._read_json(values, wire)
            if len(out) == n:
                return out
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
        half = n // 2
        return pa.concat_arrays([self._bisect(values[:half], wire), self._bisect(values[half:], wire)])

    def _read_json(self, values: pa.Array, wire: pa.StructType) -> pa.Array:
        buf = _joined(values)
        table = pj.read_json(
            pa.BufferReader(buf),
            read_options=pj.ReadOptions(use_threads=False, block_size=_BLOCK),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema(list(wire)), unexpected_field_behavior="ignore"
            ),
        )
        arr = table.select([f.name for f in wire]).to_struct_array().combine_chunks()
        if not isinstance(arr, pa.StructArray):  # zero chunks
            arr = pa.array([], type=wire)
        return arr.cast(self.arrow) if wire != self.arrow else arr

    def _decode_avro(self, values: pa.Array) -> pa.Array:
        from fastavro import schemaless_reader

        schema = _parsed(self.avro_reader)
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
        return pa.array(out, type=self.arrow)

    # ------------------------------------------------------------- write

    def encode(self, column: pa.Array) -> pa.Array:
        """The struct column -> binary values (null struct -> null value)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if not pa.types.is_struct(column.type):
            raise ValueError(
                f"{self.column}Format={self.kind} writes a struct {self.column} column, "
                f"not {column.type}"
            )
        if self.kind == "json":
            return _json_column(column).cast(pa.binary())
        rows = column.to_pylist()
        from fastavro import schemaless_writer

        schema = _parsed(self.avro_writer)
        header = b"" if self.schema_id is None else struct.pack(">bI", CONFLUENT_MAGIC, self.schema_id)
        out = []
        for r in rows:
            if r is None:
                out.append(None)
                continue
            bio = io.BytesIO()
            bio.write(header)
            schemaless_writer(bio, schema, _avro_datum(r, column.type))
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


def _json_text(value: Any, t: pa.DataType) -> Any:
    """A Python value of Arrow type ``t`` as to_json writes it, as a JSON-able object
    (the per-value path, for values inside arrays and maps)."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {
            f.name: _json_text(value[f.name], f.type) for f in t if value.get(f.name) is not None
        }
    if pa.types.is_map(t):
        return {str(k): _json_text(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_json_text(v, t.value_type) for v in value]
    if pa.types.is_timestamp(t):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if t.tz is not None else "")
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return base64.b64encode(value).decode()
    if pa.types.is_floating(t):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return _Raw(_java_float(value, pa.types.is_float32(t)))
    if pa.types.is_decimal(t):
        return _Raw(str(value))
    return value


def _java_float(value: float, single: bool) -> str:
    """A finite float as Java's Double/Float.toString writes it (Spark's to_json): plain
    for 1e-3 <= |x| < 1e7 (with a ".0" if whole), else ``d.dddE<n>``; shortest digits."""
    text = str(np.float32(value)) if single else repr(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        if "e" in text:  # float32's str switches to exponents at other bounds
            text = format(decimal.Decimal(text), "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    shown = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


class _Raw(str):
    """Text written into the JSON as is (decimals keep their scale, floats their width)."""


def _dump(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dump(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_NEEDS_ESCAPE = '["\\\x00-\x1f]'


def _join(*parts: Any) -> pa.Array:
    """Concatenate strings element-wise (null if any part is null)."""
    return pc.binary_join_element_wise(*parts, pa.scalar(""))


def _json_column(arr: pa.Array) -> pa.Array:
    """Each value of ``arr`` as to_json writes it (string; null stays null), column-wise:
    only strings that need escaping, binary, and arrays/maps go value by value."""
    t = arr.type
    n = len(arr)
    if pa.types.is_struct(t):
        # ',"name":value' per field, "" where null (null fields are left out), all joined,
        # then the first comma dropped. (binary_join_element_wise's null_handling="skip"
        # drops whole rows where every input is null: pyarrow 26 returns a shorter array.)
        parts = [
            pc.fill_null(
                _join(pa.scalar("," + json.dumps(f.name, ensure_ascii=False) + ":"), _json_column(child)),
                "",
            )
            for f, child in zip(t, arr.flatten(), strict=True)
        ]
        body = _join(*parts) if parts else pa.array([""] * n)
        body = pc.replace_substring_regex(body, "^,", "")
        return pc.if_else(arr.is_valid(), _join("{", body, "}"), pa.scalar(None, pa.string()))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not pc.any(pc.match_substring_regex(arr, _NEEDS_ESCAPE)).as_py():
            return _join('"', arr.cast(pa.string()), '"')
    elif pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        return arr.cast(pa.string())
    elif pa.types.is_date(t):
        return _join('"', arr.cast(pa.date32()).cast(pa.string()), '"')
    elif pa.types.is_timestamp(t):
        ms = arr.cast(pa.timestamp("ms", tz=t.tz), safe=False)
        zone = 'Z"' if t.tz is not None else '"'
        return _join('"', pc.strftime(ms, "%Y-%m-%dT%H:%M:%S"), zone)
    elif pa.types.is_floating(t):
        text = arr.cast(pa.string())
        whole = pc.fill_null(pc.match_substring_regex(text, "^-?[0-9]+$"), False)
        text = pc.if_else(whole, _join(text, ".0"), text)  # 1.0 as Java writes it, not 1
        size = pc.abs(arr)
        odd = pc.fill_null(
            pc.or_(
                pc.or_(pc.greater_equal(size, 1e7), pc.is_nan(arr)),
                pc.and_(pc.less(size, 1e-3), pc.not_equal(size, 0)),
            ),
            False,
        )  # NaN, infinities and exponent notation: value by value
        if pc.any(odd).as_py():
            rare = [_dump(_json_text(v, t)) for v in pc.filter(arr, odd).to_pylist()]
            text = pc.replace_with_mask(text, odd, pa.array(rare, pa.string()))
        return text
    return pa.array(
        [None if v is None else _dump(_json_text(v, t)) for v in arr.to_pylist()], pa.string()
    )


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


# ----------------------------------------------------------- options, batches


def _opt(opts: Mapping[str, str], name: str) -> str | None:
    lowered = {k.lower(): v for k, v in opts.items()}
    value = lowered.get(name.lower())
    return None if value is None else str(value)


def parse_column_format(
    opts: Mapping[str, str], column: str, *, for_read: bool, column_type: DataType | None = None
) -> ColumnFormat | None:
    """``<column>Format``/``<column>Schema``/``<column>SchemaId`` -> a ColumnFormat, or None.

    ``column_type`` (writing) is the DataFrame's column type: json writes need no schema
    option, avro writes derive one from it when ``<column>Schema`` is absent."""
    kind = _opt(opts, f"{column}Format")
    schema_text = _opt(opts, f"{column}Schema")
    id_text = _opt(opts, f"{column}SchemaId")
    if kind is None:
        for name, given in ((f"{column}Schema", schema_text), (f"{column}SchemaId", id_text)):
            if given is not None:
                raise ValueError(f"option {name} needs the option {column}Format")
        return None
    kind = kind.strip().lower()
    if kind not in FORMATS:
        raise ValueError(f"option {column}Format must be json or avro, got {kind!r}")
    schema_id = None
    if id_text is not None:
        if kind != "avro":
            raise ValueError(f"option {column}SchemaId is only for {column}Format=avro")
        try:
            schema_id = int(id_text)
        except ValueError:
            schema_id = -1
        if not 0 <= schema_id < 2**31:
            raise ValueError(f"option {column}SchemaId must be a schema id (0..2^31-1), got {id_text!r}")
    if schema_text is None:
        if for_read or column_type is None:
            raise ValueError(f"option {column}Schema is required with {column}Format={kind}")
        if not isinstance(column_type, StructType):
            raise ValueError(
                f"option {column}Format={kind} writes a struct {column} column, "
                f"not {column_type.simpleString()}"
            )
        if kind == "json":
            return ColumnFormat(column, kind, column_type)
        writer = json.dumps(_spark_to_avro(column_type, "topLevelRecord", ""))
        spark_type, reader = column_type, writer
        _check_avro(writer, column)
        return ColumnFormat(column, kind, spark_type, writer, reader, schema_id)
    if kind == "json":
        try:
            return ColumnFormat(column, kind, parse_ddl(schema_text))
        except ValueError as exc:
            raise ValueError(f"option {column}Schema is not a Spark DDL schema: {exc}") from None
    try:
        avro = json.loads(schema_text)
    except ValueError:
        raise ValueError(f"option {column}Schema is not Avro schema JSON: {schema_text[:80]!r}") from None
    try:
        spark_type, reader = _avro_to_spark(avro, {}, None, ())
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"option {column}Schema: {exc}") from None
    if not isinstance(spark_type, StructType):
        raise ValueError(f"option {column}Schema must be an Avro record, got {avro!r}")
    writer, reader_text = json.dumps(avro), json.dumps(reader)
    _check_avro(writer, column)
    _check_avro(reader_text, column)
    return ColumnFormat(column, kind, spark_type, writer, reader_text, schema_id)


def _check_avro(schema_json: str, column: str) -> None:
    try:
        _parsed(schema_json)
    except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
        raise ValueError(f"option {column}Schema is not a valid Avro schema: {exc}") from None


def read_schema(base: StructType, formats: list[ColumnFormat]) -> StructType:
    """Spark's Kafka schema with the formatted columns' types put in."""
    by_column = {f.column: f.spark_type for f in formats}
    return StructType(
        [StructField(f.name, by_column.get(f.name, f.dataType), True) for f in base.fields]
    )


def decode_batch(batch: pa.RecordBatch, formats: list[ColumnFormat]) -> pa.RecordBatch:
    """Replace each formatted binary column of a fetched batch by its decoded struct."""
    columns, fields = list(batch.columns), list(batch.schema)
    for fmt in formats:
        i = batch.schema.get_field_index(fmt.column)
        columns[i] = fmt.decode(columns[i])
        fields[i] = pa.field(fmt.column, columns[i].type)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def decode_batches(batches: Iterator[pa.RecordBatch], formats: list[ColumnFormat]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield decode_batch(batch, formats)


def encode_batches(batches: Iterator[pa.RecordBatch], formats: list[ColumnFormat]) -> Iterator[pa.RecordBatch]:
    """Replace each formatted struct column of the rows to write by its encoded bytes."""
    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        columns = list(batch.columns)
        for fmt in formats:
            if fmt.column in names:
                i = names.index(fmt.column)
                columns[i] = fmt.encode(columns[i])
        yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
