"""SQL for the JDBC sink (``sink.py``): PostgreSQL names, column types, values, statements.

- ``TableId.parse(name, lower)``: ``table.name.format``'s result, ``table`` or
  ``schema.table`` (schema ``public`` by default); ``.sql`` is its quoted form.
  Identifiers are always quoted in the SQL written; with ``quote.identifiers=false``
  (the default) they are lower-cased first, which is what PostgreSQL does to unquoted
  names (Debezium's PostgreSQL dialect), yet reserved words (``user``, ``order``) work.
- ``column_type(schema)``: the column type a Connect schema becomes on table creation,
  as the Debezium JDBC sink's PostgreSQL dialect: int8/int16 ``smallint``, int32
  ``integer``, int64 ``bigint``, float32 ``real``, float64 ``double precision``,
  ``boolean``, string ``text``, bytes ``bytea``, Kafka's Decimal and Debezium's
  VariableScaleDecimal ``numeric`` (``numeric(p,s)`` when the schema carries
  ``connect.decimal.precision``), Kafka's and Debezium's Date ``date``, Time/MicroTime/
  NanoTime ``time``, Timestamp/MicroTimestamp/NanoTimestamp ``timestamp``,
  ZonedTimestamp ``timestamptz``, ZonedTime ``timetz``, MicroDuration/Interval
  ``interval``, Bits ``bit varying(length)``, ``io.debezium.data.Json`` ``jsonb`` (Debezium writes ``json``; ``jsonb``
  has equality, so tables can be compared and keyed), Uuid ``uuid``, Xml ``xml``, arrays
  ``<element>[]``, maps and other structs ``jsonb``. ``__debezium.source.column.type``
  (``column.propagate.source.type``) wins when present. A schemaless value's column type
  is guessed from its Python type (``guess_type``).
- ``to_db(schema, value)``: a Connect value as the psycopg parameter for that column
  (Debezium's epoch-based temporal ints as ``date``/``time``/``datetime``; its infinity
  markers as ``infinity``/``-infinity``, and dates Python cannot hold (BC, after 9999) as
  PostgreSQL's text for them; unscaled decimal bytes as ``Decimal``, maps/structs as JSON
  text). Strings are sent untyped, so
  PostgreSQL reads them as the column's type (uuid, jsonb, timestamptz...).
- ``read_table(conn, table)``: the table's columns and types, or None when it is missing.
- ``create_table``, ``add_columns``, ``insert``, ``upsert``, ``update``, ``delete``,
  ``truncate``: the statements (``%s`` placeholders, psycopg's style).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from dataclasses import dataclass
from typing import Any

from spool.connect import data
from spool.connect.data import Schema
from spool.connect.postgres import envelope

EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1)

DBZ_DATE, DBZ_TIME, DBZ_MICRO_TIME = envelope.DATE, envelope.TIME, envelope.MICRO_TIME
DBZ_TIMESTAMP, DBZ_MICRO_TIMESTAMP = envelope.TIMESTAMP, envelope.MICRO_TIMESTAMP
DBZ_ZONED_TIMESTAMP, DBZ_ZONED_TIME = envelope.ZONED_TIMESTAMP, envelope.ZONED_TIME
DBZ_MICRO_DURATION, DBZ_JSON, DBZ_UUID = envelope.MICRO_DURATION, envelope.JSON, envelope.UUID
DBZ_XML, DBZ_VARIABLE_DECIMAL = envelope.XML, envelope.VARIABLE_SCALE_DECIMAL
DBZ_NANO_TIME = "io.debezium.time.NanoTime"
DBZ_NANO_TIMESTAMP = "io.debezium.time.NanoTimestamp"
DBZ_INTERVAL = "io.debezium.time.Interval"
SOURCE_COLUMN_TYPE = "__debezium.source.column.type"
SOURCE_COLUMN_LENGTH = "__debezium.source.column.length"
SOURCE_COLUMN_SCALE = "__debezium.source.column.scale"

_PRIMITIVE_TYPES = {"int8": "smallint", "int16": "smallint", "int32": "integer",
                    "int64": "bigint", "float32": "real", "float64": "double precision",
                    "boolean": "boolean", "string": "text", "bytes": "bytea"}
_NAMED_TYPES = {data.DATE: "date", DBZ_DATE: "date", data.TIME: "time", DBZ_TIME: "time",
                DBZ_MICRO_TIME: "time", DBZ_NANO_TIME: "time", data.TIMESTAMP: "timestamp",
                DBZ_TIMESTAMP: "timestamp", DBZ_MICRO_TIMESTAMP: "timestamp",
                DBZ_NANO_TIMESTAMP: "timestamp", DBZ_ZONED_TIMESTAMP: "timestamptz",
                DBZ_ZONED_TIME: "timetz", DBZ_MICRO_DURATION: "interval",
                DBZ_INTERVAL: "interval", DBZ_JSON: "jsonb", DBZ_UUID: "uuid", DBZ_XML: "xml",
                DBZ_VARIABLE_DECIMAL: "numeric"}
_SIZED_SOURCE_TYPES = {"varchar", "character varying", "char", "character", "bpchar",
                       "numeric", "decimal", "bit", "varbit", "bit varying"}


# ---- names

def quoted(name: str) -> str:
    """``name`` as a quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def quote(name: str) -> str:
    """``name`` as a quoted identifier, ready for a psycopg query string (``%`` doubled)."""
    return quoted(name).replace("%", "%%")


@dataclass(frozen=True)
class TableId:
    schema: str
    table: str

    @classmethod
    def parse(cls, name: str, lower: bool) -> TableId:
        if lower:
            name = name.lower()
        schema, dot, table = name.rpartition(".")
        return cls(schema if dot and schema else "public", table)

    @property
    def sql(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"

    @property
    def regclass(self) -> str:
        """The quoted name as a parameter (``to_regclass``)."""
        return f"{quoted(self.schema)}.{quoted(self.table)}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


# ---- types and values

def column_type(schema: Schema) -> str:
    """The PostgreSQL column type for ``schema`` (module doc)."""
    params = schema.params
    source = params.get(SOURCE_COLUMN_TYPE)
    if source:
        t = source.lower()
        length, scale = params.get(SOURCE_COLUMN_LENGTH), params.get(SOURCE_COLUMN_SCALE)
        if t in _SIZED_SOURCE_TYPES and length and length.isdigit() and int(length) > 0:
            t += f"({length},{scale})" if scale and t in ("numeric", "decimal") else f"({length})"
        return t
    if schema.name == envelope.BITS:
        length = params.get("length", "")
        return (f"bit varying({length})" if length.isdigit() and 0 < int(length) < MAX_BITS
                else "bit varying")
    if schema.name == data.DECIMAL:
        precision = params.get("connect.decimal.precision")
        return f"numeric({precision},{params.get('scale', '0')})" if precision else "numeric"
    named = _NAMED_TYPES.get(schema.name or "")
    if named:
        return named
    if schema.type == "array" and schema.value_schema is not None:
        inner = column_type(schema.value_schema)
        return inner if inner == "jsonb" else inner + "[]"
    if schema.type in ("map", "struct", "array"):
        return "jsonb"
    return _PRIMITIVE_TYPES[schema.type]


def guess_type(value: Any) -> str:
    """A column type for a schemaless value (JSON without schemas)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, decimal.Decimal):
        return "numeric"
    if isinstance(value, (bytes, bytearray)):
        return "bytea"
    if isinstance(value, (dict, list)):
        return "jsonb"
    return "text"


def _unscaled(raw: Any, scale: int) -> decimal.Decimal:
    if isinstance(raw, str):
        raw = base64.b64decode(raw)
    unscaled = int.from_bytes(bytes(raw), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale)


MAX_BITS = 2147483647


def _bit_string(value: bytes, length: str) -> str:
    """Debezium's Bits (the bit string's number, little-endian bytes) as '0101...',
    zero-padded to the column's ``length`` when it has one."""
    if not value:
        return ""
    n = int.from_bytes(value, "little")
    width = int(length) if length.isdigit() and 0 < int(length) < MAX_BITS else 0
    return format(n, f"0{width}b")


def _json_default(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    return str(v)


def to_db(schema: Schema | None, value: Any) -> Any:
    """``value`` (of ``schema``) as the parameter for its column (module doc)."""
    if value is None:
        return None
    if schema is None:
        return json.dumps(value, default=_json_default) if isinstance(value, (dict, list)) \
            else value
    name = schema.name
    if name:
        if name == data.DECIMAL and isinstance(value, (bytes, bytearray, str)):
            return _unscaled(value, int(schema.params.get("scale", "0")))
        if name == DBZ_VARIABLE_DECIMAL:
            return _unscaled(value["value"], int(value["scale"]))
        if name == envelope.BITS and isinstance(value, (bytes, bytearray)):
            return _bit_string(bytes(value), schema.params.get("length", ""))
        if isinstance(value, int) and not isinstance(value, bool):
            converted = _from_epoch(name, value)
            if converted is not None:
                return converted
        if name == data.TIMESTAMP and isinstance(value, datetime.datetime) and value.tzinfo:
            return value.astimezone(datetime.UTC).replace(tzinfo=None)
    if schema.type in ("map", "struct"):
        return json.dumps(value, default=_json_default)
    if schema.type == "array":
        if column_type(schema) == "jsonb":
            return json.dumps(value, default=_json_default)
        return [to_db(schema.value_schema, v) for v in value]
    if schema.type == "bytes" and isinstance(value, str):
        return base64.b64decode(value)
    return value


# PostgreSQL JDBC's (and so Debezium's) markers for infinite timestamps and dates
POS_INFINITY_US = 9223372036825200000
NEG_INFINITY_US = -9223372036832400000
_DAY_US = 86_400_000_000
POS_INFINITY_DAYS = POS_INFINITY_US // _DAY_US
NEG_INFINITY_DAYS = NEG_INFINITY_US // _DAY_US


def _civil_from_days(z: int) -> tuple[int, int, int]:
    """(year, month, day) of a proleptic Gregorian day count since 1970-01-01, any year."""
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def _date(days: int) -> Any:
    """A ``date``, or PostgreSQL's text for one Python cannot hold (BC, after 9999)."""
    if days >= POS_INFINITY_DAYS:
        return "infinity"
    if days <= NEG_INFINITY_DAYS:
        return "-infinity"
    y, m, d = _civil_from_days(days)
    if 1 <= y <= 9999:
        return datetime.date(y, m, d)
    return f"{y if y > 0 else 1 - y:04d}-{m:02d}-{d:02d}" + ("" if y > 0 else " BC")


def _timestamp(us: int) -> Any:
    if us >= POS_INFINITY_US:
        return "infinity"
    if us <= NEG_INFINITY_US:
        return "-infinity"
    days, tod = divmod(us, _DAY_US)
    day = _date(days)
    clock = (EPOCH + datetime.timedelta(microseconds=tod)).time()
    if isinstance(day, datetime.date):
        return datetime.datetime.combine(day, clock)
    date_text, bc, _ = day.partition(" BC")
    return f"{date_text} {clock.isoformat()}{' BC' if bc else ''}"


def _from_epoch(name: str, v: int) -> Any:
    if name in (DBZ_DATE, data.DATE):
        return _date(v)
    if name == DBZ_MICRO_TIMESTAMP:
        return _timestamp(v)
    if name in (DBZ_TIMESTAMP, data.TIMESTAMP):
        return _timestamp(v * 1000)
    if name == DBZ_NANO_TIMESTAMP:
        return _timestamp(v // 1000)
    if name == DBZ_MICRO_DURATION:
        return datetime.timedelta(microseconds=v)
    micros = {DBZ_TIME: v * 1000, data.TIME: v * 1000, DBZ_MICRO_TIME: v,
              DBZ_NANO_TIME: v // 1000}.get(name)
    if micros is not None:
        if micros == _DAY_US:
            return "24:00:00"  # PostgreSQL's time allows the end of the day
        micros %= _DAY_US
        return (EPOCH + datetime.timedelta(microseconds=micros)).time()
    return None


# ---- catalog

def read_table(conn: Any, table: TableId) -> dict[str, str] | None:
    """``{column: type}`` of ``table`` in column order, or None when it does not exist."""
    row = conn.execute("SELECT to_regclass(%s)::oid", (table.regclass,)).fetchone()
    if row is None or row[0] is None:
        return None
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (row[0],)).fetchall()
    return {name: typ for name, typ in rows}


# ---- statements

@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: str
    nullable: bool
    default: Any = None


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float, decimal.Decimal)):
        return str(value)
    return "'" + str(value).replace("'", "''").replace("%", "%%") + "'"


def _definition(c: ColumnDef) -> str:
    default = f" DEFAULT {_literal(c.default)}" if c.default is not None else ""
    return f"{quote(c.name)} {c.type}{default}{'' if c.nullable else ' NOT NULL'}"


def create_table(table: TableId, columns: list[ColumnDef], keys: list[str]) -> str:
    defs = [_definition(c) for c in columns]
    if keys:
        defs.append(f"PRIMARY KEY ({', '.join(quote(k) for k in keys)})")
    return f"CREATE TABLE IF NOT EXISTS {table.sql} ({', '.join(defs)})"


def add_columns(table: TableId, columns: list[ColumnDef]) -> str:
    adds = ", ".join(f"ADD COLUMN IF NOT EXISTS {_definition(c)}" for c in columns)
    return f"ALTER TABLE {table.sql} {adds}"


def _marks(n: int) -> str:
    return ", ".join(["%s"] * n)


def insert(table: TableId, columns: list[str]) -> str:
    return (f"INSERT INTO {table.sql} ({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({_marks(len(columns))})")


def upsert(table: TableId, keys: list[str], others: list[str]) -> str:
    """INSERT ... ON CONFLICT; the table aliased, so one named ``excluded`` works too."""
    columns = keys + others
    head = (f"INSERT INTO {table.sql} AS \"target\" ({', '.join(quote(c) for c in columns)}) "
            f"VALUES ({_marks(len(columns))}) "
            f"ON CONFLICT ({', '.join(quote(k) for k in keys)})")
    if not others:
        return head + " DO NOTHING"
    return head + " DO UPDATE SET " + ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}"
                                                for c in others)


def _where(keys: list[str]) -> str:
    return " AND ".join(f"{quote(k)} = %s" for k in keys)


def update(table: TableId, keys: list[str], others: list[str]) -> str:
    sets = ", ".join(f"{quote(c)} = %s" for c in others)
    return f"UPDATE {table.sql} SET {sets} WHERE {_where(keys)}"


def delete(table: TableId, keys: list[str]) -> str:
    return f"DELETE FROM {table.sql} WHERE {_where(keys)}"


def truncate(table: TableId) -> str:
    return f"TRUNCATE TABLE {table.sql}"
