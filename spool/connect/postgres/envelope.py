"""Debezium's change-event envelope and the Connect schemas its events use (shared by
the PostgreSQL source and the JDBC sink, which agree through these names).

A change event for table ``<schema>.<table>`` of a connector with ``topic.prefix`` P goes
to topic ``P.<schema>.<table>`` with

- key: a struct ``P.<schema>.<table>.Key`` of the primary key's columns (None when the
  table has no primary key);
- value: a struct ``P.<schema>.<table>.Envelope`` (version 2) with Debezium's fields in
  Debezium's order: ``before`` and ``after`` (optional structs ``P.<schema>.<table>.Value``,
  one field per column), ``source`` (``io.debezium.connector.postgresql.Source``), ``op``
  (``"c"`` create, ``"u"`` update, ``"d"`` delete, ``"r"`` read in a snapshot, ``"t"``
  truncate), ``ts_ms``/``ts_us``/``ts_ns`` (when the connector processed the event) and
  ``transaction`` (optional, None: transaction metadata is not emitted);
- after a ``"d"`` event, a tombstone (value None, same key) when ``tombstones.on.delete``.

``before`` holds the old row on updates and deletes only as far as the table's REPLICA
IDENTITY logs it: the key columns by default, every column with ``REPLICA IDENTITY FULL``
(as Debezium).

Column schemas use Debezium's semantic type names (``io.debezium.time.*``,
``io.debezium.data.*``); the constants below are those names. ``VariableScaleDecimal``
(unconstrained ``numeric``) is a struct ``{scale: int32, value: bytes}`` with the unscaled
value big-endian two's complement, as Debezium: ``variable_scale_decimal(d)`` makes one,
``decimal_from_variable_scale(s)`` reads one back.
"""

from __future__ import annotations

import decimal
import re
from typing import Any

from spool.connect import data
from spool.connect.data import Schema, Struct

# ---- semantic types (Debezium's names)
DATE = "io.debezium.time.Date"  # int32 days since the epoch
TIME = "io.debezium.time.Time"  # int32 ms of the day (time(0..3))
MICRO_TIME = "io.debezium.time.MicroTime"  # int64 us of the day (time(4..6))
TIMESTAMP = "io.debezium.time.Timestamp"  # int64 ms since the epoch (timestamp(0..3))
MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"  # int64 us since the epoch
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"  # ISO-8601 string, UTC: ...Z
ZONED_TIME = "io.debezium.time.ZonedTime"  # ISO-8601 time string with offset
MICRO_DURATION = "io.debezium.time.MicroDuration"  # int64 us (a month = 30.4375 days)
JSON = "io.debezium.data.Json"  # string
XML = "io.debezium.data.Xml"  # string
UUID = "io.debezium.data.Uuid"  # string
BITS = "io.debezium.data.Bits"  # bytes, parameter length
ENUM = "io.debezium.data.Enum"  # string, parameter allowed
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
DECIMAL = data.DECIMAL  # org.apache.kafka.connect.data.Decimal, parameter scale

SOURCE_SCHEMA_NAME = "io.debezium.connector.postgresql.Source"
ENVELOPE_VERSION = 2
OP_CREATE, OP_UPDATE, OP_DELETE, OP_READ, OP_TRUNCATE = "c", "u", "d", "r", "t"
SNAPSHOT_VALUES = ("true", "first", "first_in_data_collection", "last_in_data_collection",
                   "last", "false", "incremental")
CONNECTOR = "postgresql"


def variable_scale_decimal_schema(*, optional: bool = True) -> Schema:
    return data.struct(VARIABLE_SCALE_DECIMAL, [("scale", data.INT32), ("value", data.BYTES)],
                       optional=optional, version=1,
                       doc="Variable scaled decimal")


def variable_scale_decimal(value: decimal.Decimal, schema: Schema | None = None) -> Struct:
    """``value`` as Debezium's VariableScaleDecimal struct."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int), "NaN/Infinity have no VariableScaleDecimal"
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = -exponent
    if scale < 0:  # 1E+3: scale 0, unscaled 1000
        unscaled, scale = unscaled * 10 ** -scale, 0
    return Struct(schema or variable_scale_decimal_schema(),
                  {"scale": scale, "value": unscaled_bytes(unscaled)})


def decimal_from_variable_scale(s: dict[str, Any]) -> decimal.Decimal:
    unscaled = int.from_bytes(s["value"], "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-int(s["scale"]))


def unscaled_bytes(unscaled: int) -> bytes:
    """Big-endian two's complement in the fewest bytes (Java's BigInteger.toByteArray)."""
    n = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(n, "big", signed=True)


def source_schema() -> Schema:
    """``io.debezium.connector.postgresql.Source``, Debezium's fields and order."""
    snapshot = Schema("string", optional=True, default="false", name=ENUM, version=1,
                      parameters=(("allowed", ",".join(SNAPSHOT_VALUES)),))
    return data.struct(SOURCE_SCHEMA_NAME, [
        ("version", data.STRING), ("connector", data.STRING), ("name", data.STRING),
        ("ts_ms", data.INT64), ("snapshot", snapshot), ("db", data.STRING),
        ("sequence", data.OPTIONAL_STRING), ("ts_us", data.OPTIONAL_INT64),
        ("ts_ns", data.OPTIONAL_INT64), ("schema", data.STRING), ("table", data.STRING),
        ("txId", data.OPTIONAL_INT64), ("lsn", data.OPTIONAL_INT64),
        ("xmin", data.OPTIONAL_INT64)])


SOURCE_SCHEMA = source_schema()

TRANSACTION_SCHEMA = data.struct("event.block", [
    ("id", data.STRING), ("total_order", data.INT64),
    ("data_collection_order", data.INT64)], optional=True, version=1)


def topic_name(prefix: str, schema: str, table: str) -> str:
    """``<prefix>.<schema>.<table>``, each character Kafka refuses in a topic name replaced
    by ``_`` (as Debezium's topic naming strategy)."""
    return _INVALID_TOPIC_CHARS.sub("_", f"{prefix}.{schema}.{table}")


_INVALID_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def key_schema(prefix: str, schema: str, table: str,
               columns: list[tuple[str, Schema]]) -> Schema | None:
    """The key struct of the primary key's ``columns`` (name, schema), None without one."""
    if not columns:
        return None
    return data.struct(f"{topic_name(prefix, schema, table)}.Key", columns)


def row_schema(prefix: str, schema: str, table: str,
               columns: list[tuple[str, Schema]]) -> Schema:
    """``before``/``after``'s struct: every column, optional as the struct itself."""
    return data.struct(f"{topic_name(prefix, schema, table)}.Value", columns, optional=True)


def envelope_schema(prefix: str, schema: str, table: str, row: Schema) -> Schema:
    return data.struct(f"{topic_name(prefix, schema, table)}.Envelope", [
        ("before", row), ("after", row), ("source", SOURCE_SCHEMA),
        ("op", data.STRING), ("ts_ms", data.OPTIONAL_INT64), ("ts_us", data.OPTIONAL_INT64),
        ("ts_ns", data.OPTIONAL_INT64), ("transaction", TRANSACTION_SCHEMA)],
        version=ENVELOPE_VERSION)


def source_struct(*, version: str, name: str, db: str, schema: str, table: str,
                  ts_us: int, snapshot: str = "false", sequence: str | None = None,
                  tx_id: int | None = None, lsn: int | None = None,
                  xmin: int | None = None) -> Struct:
    """The ``source`` block; ``ts_us`` is when the change was committed (us since epoch)."""
    return Struct(SOURCE_SCHEMA, {
        "version": version, "connector": CONNECTOR, "name": name, "ts_ms": ts_us // 1000,
        "snapshot": snapshot, "db": db, "sequence": sequence, "ts_us": ts_us,
        "ts_ns": ts_us * 1000, "schema": schema, "table": table, "txId": tx_id, "lsn": lsn,
        "xmin": xmin})


def envelope(schema: Schema, op: str, before: Struct | None, after: Struct | None,
             source: Struct, now_us: int) -> Struct:
    return Struct(schema, {"before": before, "after": after, "source": source, "op": op,
                           "ts_ms": now_us // 1000, "ts_us": now_us, "ts_ns": now_us * 1000,
                           "transaction": None})


def is_envelope(schema: Schema | None) -> bool:
    """Whether a value schema is a Debezium change-event envelope (what the sink unwraps)."""
    return (schema is not None and schema.type == "struct" and schema.name is not None
            and schema.name.endswith(".Envelope") and schema.field("op") is not None
            and schema.field("after") is not None)


__all__ = ["topic_name", "key_schema", "row_schema", "envelope_schema", "source_struct",
           "envelope", "is_envelope", "variable_scale_decimal", "decimal_from_variable_scale",
           "variable_scale_decimal_schema", "SOURCE_SCHEMA"]
