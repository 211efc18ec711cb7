"""PostgreSQL column types -> Connect schemas and values, as Debezium's defaults.

``Catalog(conn)`` reads tables and types from ``pg_catalog`` (cached) and builds a
``TableInfo`` per table: its columns (``ColumnInfo``: name, Connect schema, parser of the
column's text output), primary key, and the change events' schemas (``envelope``). Both
the snapshot and the stream read values in PostgreSQL's text output (the stream's
pgoutput v1 has nothing else); the connection must use ``SESSION_SETTINGS`` (UTC,
ISO dates, ISO 8601 intervals, C money) so the texts have one form.

Mapping (``time.precision.mode=adaptive``, ``binary.handling.mode=bytes``,
``interval.handling.mode=numeric``, ``decimal.handling.mode`` precise|double|string):

=====================  =============================================================
bool                   boolean (bit(1) too)
int2 / int4 / int8     int16 / int32 / int64 (oid, xid: int64)
float4 / float8        float32 / float64 (NaN and infinities as floats)
numeric(p,s)           Decimal (scale s, connect.decimal.precision p); unconstrained:
                       io.debezium.data.VariableScaleDecimal; double: float64;
                       string: string. NaN: None (precise).
money                  Decimal scale 2
text, varchar, char,   string
name, inet, cidr, ...  string (every type not listed here: its text output)
date                   io.debezium.time.Date (int32 days)
time(0..3) / (4..6)    io.debezium.time.Time (int32 ms) / io.debezium.time.MicroTime (int64 us)
timestamp(0..3)/(4..6) io.debezium.time.Timestamp (int64 ms) / MicroTimestamp (int64 us)
timestamptz            io.debezium.time.ZonedTimestamp (``2024-05-01T10:00:00.000000Z``,
                       the column's precision in fraction digits)
timetz                 io.debezium.time.ZonedTime (``10:00:00.000000Z``)
interval               io.debezium.time.MicroDuration (int64 us; a month = 30.4375 days)
bytea                  bytes
bit(n>1), varbit       io.debezium.data.Bits (bytes, little-endian; parameter length)
json, jsonb            io.debezium.data.Json (string)
xml / uuid             io.debezium.data.Xml / io.debezium.data.Uuid (string)
enum types             io.debezium.data.Enum (string; parameter allowed)
domains                their base type
arrays (1-D)           array of the element's (optional) schema
=====================  =============================================================

A column is optional unless NOT NULL. Infinite dates and timestamps become Debezium's
markers (PostgreSQL JDBC's ``DATE_POSITIVE_INFINITY`` values).
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from spool.connect import data
from spool.connect.data import DataError, Schema, Struct
from spool.connect.postgres import envelope as env

SESSION_SETTINGS = ("SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, YMD'",
                    "SET IntervalStyle = 'iso_8601'", "SET extra_float_digits = 3",
                    "SET bytea_output = 'hex'", "SET lc_monetary = 'C'")

_EPOCH = datetime.date(1970, 1, 1)
_POS_INF_US = 9223372036825200000
_NEG_INF_US = -9223372036832400000
_DAY_US = 86_400_000_000
UNAVAILABLE = "__debezium_unavailable_value"

Parser = Callable[[str], Any]


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type_oid: int
    schema: Schema  # optional when the column is nullable
    parse: Parser

    def value(self, text: str | None) -> Any:
        return None if text is None else self.parse(text)

    def placeholder(self) -> Any:
        """A value for a column a message leaves out (unchanged TOAST, a delete's non-key
        columns under REPLICA IDENTITY DEFAULT), as Debezium: the unavailable-value
        placeholder for strings and bytes, None where optional, else the type's zero."""
        t = self.schema.type
        if t == "string":
            return UNAVAILABLE
        if t == "bytes" and self.schema.name is None:
            return UNAVAILABLE.encode()
        if self.schema.optional:
            return None
        return zero_value(self.schema)


def zero_value(schema: Schema) -> Any:
    if schema.name == env.DECIMAL:
        return decimal.Decimal(0).scaleb(-int(schema.params.get("scale", "0")))
    return {"boolean": False, "string": "", "bytes": b"", "array": [], "map": {},
            "float32": 0.0, "float64": 0.0}.get(schema.type, 0) if schema.type != "struct" \
        else Struct(schema)


@dataclass(frozen=True)
class TableInfo:
    oid: int
    schema_name: str
    name: str
    columns: tuple[ColumnInfo, ...]
    key_columns: tuple[str, ...]
    topic: str
    key_schema: Schema | None
    row_schema: Schema
    envelope_schema: Schema

    def row(self, texts: list[Any], *, missing: Callable[[ColumnInfo], Any] | None = None,
            by_name: dict[str, int] | None = None) -> Struct:
        """A ``Value`` struct from the columns' texts (in ``columns`` order, or looked up
        through ``by_name``: column name -> index in ``texts``)."""
        values: dict[str, Any] = {}
        for i, col in enumerate(self.columns):
            j = i if by_name is None else by_name.get(col.name, -1)
            text = texts[j] if 0 <= j < len(texts) else _MISSING
            if text is _MISSING or not isinstance(text, (str, type(None))):
                values[col.name] = missing(col) if missing else col.placeholder()
            else:
                values[col.name] = col.value(text)
        return Struct(self.row_schema, values)

    def key(self, row: Struct) -> Struct | None:
        if self.key_schema is None:
            return None
        return Struct(self.key_schema, {c: row[c] for c in self.key_columns})


_MISSING: Any = object()


# ---- parsers of text output

def _bool(s: str) -> bool:
    return s == "t"


def _numeric_precise(s: str) -> Any:
    return None if s == "NaN" else decimal.Decimal(s)


def _attach(schema: Schema, value: Any) -> Any:
    """``value`` with its structs carrying ``schema``'s struct schemas (a converter refuses
    a struct whose schema is not its field's: "Mismatching schema.")."""
    if isinstance(value, Struct) and schema.type == "struct":
        return Struct(schema, value)
    if isinstance(value, list) and schema.type == "array" and schema.value_schema is not None:
        return [_attach(schema.value_schema, v) for v in value]
    return value


def _carrying(schema: Schema, parse: Parser) -> Parser:
    return lambda v: _attach(schema, parse(v))


def _money(s: str) -> decimal.Decimal:
    neg = s.startswith("-") or s.startswith("(")
    d = decimal.Decimal(re.sub(r"[^0-9.]", "", s)).quantize(decimal.Decimal("0.01"))
    return -d if neg else d


def _days(s: str) -> int:
    if s == "infinity":
        return _POS_INF_US // _DAY_US
    if s == "-infinity":
        return _NEG_INF_US // _DAY_US
    bc = s.endswith(" BC")
    y, m, d = (int(x) for x in s.removesuffix(" BC").split("-"))
    if bc:
        y = 1 - y
    if 1 <= y <= 9999:
        return (datetime.date(y, m, d) - _EPOCH).days
    return _civil_days(y, m, d)


def _civil_days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date of any year."""
    y -= m <= 2
    era = y // 400  # floor division: Python's // is already what C's needs y-399 for
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _time_us(s: str) -> int:
    h, m, rest = s.split(":")
    sec, _, frac = rest.partition(".")
    return ((int(h) * 60 + int(m)) * 60 + int(sec)) * 1_000_000 + int((frac + "000000")[:6])


_TZ = re.compile(r"([+-]\d\d)(?::?(\d\d))?(?::?(\d\d))?$")


def _split_tz(s: str) -> tuple[str, int]:
    """``'10:00:00+05:30'`` -> (``'10:00:00'``, offset in seconds)."""
    m = _TZ.search(s)
    if not m:
        return s, 0
    sign = -1 if m.group(1)[0] == "-" else 1
    off = abs(int(m.group(1))) * 3600 + int(m.group(2) or 0) * 60 + int(m.group(3) or 0)
    return s[:m.start()], sign * off


def _timestamp_us(s: str) -> int:
    if s == "infinity":
        return _POS_INF_US
    if s == "-infinity":
        return _NEG_INF_US
    bc = s.endswith(" BC")
    s = s.removesuffix(" BC")
    date_s, _, time_s = s.partition(" ")
    y, rest = date_s.split("-", 1)
    days = _days(f"{y}-{rest}" + (" BC" if bc else ""))
    return days * _DAY_US + (_time_us(time_s) if time_s else 0)


def _fraction(us: int, width: int) -> str:
    return "" if width <= 0 else "." + f"{us:06d}"[:width].ljust(width, "0")


def _zoned_timestamp(width: int) -> Parser:
    def parse(s: str) -> str:
        if s in ("infinity", "-infinity"):
            return s
        bc = s.endswith(" BC")
        base, off = _split_tz(s.removesuffix(" BC"))
        us = _timestamp_us(base + (" BC" if bc else "")) - off * 1_000_000
        days, tod = divmod(us, _DAY_US)
        y, m, d = _civil_from_days(days)
        secs, frac = divmod(tod, 1_000_000)
        hh, rem = divmod(secs, 3600)
        mm, ss = divmod(rem, 60)
        year = f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"
        return f"{year}-{m:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}{_fraction(frac, width)}Z"
    return parse


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _zoned_time(width: int) -> Parser:
    def parse(s: str) -> str:
        base, off = _split_tz(s)
        us = (_time_us(base) - off * 1_000_000) % _DAY_US
        secs, frac = divmod(us, 1_000_000)
        hh, rem = divmod(secs, 3600)
        mm, ss = divmod(rem, 60)
        return f"{hh:02d}:{mm:02d}:{ss:02d}{_fraction(frac, width)}Z"
    return parse


_ISO_INTERVAL = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?"
    r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?$")


def _interval_us(s: str) -> int:
    m = _ISO_INTERVAL.match(s)
    if not m:
        raise DataError(f"interval {s!r} is not in IntervalStyle iso_8601")
    y, mo, w, d, h, mi = (int(g) if g else 0 for g in m.groups()[:6])
    sec = decimal.Decimal(m.group(7) or "0")
    months = y * 12 + mo
    days = decimal.Decimal(months) * decimal.Decimal("30.4375") + w * 7 + d
    us = (days * 86400 + h * 3600 + mi * 60 + sec) * 1_000_000
    return int(us.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def _bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    raise DataError("bytea is not in bytea_output hex")


def _bits(s: str) -> bytes:
    n = len(s)
    return int(s, 2).to_bytes(max(1, (n + 7) // 8), "little") if n else b""


def _array(elem: Parser) -> Parser:
    def parse(s: str) -> list[Any]:
        if s.startswith("["):  # non-default lower bound: [0:2]={...}
            s = s[s.index("=") + 1:]
        if not s.startswith("{") or not s.endswith("}"):
            raise DataError(f"array {s!r} is not a one-dimensional array")
        body, out, i = s[1:-1], [], 0
        if not body:
            return []
        while i <= len(body):
            if i < len(body) and body[i] == '"':
                j, buf = i + 1, []
                while body[j] != '"':
                    if body[j] == "\\":
                        j += 1
                    buf.append(body[j])
                    j += 1
                out.append(elem("".join(buf)))
                i = j + 2
            else:
                j = body.find(",", i)
                j = len(body) if j < 0 else j
                tok = body[i:j]
                if tok.startswith("{"):
                    raise DataError("multi-dimensional arrays are not supported")
                out.append(None if tok == "NULL" else elem(tok))
                i = j + 1
        return out
    return parse


def source_type_params(type_name: str, typmod: int) -> tuple[tuple[str, str], ...]:
    """Debezium's ``__debezium.source.column.*`` schema parameters (what
    ``column.propagate.source.type`` adds): the type's name in upper case, and its length
    and scale where its modifier has them."""
    out = [("__debezium.source.column.type", type_name.upper())]
    if type_name in ("varchar", "bpchar") and typmod >= 4:
        out.append(("__debezium.source.column.length", str(typmod - 4)))
    elif type_name == "numeric" and typmod >= 4:
        out += [("__debezium.source.column.length", str(((typmod - 4) >> 16) & 0xFFFF)),
                ("__debezium.source.column.scale", str((typmod - 4) & 0xFFFF))]
    elif type_name in ("bit", "varbit") and typmod > 0:
        out.append(("__debezium.source.column.length", str(typmod)))
    return tuple(out)


# ---- the mapping

def _precision(typmod: int, default: int = 6) -> int:
    return default if typmod < 0 else typmod


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    name: str
    kind: str  # pg_type.typtype: b base, d domain, e enum, c composite, r range, p pseudo
    category: str  # pg_type.typcategory (A: array)
    base_oid: int
    base_typmod: int
    elem_oid: int
    enum_labels: tuple[str, ...]


class Catalog:
    """Tables' and types' definitions read from ``pg_catalog`` (module doc)."""

    def __init__(self, conn: Any, *, topic_prefix: str, decimal_mode: str = "precise",
                 propagate: Callable[[str, str], bool] | None = None,
                 key_override: Callable[[str], tuple[str, ...] | None] | None = None) -> None:
        self.conn = conn
        self.key_override = key_override  # schema.table -> key columns (message.key.columns)
        self.prefix = topic_prefix
        self.decimal_mode = decimal_mode
        self.propagate = propagate  # (schema.table.column, type name): add source params?
        self._types: dict[int, TypeInfo] = {}

    # types
    def type_info(self, oid: int) -> TypeInfo:
        t = self._types.get(oid)
        if t is None:
            row = self.conn.execute(
                "SELECT t.typname, t.typtype, t.typcategory, t.typbasetype, t.typtypmod, "
                "t.typelem, coalesce((SELECT array_agg(e.enumlabel::text ORDER BY "
                "e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '{}') "
                "FROM pg_type t WHERE t.oid = %s", (oid,)).fetchone()
            if row is None:
                t = TypeInfo(oid, "unknown", "b", "U", 0, -1, 0, ())
            else:
                t = TypeInfo(oid, row[0], row[1], row[2], int(row[3]), int(row[4]),
                             int(row[5]), tuple(row[6]))
            self._types[oid] = t
        return t

    def column_type(self, oid: int, typmod: int) -> tuple[Schema, Parser]:
        """The (required) Connect schema and text parser of one column type."""
        t = self.type_info(oid)
        if t.kind == "d" and t.base_oid:
            return self.column_type(t.base_oid, typmod if typmod >= 0 else t.base_typmod)
        if t.kind == "e":
            return (Schema("string", name=env.ENUM, version=1,
                           parameters=(("allowed", ",".join(t.enum_labels)),)), str)
        if t.category == "A" and t.elem_oid:
            es, ep = self.column_type(t.elem_oid, typmod)
            return data.array(data.optional(es)), _array(ep)
        return self._builtin(t.name, typmod)

    def _builtin(self, name: str, typmod: int) -> tuple[Schema, Parser]:
        s = Schema
        if name == "bool":
            return s("boolean"), _bool
        if name == "int2":
            return s("int16"), int
        if name == "int4":
            return s("int32"), int
        if name in ("int8", "oid", "xid", "xid8", "cid"):
            return s("int64"), int
        if name == "float4":
            return s("float32"), float
        if name == "float8":
            return s("float64"), float
        if name == "numeric":
            if self.decimal_mode == "double":
                return s("float64"), lambda v: float(v)
            if self.decimal_mode == "string":
                return s("string"), str
            if typmod < 0:
                vs = env.variable_scale_decimal_schema(optional=False)
                return vs, lambda v: (None if v == "NaN"
                                      else env.variable_scale_decimal(decimal.Decimal(v), vs))
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
            return (s("bytes", name=env.DECIMAL, version=1,
                      parameters=(("scale", str(scale)),
                                  ("connect.decimal.precision", str(precision)))),
                    _numeric_precise)
        if name == "money":
            if self.decimal_mode == "double":
                return s("float64"), lambda v: float(_money(v))
            if self.decimal_mode == "string":
                return s("string"), lambda v: str(_money(v))
            return data.decimal_schema(2), _money
        if name == "date":
            return s("int32", name=env.DATE, version=1), _days
        if name == "time":
            p = _precision(typmod)
            if p <= 3:
                return s("int32", name=env.TIME, version=1), lambda v: _time_us(v) // 1000
            return s("int64", name=env.MICRO_TIME, version=1), _time_us
        if name == "timestamp":
            p = _precision(typmod)
            if p <= 3:
                return (s("int64", name=env.TIMESTAMP, version=1),
                        lambda v: _timestamp_us(v) // 1000)
            return s("int64", name=env.MICRO_TIMESTAMP, version=1), _timestamp_us
        if name == "timestamptz":
            return (s("string", name=env.ZONED_TIMESTAMP, version=1),
                    _zoned_timestamp(_precision(typmod)))
        if name == "timetz":
            return (s("string", name=env.ZONED_TIME, version=1),
                    _zoned_time(_precision(typmod)))
        if name == "interval":
            return s("int64", name=env.MICRO_DURATION, version=1), _interval_us
        if name == "bytea":
            return s("bytes"), _bytea
        if name == "bit" and typmod <= 1:
            return s("boolean"), lambda v: v == "1"
        if name in ("bit", "varbit"):
            length = str(typmod) if typmod > 0 else "2147483647"
            return s("bytes", name=env.BITS, version=1, parameters=(("length", length),)), _bits
        if name in ("json", "jsonb"):
            return s("string", name=env.JSON, version=1), str
        if name == "xml":
            return s("string", name=env.XML, version=1), str
        if name == "uuid":
            return s("string", name=env.UUID, version=1), str
        return s("string"), str

    # tables
    def table(self, oid: int, columns: list[tuple[str, int, int]] | None = None) -> TableInfo:
        """Table ``oid``'s definition; ``columns`` (name, type oid, typmod) as a Relation
        message gives them, else the catalog's."""
        conn = self.conn
        nsp, rel = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.oid = %s", (oid,)).fetchone() or ("?", "?")
        attrs = conn.execute(
            "SELECT attname, atttypid, atttypmod, attnotnull FROM pg_attribute WHERE "
            "attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,)).fetchall()
        notnull = {a[0]: bool(a[3]) for a in attrs}
        key = tuple(r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)", (oid,)).fetchall())
        cols = columns if columns is not None else [(a[0], int(a[1]), int(a[2])) for a in attrs]
        return self.build(oid, nsp, rel, cols, notnull, key)

    def build(self, oid: int, nsp: str, rel: str, cols: list[tuple[str, int, int]],
              notnull: dict[str, bool], key: tuple[str, ...]) -> TableInfo:
        infos = []
        for name, type_oid, typmod in cols:
            schema, parse = self.column_type(type_oid, typmod)
            if not notnull.get(name, False):
                schema = replace(schema, optional=True)
            if self.propagate is not None:
                type_name = self.type_info(type_oid).name
                if self.propagate(f"{nsp}.{rel}.{name}", type_name):
                    schema = replace(schema, parameters=schema.parameters
                                     + source_type_params(type_name, typmod))
            if schema.type in ("struct", "array"):  # its structs must carry this schema
                parse = _carrying(schema, parse)
            infos.append(ColumnInfo(name, type_oid, schema, parse))
        fields = [(c.name, c.schema) for c in infos]
        by = {c.name: c for c in infos}
        override = self.key_override(f"{nsp}.{rel}") if self.key_override else None
        key = tuple(k for k in (key if override is None else override) if k in by)
        row_schema = env.row_schema(self.prefix, nsp, rel, fields)
        return TableInfo(oid, nsp, rel, tuple(infos), key,
                         env.topic_name(self.prefix, nsp, rel),
                         env.key_schema(self.prefix, nsp, rel,
                                        [(k, by[k].schema) for k in key]),
                         row_schema, env.envelope_schema(self.prefix, nsp, rel, row_schema))
