"""Kafka's TimestampConverter ($Key and $Value): a timestamp between its forms.

Keys: ``target.type`` (``string``, ``unix``, ``Date``, ``Time``, ``Timestamp``),
``field`` (empty: the whole key/value; else that field of the struct/map), ``format``
(Java SimpleDateFormat, UTC; required to read or write strings), ``unix.precision``
(``milliseconds`` default, ``microseconds``, ``nanoseconds``, ``seconds``).

Input forms are recognised by schema (a ``Timestamp``/``Date``/``Time`` logical type,
int64 unix, string) or, schemaless, by Python type (datetime/date/time, int, str).
Output: ``string`` formatted text (schema string), ``unix`` int64 in the precision,
``Timestamp`` a UTC datetime, ``Date`` the date (the time dropped), ``Time`` the time of
day (the date dropped). Optional stays optional; None stays None. A value that does not
parse is a DataError (``Could not parse timestamp: value (...) does not match pattern``).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct
from spool.connect.transforms.base import (
    KeyOrValue,
    SchemaCache,
    require_map,
    require_struct,
    struct_like,
)
from spool.connect.transforms.routing import java_date_format

UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
TARGETS = ("string", "unix", "Date", "Time", "Timestamp")
PRECISIONS = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000,
              "nanoseconds": 1_000_000_000}
_GROUPS = {"y": r"(?P<y>\d{4}|\d{2})", "M": r"(?P<M>\d{1,2})", "d": r"(?P<d>\d{1,2})",
           "H": r"(?P<H>\d{1,2})", "m": r"(?P<m>\d{1,2})", "s": r"(?P<s>\d{1,2})",
           "S": r"(?P<S>\d{1,9})", "X": r"(?P<X>Z|[+-]\d{2}:?\d{2}|[+-]\d{2})",
           "Z": r"(?P<Z>[+-]\d{4})", "a": r"(?P<a>AM|PM|am|pm)",
           "h": r"(?P<h>\d{1,2})"}


def java_date_parser(pattern: str) -> Any:
    """A function reading text written in Java SimpleDateFormat ``pattern`` (UTC unless
    the pattern has a zone) into an aware datetime; ValueError when it does not match."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j < 0:
                raise ValueError(f"Unterminated quote in pattern {pattern}")
            out.append(re.escape(pattern[i + 1:j]) if j > i + 1 else "'")
            i = j + 1
        elif c.isascii() and c.isalpha():
            n = 1
            while i + n < len(pattern) and pattern[i + n] == c:
                n += 1
            if c not in _GROUPS:
                raise ValueError(f"Illegal pattern character '{c}' for parsing")
            out.append(_GROUPS[c])
            i += n
        else:
            out.append(re.escape(c))
            i += 1
    rx = re.compile("".join(out))

    def parse(text: str) -> datetime.datetime:
        m = rx.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"value ({text}) does not match pattern ({pattern})")
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        year = int(g.get("y", 1970))
        if len(g.get("y", "1970")) == 2:
            year += 2000 if year < 80 else 1900
        hour = int(g.get("H", g.get("h", 0)))
        if "a" in g and g["a"].lower() == "pm" and hour < 12:
            hour += 12
        if "a" in g and g["a"].lower() == "am" and hour == 12:
            hour = 0
        frac = g.get("S", "0")
        micro = int(frac) * 1000 if len(frac) <= 3 else int(frac[:6].ljust(6, "0"))
        tz = UTC
        zone = g.get("X") or g.get("Z")
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "").ljust(4, "0")
            tz = datetime.timezone(sign * datetime.timedelta(hours=int(digits[:2]),
                                                             minutes=int(digits[2:])))
        when = datetime.datetime(year, int(g.get("M", 1)), int(g.get("d", 1)), hour,
                                 int(g.get("m", 0)), int(g.get("s", 0)), micro, tzinfo=tz)
        return when.astimezone(UTC)
    return parse


class TimestampConverter(KeyOrValue):
    PURPOSE = "converting timestamp formats"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("target.type", api.STRING, api.REQUIRED, api.HIGH,
                        "The desired timestamp representation: string, unix, Date, Time, or "
                        "Timestamp", validator=api.in_values(*TARGETS,
                                                             case_insensitive=False))
                .define("field", api.STRING, "", api.HIGH,
                        "The field containing the timestamp, or empty if the entire value "
                        "is a timestamp")
                .define("format", api.STRING, "", api.MEDIUM,
                        "A SimpleDateFormat-compatible format for the timestamp.")
                .define("unix.precision", api.STRING, "milliseconds", api.LOW,
                        "The desired Unix precision for the timestamp.",
                        validator=api.in_values(*PRECISIONS, case_insensitive=False))
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.target = cfg["target.type"]
        self.field = cfg["field"]
        fmt = cfg["format"]
        if self.target == "string" and not fmt:
            raise api.ConfigError({"format": [
                "TimestampConverter requires format option to be specified when using "
                "string timestamps"]})
        try:
            self.formatter = java_date_format(fmt) if fmt else None
            self.parser = java_date_parser(fmt) if fmt else None
        except ValueError as e:
            raise api.ConfigError({"format": [
                f"TimestampConverter requires a SimpleDateFormat-compatible pattern for "
                f"string timestamps: {fmt}: {e}"]}) from None
        self.per_second = PRECISIONS[cfg["unix.precision"]]
        self.cache = SchemaCache()

    # ---- the record

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if not self.field:
            new_schema = None if schema is None else self._target_schema(schema.optional)
            return self.updated(record, new_schema, None if value is None
                                else self._convert(value, schema))
        if value is None:
            return record
        if schema is None:
            m = dict(require_map(value, self.PURPOSE))
            if m.get(self.field) is not None:
                m[self.field] = self._convert(m[self.field], None)
            return self.updated(record, None, m)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get(struct.schema, self._struct_schema)
        vals = dict(struct)
        f = struct.schema.field(self.field)
        if f is not None and vals.get(self.field) is not None:
            vals[self.field] = self._convert(vals[self.field], f.schema)
        return self.updated(record, new_schema, Struct(new_schema, vals))

    def _struct_schema(self, base: Schema) -> Schema:
        return struct_like(base, [(f.name, self._target_schema(f.schema.optional)
                                   if f.name == self.field else f.schema)
                                  for f in base.fields])

    def _target_schema(self, optional: bool) -> Schema:
        s = {"string": data.STRING, "unix": data.INT64, "Date": data.DATE_SCHEMA,
             "Time": data.TIME_SCHEMA, "Timestamp": data.TIMESTAMP_SCHEMA}[self.target]
        return data.optional(s) if optional else s

    # ---- values

    def _convert(self, value: Any, schema: Schema | None) -> Any:
        when = self._read(value, schema)
        t = self.target
        if t == "string":
            assert self.formatter is not None
            return self.formatter(when)
        if t == "unix":
            delta = when - EPOCH
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros * self.per_second // 1_000_000
        if t == "Date":
            return when.date()
        if t == "Time":
            return when.time().replace(tzinfo=None)
        return when

    def _read(self, value: Any, schema: Schema | None) -> datetime.datetime:
        name = schema.name if schema is not None else None
        if isinstance(value, datetime.datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, datetime.date):
            return datetime.datetime(value.year, value.month, value.day, tzinfo=UTC)
        if isinstance(value, datetime.time):
            return datetime.datetime.combine(datetime.date(1970, 1, 1), value, UTC)
        if isinstance(value, int) and not isinstance(value, bool) and name is None:
            return EPOCH + datetime.timedelta(microseconds=value * 1_000_000
                                              // self.per_second)
        if isinstance(value, str):
            if self.parser is None:
                raise DataError("TimestampConverter requires format option to be specified "
                                "when using string timestamps")
            try:
                return self.parser(value)
            except ValueError as e:
                raise DataError(f"Could not parse timestamp: {e}") from None
        raise DataError(f"Cannot convert {type(value).__name__} to a timestamp")


class TimestampConverterKey(TimestampConverter):
    operates_on = "key"


class TimestampConverterValue(TimestampConverter):
    operates_on = "value"
