"""Kafka's TimestampRouter, RegexRouter and Filter.

- **TimestampRouter**: ``topic.format`` (``${topic}-${timestamp}``) and
  ``timestamp.format`` (Java SimpleDateFormat, ``yyyyMMdd``; UTC): the topic becomes the
  format with the record's topic and timestamp; a record without a timestamp is a
  DataError (``Timestamp missing on record: ...``).
- **RegexRouter**: ``regex``, ``replacement``: when the whole topic matches ``regex`` it
  becomes ``replacement`` with Java's ``$1``/``${name}`` group references.
- **Filter**: drops every record (returns None); used with a predicate.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from spool.connect import api
from spool.connect.data import DataError


class TimestampRouter(api.Transformation):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("topic.format", api.STRING, "${topic}-${timestamp}", api.HIGH,
                        "Format string which can contain ${topic} and ${timestamp} as "
                        "placeholders for the topic and timestamp, respectively.")
                .define("timestamp.format", api.STRING, "yyyyMMdd", api.HIGH,
                        "Format string for the timestamp that is compatible with "
                        "java.text.SimpleDateFormat.", validator=_check_date_format))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.topic_format = cfg["topic.format"]
        self.formatter = java_date_format(cfg["timestamp.format"])

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        if record.timestamp is None:
            raise DataError(f"Timestamp missing on record: {record}")
        when = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) \
            + datetime.timedelta(milliseconds=record.timestamp)
        topic = self.topic_format.replace("${topic}", record.topic) \
            .replace("${timestamp}", self.formatter(when))
        return record.new_record(topic=topic)


_JAVA_FIELDS = {
    "y": lambda d, n: f"{d.year % 100:02d}" if n == 2 else f"{d.year:0{n}d}",
    "M": lambda d, n: (d.strftime("%B") if n >= 4 else d.strftime("%b") if n == 3
                       else f"{d.month:0{n}d}"),
    "d": lambda d, n: f"{d.day:0{n}d}",
    "H": lambda d, n: f"{d.hour:0{n}d}",
    "k": lambda d, n: f"{d.hour or 24:0{n}d}",
    "K": lambda d, n: f"{d.hour % 12:0{n}d}",
    "h": lambda d, n: f"{d.hour % 12 or 12:0{n}d}",
    "m": lambda d, n: f"{d.minute:0{n}d}",
    "s": lambda d, n: f"{d.second:0{n}d}",
    "S": lambda d, n: f"{d.microsecond // 1000:0{n}d}",
    "a": lambda d, n: "AM" if d.hour < 12 else "PM",
    "E": lambda d, n: d.strftime("%A") if n >= 4 else d.strftime("%a"),
    "D": lambda d, n: f"{d.timetuple().tm_yday:0{n}d}",
    "Z": lambda d, n: "+0000",
    "X": lambda d, n: "Z",
    "z": lambda d, n: "UTC",
}


def java_date_format(pattern: str) -> Any:
    """A function formatting a datetime as Java's SimpleDateFormat ``pattern`` would."""
    parts: list[Any] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j == i + 1:
                parts.append("'")
                i += 2
                continue
            if j < 0:
                raise ValueError(f"Unterminated quote in pattern {pattern}")
            parts.append(pattern[i + 1:j].replace("''", "'"))
            i = j + 1
        elif c.isascii() and c.isalpha():
            n = 1
            while i + n < len(pattern) and pattern[i + n] == c:
                n += 1
            if c not in _JAVA_FIELDS:
                raise ValueError(f"Illegal pattern character '{c}'")
            parts.append((_JAVA_FIELDS[c], n))
            i += n
        else:
            parts.append(c)
            i += 1

    def fmt(d: datetime.datetime) -> str:
        return "".join(p if isinstance(p, str) else p[0](d, p[1]) for p in parts)
    return fmt


def _check_date_format(name: str, value: Any) -> None:
    try:
        java_date_format(value)
    except ValueError as e:
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      f"Invalid timestamp format: {e}"]}) from None


class RegexRouter(api.Transformation):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("regex", api.STRING, api.REQUIRED, api.HIGH,
                        "Regular expression to use for matching.", validator=_check_regex)
                .define("replacement", api.STRING, api.REQUIRED, api.HIGH,
                        "Replacement string."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.regex = re.compile(java_regex(cfg["regex"]))
        self.replacement = java_replacement(cfg["replacement"])

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        return record.new_record(topic=m.expand(self.replacement))


def _check_regex(name: str, value: Any) -> None:
    api.regex(name, java_regex(value))


def java_regex(pattern: str) -> str:
    """Java's named groups ``(?<name>...)`` in Python's spelling."""
    return re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern)


def java_replacement(rep: str) -> str:
    """A Java ``Matcher`` replacement (``$1``, ``${name}``, ``\\$``) as a ``Match.expand``
    template."""
    out = []
    i = 0
    while i < len(rep):
        c = rep[i]
        if c == "\\" and i + 1 < len(rep):
            nxt = rep[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif c == "$" and i + 1 < len(rep) and rep[i + 1] == "{":
            j = rep.index("}", i)
            out.append(f"\\g<{rep[i + 2:j]}>")
            i = j + 1
        elif c == "$" and i + 1 < len(rep) and rep[i + 1].isdigit():
            j = i + 1
            while j < len(rep) and rep[j].isdigit():
                j += 1
            out.append(f"\\g<{rep[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Filter(api.Transformation):
    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        return None
