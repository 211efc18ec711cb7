"""Kafka's StringConverter, ByteArrayConverter and SimpleHeaderConverter.

- ``StringConverter`` (also a header converter): any value's text in
  ``converter.encoding`` (UTF-8; ``serializer.encoding``/``deserializer.encoding``
  override one direction); reads back ``(OPTIONAL_STRING, str)``; None stays None.
- ``ByteArrayConverter`` (also a header converter): bytes through unchanged; a schema
  other than bytes, or a value that is not bytes, is a DataError; reads back
  ``(OPTIONAL_BYTES, bytes)``.
- ``SimpleHeaderConverter``: writes a header's value as text as Kafka's
  ``Values.convertToString`` does (strings as they are, booleans ``true``/``false``,
  numbers, bytes base64, Date ``yyyy-MM-dd``, Time ``HH:mm:ss.SSSZ``, Timestamp
  ``yyyy-MM-ddTHH:mm:ss.SSSZ``, arrays/maps/structs as compact JSON with strings quoted);
  reads text back inferring the schema as ``Values.parseString``: ``true``/``false``
  boolean; integers the smallest of int8..int64; other numbers float64; those date/time
  forms their logical types; ``[...]``/``{...}`` arrays and maps (a schema when the
  elements agree, numbers widened to the widest, else none); anything else, and the
  empty string, a string.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from typing import Any

from spool.connect import api, data
from spool.connect.converters import json as jsonconv
from spool.connect.data import DataError, Schema

_ENCODINGS = {"utf8": "utf-8", "utf-8": "utf-8"}


def _encoding(name: str) -> str:
    import codecs
    try:
        return codecs.lookup(_ENCODINGS.get(name.lower(), name)).name
    except LookupError:
        raise api.ConfigError({"converter.encoding": [
            f"Invalid value {name} for configuration converter.encoding: "
            "unsupported encoding"]}) from None


class StringConverter(api.Converter, api.HeaderConverter):
    def __init__(self) -> None:
        self.ser_encoding = self.de_encoding = "utf-8"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("converter.encoding", api.STRING, "UTF8", api.HIGH,
                        "The name of the Java character set to use for encoding strings.")
                .define("converter.type", api.STRING, "value", api.LOW, "key, value or header"))

    def configure(self, props: dict[str, Any], is_key: bool = False) -> None:
        base = str(props.get("converter.encoding", "UTF8"))
        self.ser_encoding = _encoding(str(props.get("serializer.encoding", base)))
        self.de_encoding = _encoding(str(props.get("deserializer.encoding", base)))

    def from_connect_data(self, topic: str, headers: Any, schema: Schema | None,
                          value: Any) -> bytes | None:
        if value is None:
            return None
        return (value if isinstance(value, str) else str(value)).encode(self.ser_encoding)

    def to_connect_data(self, topic: str, headers: Any,
                        raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return data.OPTIONAL_STRING, None
        try:
            return data.OPTIONAL_STRING, bytes(raw).decode(self.de_encoding)
        except UnicodeDecodeError as e:
            raise DataError("Failed to deserialize string: " + str(e)) from e

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, schema, value)

    def to_connect_header(self, topic: str, key: str,
                          raw: bytes | None) -> tuple[Schema | None, Any]:
        return self.to_connect_data(topic, None, raw)


class ByteArrayConverter(api.Converter, api.HeaderConverter):
    def configure(self, props: dict[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_data(self, topic: str, headers: Any, schema: Schema | None,
                          value: Any) -> bytes | None:
        if schema is not None and schema.type != "bytes":
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type.upper()}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError("ByteArrayConverter is not compatible with objects of type "
                            f"{type(value).__name__}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, headers: Any,
                        raw: bytes | None) -> tuple[Schema | None, Any]:
        return data.OPTIONAL_BYTES, None if raw is None else bytes(raw)

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, schema, value)

    def to_connect_header(self, topic: str, key: str,
                          raw: bytes | None) -> tuple[Schema | None, Any]:
        return self.to_connect_data(topic, None, raw)


class SimpleHeaderConverter(api.HeaderConverter):
    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef()

    def configure(self, props: dict[str, Any]) -> None:
        pass

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        if value is None:
            return None
        return convert_to_string(schema, value).encode("utf-8")

    def to_connect_header(self, topic: str, key: str,
                          raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return data.BYTES, bytes(raw)
        if text == "":
            return data.STRING, text
        return parse_string(text)


# ---- Values.convertToString / parseString

def convert_to_string(schema: Schema | None, value: Any) -> str:
    if isinstance(value, str):
        return value
    return _text(schema, value, embedded=False)


def _text(schema: Schema | None, value: Any, embedded: bool) -> str:
    name = schema.name if schema is not None else None
    if value is None:
        return "null"
    if name == data.DATE or (name is None and isinstance(value, datetime.date)
                             and not isinstance(value, datetime.datetime)):
        s = value.isoformat()
    elif name == data.TIME or (name is None and isinstance(value, datetime.time)):
        s = value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    elif name == data.TIMESTAMP or (name is None and isinstance(value, datetime.datetime)):
        v = value.astimezone(datetime.UTC) if value.tzinfo else value
        s = v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    elif isinstance(value, bool):
        return "true" if value else "false"
    elif isinstance(value, (int, float, decimal.Decimal)):
        return str(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        s = base64.b64encode(bytes(value)).decode("ascii")
    elif isinstance(value, str):
        s = value
    elif isinstance(value, (list, tuple)):
        vs = schema.value_schema if schema is not None else None
        return "[" + ",".join(_text(vs, v, True) for v in value) + "]"
    elif isinstance(value, dict):
        if isinstance(value, data.Struct):
            items = [(f.name, f.schema, value.get(f.name)) for f in value.schema.fields]
            return "{" + ",".join(f"{json.dumps(k)}:{_text(s, v, True)}"
                                  for k, s, v in items) + "}"
        ks = schema.key_schema if schema is not None else None
        vs = schema.value_schema if schema is not None else None
        return "{" + ",".join(f"{_text(ks, k, True)}:{_text(vs, v, True)}"
                              for k, v in value.items()) + "}"
    else:
        s = str(value)
    return json.dumps(s, ensure_ascii=False) if embedded else s


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_INT_TYPES = ((data.INT8, 8), (data.INT16, 16), (data.INT32, 32), (data.INT64, 64))


def parse_string(text: str) -> tuple[Schema | None, Any]:
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return data.BOOLEAN, low == "true"
    if low == "null":
        return None, None
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s)
        for schema, bits in _INT_TYPES:
            if -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
                return schema, v
        return data.decimal_schema(0), decimal.Decimal(v)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", s):
        return data.FLOAT64, float(s)
    try:
        if _DATE.match(s):
            return data.DATE_SCHEMA, datetime.date.fromisoformat(s)
        if _TIME.match(s):
            return data.TIME_SCHEMA, datetime.time.fromisoformat(s[:-1])
        if _TIMESTAMP.match(s):
            return data.TIMESTAMP_SCHEMA, datetime.datetime.fromisoformat(
                s[:-1]).replace(tzinfo=datetime.UTC)
    except ValueError:
        pass
    if s[:1] in ("[", "{"):
        try:
            parsed = jsonconv.loads(s)
        except ValueError:
            return data.STRING, text
        return _infer(parsed)
    return data.STRING, text


def _infer(v: Any) -> tuple[Schema | None, Any]:
    """A parsed JSON value with the schema its elements agree on (None where they don't)."""
    if isinstance(v, bool):
        return data.BOOLEAN, v
    if isinstance(v, int):
        return parse_string(str(v))
    if isinstance(v, (float, decimal.Decimal)):
        return data.FLOAT64, float(v)
    if isinstance(v, str):
        return data.STRING, v
    if isinstance(v, list):
        pairs = [_infer(x) for x in v]
        common = _common([p[0] for p in pairs])
        values = [_widen(common, p[1]) for p in pairs]
        return (None if common is None else data.array(common)), values
    if isinstance(v, dict):
        pairs = {k: _infer(x) for k, x in v.items()}
        common = _common([p[0] for p in pairs.values()])
        values = {k: _widen(common, p[1]) for k, p in pairs.items()}
        return (None if common is None else data.map_of(data.STRING, common)), values
    return None, None


_NUMERIC_ORDER = ("int8", "int16", "int32", "int64", "float64")


def _common(schemas: list[Schema | None]) -> Schema | None:
    """The one schema the elements agree on, numbers widened (Kafka's Values does too)."""
    distinct = set(schemas)
    if len(distinct) == 1:
        return distinct.pop()
    if distinct and all(s is not None and s.name is None and s.type in _NUMERIC_ORDER
                        for s in distinct):
        return Schema(max((s.type for s in distinct if s is not None),
                          key=_NUMERIC_ORDER.index))
    return None


def _widen(schema: Schema | None, value: Any) -> Any:
    if schema is not None and schema.type == "float64" and isinstance(value, int) \
            and not isinstance(value, bool):
        return float(value)
    return value
