"""Spark DDL strings as Spark types, and Spark types as the Arrow types Spark's Arrow path uses.

``parse_ddl("id string, amount double")`` -> ``StructType``, with no JVM: a data
source's ``schema()`` runs in a Python worker without a SparkContext, where
``StructType.fromDDL`` is not available. Accepted: ``name type`` or
``name: type`` fields separated by commas (or one ``struct<...>``), backquoted
names, ``NOT NULL`` (accepted, fields stay nullable: a malformed value reads
as null) and ``COMMENT '...'``; types string/varchar(n)/char(n), binary,
boolean, tinyint/byte, smallint/short, int/integer, bigint/long, float/real,
double, decimal/dec/numeric[(p[, s])], date, timestamp[_ltz], timestamp_ntz,
array<T>, map<K, V>, struct<...>. Anything else raises ``ValueError``.

``arrow_type``: timestamps are UTC microseconds (``timestamp_ntz``: no zone),
dates ``date32``, decimals ``decimal128``.
"""

from __future__ import annotations

import re

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
            if name in {f.name for f in out}:
                raise ValueError(f"field {name!r} appears twice")
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
