"""Connect's data model: ``Schema`` and values, as Kafka Connect's ``org.apache.kafka.connect.data``.

A record's key and value are each a ``(schema, value)`` pair. ``schema`` may be None
(schemaless data: JSON without schemas, a String or ByteArray converter's input). With a
schema, the value is a Python value of the schema's type:

=========  ===========================  =========  ==============================
type        Python value                 type        Python value
=========  ===========================  =========  ==============================
int8..64   int                           string      str
float32/64 float                         bytes       bytes
boolean    bool                          array       list (of value_schema's values)
map        dict (key_schema -> value)    struct      ``Struct`` (a dict of field -> value)
=========  ===========================  =========  ==============================

Logical types are a primitive schema with a ``name``, as in Kafka: ``Decimal`` (bytes,
parameter ``scale``; value ``decimal.Decimal``), ``Date`` (int32 days; ``datetime.date``),
``Time`` (int32 ms of the day; ``datetime.time``), ``Timestamp`` (int64 ms;
``datetime.datetime``, UTC). Converters turn these into their wire forms.

``None`` is a value only of an ``optional`` schema. ``validate(schema, value)`` raises
``DataError`` naming the field path when a value does not fit. Schemas are immutable and
compare by content. ``SchemaBuilder``-style helpers: ``struct(name, [field(...)])``,
``optional(schema)``, and the constants ``INT8`` ... ``OPTIONAL_STRING``.
"""

from __future__ import annotations

import datetime
import decimal
from dataclasses import dataclass, replace
from typing import Any

PRIMITIVES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string",
              "bytes")
TYPES = PRIMITIVES + ("array", "map", "struct")

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"


class DataError(ValueError):
    """Kafka Connect's DataException: a value that does not fit its schema, or data a
    converter cannot read or write."""


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    type: str
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()
    fields: tuple[Field, ...] = ()  # struct
    key_schema: Schema | None = None  # map
    value_schema: Schema | None = None  # array, map

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise DataError(f"unknown schema type {self.type!r}")

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def params(self) -> dict[str, str]:
        return dict(self.parameters)


class Struct(dict):
    """A struct value: field name -> value, in the schema's field order. ``schema`` is
    attached so a struct can be converted without its schema passed alongside."""

    __slots__ = ("schema",)

    def __init__(self, schema: Schema, values: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.schema = schema
        for f in schema.fields:
            self[f.name] = (values or {}).get(f.name, f.schema.default)


def field(name: str, schema: Schema) -> tuple[str, Schema]:
    return (name, schema)


def struct(name: str | None, fields: list[tuple[str, Schema]], *, optional: bool = False,
           version: int | None = None, doc: str | None = None) -> Schema:
    return Schema("struct", optional=optional, name=name, version=version, doc=doc,
                  fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)))


def optional(schema: Schema) -> Schema:
    return replace(schema, optional=True)


def array(value_schema: Schema, *, optional: bool = False) -> Schema:
    return Schema("array", optional=optional, value_schema=value_schema)


def map_of(key_schema: Schema, value_schema: Schema, *, optional: bool = False) -> Schema:
    return Schema("map", optional=optional, key_schema=key_schema, value_schema=value_schema)


def decimal_schema(scale: int, *, optional: bool = False) -> Schema:
    return Schema("bytes", optional=optional, name=DECIMAL, version=1,
                  parameters=(("scale", str(scale)),))


INT8, INT16, INT32, INT64 = (Schema(t) for t in ("int8", "int16", "int32", "int64"))
FLOAT32, FLOAT64, BOOLEAN = Schema("float32"), Schema("float64"), Schema("boolean")
STRING, BYTES = Schema("string"), Schema("bytes")
OPTIONAL_INT8, OPTIONAL_INT16, OPTIONAL_INT32, OPTIONAL_INT64 = (
    Schema(t, optional=True) for t in ("int8", "int16", "int32", "int64"))
OPTIONAL_FLOAT32 = Schema("float32", optional=True)
OPTIONAL_FLOAT64 = Schema("float64", optional=True)
OPTIONAL_BOOLEAN = Schema("boolean", optional=True)
OPTIONAL_STRING, OPTIONAL_BYTES = Schema("string", optional=True), Schema("bytes", optional=True)
DATE_SCHEMA = Schema("int32", name=DATE, version=1)
TIME_SCHEMA = Schema("int32", name=TIME, version=1)
TIMESTAMP_SCHEMA = Schema("int64", name=TIMESTAMP, version=1)

_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_LOGICAL_PYTHON = {DECIMAL: decimal.Decimal, DATE: datetime.date, TIME: datetime.time,
                   TIMESTAMP: datetime.datetime}


def validate(schema: Schema, value: Any, path: str = "") -> None:
    """Raise ``DataError`` (naming the field path) unless ``value`` fits ``schema``."""
    where = path or "value"
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataError(f"{where}: null for a required {schema.type} schema")
    logical = _LOGICAL_PYTHON.get(schema.name or "")
    if logical is not None:
        if not isinstance(value, logical) or (logical is datetime.date
                                              and isinstance(value, datetime.datetime)):
            raise DataError(f"{where}: {type(value).__name__} for logical type {schema.name}")
        return
    t = schema.type
    if t in _INT_RANGES:
        bits = _INT_RANGES[t]
        if isinstance(value, bool) or not isinstance(value, int) \
                or not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise DataError(f"{where}: {value!r} is not an {t}")
    elif t in ("float32", "float64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataError(f"{where}: {value!r} is not a {t}")
    elif t == "boolean":
        if not isinstance(value, bool):
            raise DataError(f"{where}: {value!r} is not a boolean")
    elif t == "string":
        if not isinstance(value, str):
            raise DataError(f"{where}: {type(value).__name__} is not a string")
    elif t == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(f"{where}: {type(value).__name__} is not bytes")
    elif t == "array":
        if not isinstance(value, list):
            raise DataError(f"{where}: {type(value).__name__} is not an array")
        for i, v in enumerate(value):
            validate(schema.value_schema, v, f"{where}[{i}]")  # type: ignore[arg-type]
    elif t == "map":
        if not isinstance(value, dict):
            raise DataError(f"{where}: {type(value).__name__} is not a map")
        for k, v in value.items():
            validate(schema.key_schema, k, f"{where}.<key>")  # type: ignore[arg-type]
            validate(schema.value_schema, v, f"{where}[{k!r}]")  # type: ignore[arg-type]
    elif t == "struct":
        if not isinstance(value, dict):
            raise DataError(f"{where}: {type(value).__name__} is not a struct")
        extra = set(value) - {f.name for f in schema.fields}
        if extra:
            raise DataError(f"{where}: fields {sorted(extra)} are not in the schema")
        for f in schema.fields:
            validate(f.schema, value.get(f.name), f"{path + '.' if path else ''}{f.name}")


__all__ = ["Schema", "Field", "Struct", "DataError", "validate", "struct", "field", "optional",
           "array", "map_of", "decimal_schema"]
