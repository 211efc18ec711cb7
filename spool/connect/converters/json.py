"""Kafka's JsonConverter (``org.apache.kafka.connect.json.JsonConverter``), byte for byte.

Keys: ``schemas.enable`` (default true), ``decimal.format`` (``BASE64`` default, or
``NUMERIC``), ``replace.null.with.default`` (true), ``schemas.cache.size`` (accepted),
``converter.type`` (key|value|header; set from ``is_key``).

With schemas enabled a value is written as the envelope ``{"schema":S,"payload":P}``,
S in Kafka's schema JSON::

    {"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},...],
     "optional":false,"name":"n","version":1,"doc":"d","parameters":{"scale":"2"},
     "default":...}

(type names ``boolean int8 int16 int32 int64 float double bytes string array map
struct``; ``items`` for arrays, ``keys``/``values`` for maps; the keys after the type in
this order, each only when set). Without schemas P alone is written. JSON is compact
(no spaces), UTF-8, keys in schema order. ``None`` with no schema is no bytes at all.

Payloads: bytes as base64; logical types as Kafka writes them: Decimal as base64 of the
unscaled two's-complement big-endian integer (``decimal.format=NUMERIC``: a JSON number),
Date as int days since the epoch, Time as int ms of the day, Timestamp as int ms since
the epoch. Maps with string keys are objects, other maps arrays of ``[key, value]``.

Reading: no bytes gives ``(None, None)``; with schemas enabled the JSON must be exactly
the two-field envelope (Kafka's DataError otherwise); schemaless payloads come back as
Python values (objects as dicts, integers as int, other numbers as float) with schema None.
Errors are ``data.DataError`` with Kafka's messages.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import json
from typing import Any

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct

_TYPE_TO_JSON = {"float32": "float", "float64": "double"}
_JSON_TO_TYPE = {"float": "float32", "double": "float64"}
EPOCH = datetime.date(1970, 1, 1)
EPOCH_DT = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
    "contain additional fields. If you are trying to deserialize plain JSON data, set "
    "schemas.enable=false in your converter configuration.")


def config_def() -> api.ConfigDef:
    return (api.ConfigDef()
            .define("schemas.enable", api.BOOLEAN, True, api.HIGH,
                    "Include schemas within each of the serialized values and keys.")
            .define("schemas.cache.size", api.INT, 1000, api.HIGH,
                    "The maximum number of schemas that can be cached in this converter.")
            .define("decimal.format", api.STRING, "BASE64", api.LOW,
                    "Controls which format this converter will serialize decimals in.",
                    validator=api.in_values("BASE64", "NUMERIC"))
            .define("replace.null.with.default", api.BOOLEAN, True, api.LOW,
                    "Whether to replace fields that have a default value and that are null "
                    "to the default value.")
            .define("converter.type", api.STRING, "value", api.LOW, "key, value or header",
                    validator=api.in_values("key", "value", "header")))


class JsonConverter(api.Converter, api.HeaderConverter):
    """Kafka's JsonConverter (module doc); also a header converter, as Kafka's."""

    def __init__(self) -> None:
        self.schemas_enable = True
        self.numeric_decimals = False
        self.replace_null_with_default = True
        # Kafka's schemas.cache.size caches: schema object -> its JSON text; schema JSON
        # text -> Schema (schemas are immutable; the ones a task sees are few)
        self._to_json_cache: dict[int, tuple[Schema, bytes]] = {}
        self._from_json_cache: dict[str, Schema | None] = {}
        self._recent: list[tuple[str, Schema | None]] = []  # the last schema texts read
        self.cache_size = 1000

    def config_def(self) -> api.ConfigDef:
        return config_def()

    def configure(self, props: dict[str, Any], is_key: bool = False) -> None:
        props = dict(props)
        props.setdefault("converter.type", "key" if is_key else "value")
        cfg = config_def().parse(props)
        self.schemas_enable = cfg["schemas.enable"]
        self.numeric_decimals = cfg["decimal.format"].upper() == "NUMERIC"
        self.replace_null_with_default = cfg["replace.null.with.default"]
        self.cache_size = max(0, cfg["schemas.cache.size"])

    # ---- Connect -> bytes

    def from_connect_data(self, topic: str, headers: Any, schema: Schema | None,
                          value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = self.to_json(schema, value)
        try:
            text = dumps(payload, self.numeric_decimals)
            if not self.schemas_enable:
                return text
            return b'{"schema":' + self._schema_text(schema) + b',"payload":' + text + b"}"
        except (TypeError, ValueError) as e:
            raise DataError("Converting Kafka Connect data to byte[] failed due to "
                            f"serialization error: {e}") from e

    def _schema_text(self, schema: Schema | None) -> bytes:
        if schema is None:
            return b"null"
        hit = self._to_json_cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        text = dumps(schema_to_json(schema, self))
        if len(self._to_json_cache) >= self.cache_size:
            self._to_json_cache.clear()
        if self.cache_size:
            self._to_json_cache[id(schema)] = (schema, text)
        return text

    def _schema_from(self, doc: Any) -> Schema | None:
        if doc is None:
            return None
        key = json.dumps(doc, separators=(",", ":"), default=str)
        try:
            return self._from_json_cache[key]
        except KeyError:
            pass
        schema = schema_from_json(doc, self)
        if len(self._from_json_cache) >= self.cache_size:
            self._from_json_cache.clear()
        if self.cache_size:
            self._from_json_cache[key] = schema
        return schema

    def from_connect_header(self, topic: str, key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, schema, value)

    def to_json(self, schema: Schema | None, value: Any) -> Any:
        if value is None:
            if schema is None:
                return None
            if schema.default is not None and self.replace_null_with_default:
                return self.to_json(schema, schema.default)
            if schema.optional:
                return None
            raise DataError("Conversion error: null value for field that is required and "
                            "has no default value")
        if schema is not None and schema.name in _LOGICAL_TO_JSON:
            return _LOGICAL_TO_JSON[schema.name](self, schema, value)
        t = schema.type if schema is not None else _infer_type(value)
        if t is None:
            raise DataError(f"Java class {type(value).__name__} does not have corresponding "
                            "schema type.")
        where = t.upper() if schema is not None else "unknown schema"
        if t in ("int8", "int16", "int32", "int64"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            return value
        if t in ("float32", "float64"):
            if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            return float(value)
        if t == "boolean":
            if not isinstance(value, bool):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            return value
        if t == "string":
            if not isinstance(value, str):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            return value
        if t == "bytes":
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise DataError(f"Invalid type for bytes type: {type(value).__name__}")
            return base64.b64encode(bytes(value)).decode("ascii")
        if t == "array":
            if not isinstance(value, (list, tuple)):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            vs = schema.value_schema if schema is not None else None
            return [self.to_json(vs, v) for v in value]
        if t == "map":
            if not isinstance(value, dict):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            ks = schema.key_schema if schema is not None else None
            vs = schema.value_schema if schema is not None else None
            object_mode = (ks.type == "string") if ks is not None \
                else all(isinstance(k, str) for k in value)
            if object_mode:
                return {_as_text(self.to_json(ks, k)): self.to_json(vs, v)
                        for k, v in value.items()}
            return [[self.to_json(ks, k), self.to_json(vs, v)] for k, v in value.items()]
        if t == "struct":
            if not isinstance(value, dict):
                raise DataError(f"Invalid type for {where}: {type(value).__name__}")
            if schema is None:
                raise DataError(f"Java class {type(value).__name__} does not have "
                                "corresponding schema type.")
            if isinstance(value, Struct) and value.schema is not schema \
                    and value.schema != schema:
                raise DataError("Mismatching schema.")
            return {f.name: self.to_json(f.schema, value.get(f.name)) for f in schema.fields}
        raise DataError(f"Couldn't convert {value!r} to JSON.")

    # ---- bytes -> Connect

    def to_connect_data(self, topic: str, headers: Any,
                        raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        if self.schemas_enable:
            fast = self._compact_envelope(raw)
            if fast is not None:
                return fast[0], self.to_connect(fast[0], fast[1])
        try:
            doc = loads(raw)
        except ValueError as e:
            raise DataError("Converting byte[] to Kafka Connect data failed due to "
                            f"serialization error: {e}") from e
        if self.schemas_enable:
            if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
                raise DataError(ENVELOPE_ERROR)
            schema = self._schema_from(doc["schema"])
            payload = doc["payload"]
        else:
            schema, payload = None, doc
        return schema, self.to_connect(schema, payload)

    def _compact_envelope(self, raw: bytes) -> tuple[Schema | None, Any] | None:
        """The schema and payload of ``{"schema":S,"payload":P}`` written compactly (as
        Kafka and this converter write it), S looked up by its text: a schema seen before
        is not parsed again. None for any other shape (the general path decides)."""
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else bytes(raw).decode()
        except UnicodeDecodeError:
            return None
        if not text.startswith('{"schema":'):
            return None
        schema: Schema | None = None
        end = -1
        for known, parsed in self._recent:
            if text.startswith(known, 10) and text.startswith(',"payload":', 10 + len(known)):
                schema, end = parsed, 10 + len(known)
                break
        try:
            if end < 0:
                doc, end = _DECODER.raw_decode(text, 10)
                if not text.startswith(',"payload":', end):
                    return None
                schema = self._schema_from_text(text[10:end], doc)
            payload, stop = _DECODER.raw_decode(text, end + 11)
        except ValueError:
            return None
        if text[stop:].strip() != "}":
            return None
        return schema, payload

    def _schema_from_text(self, key: str, doc: Any) -> Schema | None:
        try:
            schema = self._from_json_cache[key]
        except KeyError:
            schema = schema_from_json(doc, self)
            if len(self._from_json_cache) >= self.cache_size:
                self._from_json_cache.clear()
            if self.cache_size:
                self._from_json_cache[key] = schema
        self._recent = [(key, schema), *[r for r in self._recent if r[0] != key]][:4]
        return schema

    def to_connect_header(self, topic: str, key: str,
                          raw: bytes | None) -> tuple[Schema | None, Any]:
        return self.to_connect_data(topic, None, raw)

    def to_connect(self, schema: Schema | None, value: Any) -> Any:
        if schema is None:
            return _schemaless(value)
        if value is None:
            if schema.default is not None and self.replace_null_with_default:
                return schema.default
            if schema.optional:
                return None
            raise DataError(f"Invalid null value for required {schema.type.upper()} field")
        if schema.name in _LOGICAL_TO_CONNECT:
            return _LOGICAL_TO_CONNECT[schema.name](schema, value)
        t = schema.type
        if t in ("int8", "int16", "int32", "int64"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise DataError(f"Invalid value {value!r} for {t.upper()} field")
            return value
        if t in ("float32", "float64"):
            if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal, float)):
                raise DataError(f"Invalid value {value!r} for {t.upper()} field")
            return float(value)
        if t == "boolean":
            if not isinstance(value, bool):
                raise DataError(f"Invalid value {value!r} for BOOLEAN field")
            return value
        if t == "string":
            if not isinstance(value, str):
                raise DataError(f"Invalid value {value!r} for STRING field")
            return value
        if t == "bytes":
            return _b64(value, "Invalid bytes field")
        if t == "array":
            if not isinstance(value, list):
                raise DataError(f"Invalid value {value!r} for ARRAY field")
            return [self.to_connect(schema.value_schema, v) for v in value]
        if t == "map":
            ks, vs = schema.key_schema, schema.value_schema
            if ks is None or ks.type == "string":
                if not isinstance(value, dict):
                    raise DataError(f"Invalid value {value!r} for MAP field")
                return {self.to_connect(ks, k): self.to_connect(vs, v) for k, v in value.items()}
            if not isinstance(value, list):
                raise DataError("Maps with non-string fields should be encoded as JSON array "
                                "of tuples, but found " + type(value).__name__)
            out = {}
            for entry in value:
                if not isinstance(entry, list):
                    raise DataError("Found invalid map entry instead of array tuple: "
                                    + type(entry).__name__)
                if len(entry) != 2:
                    raise DataError(f"Found invalid map entry, expected length 2 but found "
                                    f":{len(entry)}")
                out[self.to_connect(ks, entry[0])] = self.to_connect(vs, entry[1])
            return out
        if t == "struct":
            if not isinstance(value, dict):
                raise DataError("Structs should be encoded as JSON objects, but found "
                                + _node_type(value))
            return Struct(schema, {f.name: self.to_connect(f.schema, value.get(f.name))
                                   for f in schema.fields})
        raise DataError(f"Unknown schema type: {t}")


# ---- schemas

def schema_to_json(schema: Schema | None, conv: JsonConverter | None = None) -> Any:
    """Kafka's ``asJsonSchema``: a dict in Kafka's key order, or None."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": _TYPE_TO_JSON.get(schema.type, schema.type)}
    if schema.type == "array":
        out["items"] = schema_to_json(schema.value_schema, conv)
    elif schema.type == "map":
        out["keys"] = schema_to_json(schema.key_schema, conv)
        out["values"] = schema_to_json(schema.value_schema, conv)
    elif schema.type == "struct":
        out["fields"] = [{**schema_to_json(f.schema, conv), "field": f.name}
                         for f in schema.fields]
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = (conv or _DEFAULT).to_json(schema, schema.default)
    return out


def schema_from_json(doc: Any, conv: JsonConverter | None = None) -> Schema | None:
    """Kafka's ``asConnectSchema``: the Schema a schema JSON describes (DataError)."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise DataError(f"Schema must be a JSON object, found {_node_type(doc)}")
    tname = doc.get("type")
    if not isinstance(tname, str):
        raise DataError("Schema must contain 'type' field")
    t = _JSON_TO_TYPE.get(tname, tname)
    kw: dict[str, Any] = {}
    if t == "struct":
        fields = doc.get("fields")
        if not isinstance(fields, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        fs = []
        for i, f in enumerate(fields):
            name = f.get("field") if isinstance(f, dict) else None
            if not isinstance(name, str):
                raise DataError("Struct schema's field name not specified properly")
            fs.append(data.Field(name, i, schema_from_json(f, conv)))  # type: ignore[arg-type]
        kw["fields"] = tuple(fs)
    elif t == "array":
        if doc.get("items") is None:
            raise DataError("Array schema did not specify the items type")
        kw["value_schema"] = schema_from_json(doc["items"], conv)
    elif t == "map":
        if doc.get("keys") is None:
            raise DataError("Map schema did not specify the key type")
        if doc.get("values") is None:
            raise DataError("Map schema did not specify the value type")
        kw["key_schema"] = schema_from_json(doc["keys"], conv)
        kw["value_schema"] = schema_from_json(doc["values"], conv)
    elif t not in data.PRIMITIVES:
        raise DataError(f"Unknown schema type: {tname}")
    params = doc.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise DataError("Schema parameters must be a JSON object.")
    version = doc.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise DataError("Schema version must be an integer.")
    schema = Schema(t, optional=bool(doc.get("optional", False)), name=doc.get("name"),
                    version=version, doc=doc.get("doc"),
                    parameters=tuple((str(k), str(v)) for k, v in (params or {}).items()),
                    **kw)
    if doc.get("default") is not None:
        default = (conv or _DEFAULT).to_connect(schema, doc["default"])
        schema = dataclasses.replace(schema, default=default)
    return schema


# ---- logical types

def _decimal_to_json(conv: JsonConverter, schema: Schema, value: Any) -> Any:
    if not isinstance(value, decimal.Decimal):
        raise DataError(f"Invalid type for Decimal, expected BigDecimal but was "
                        f"{type(value).__name__}")
    if conv.numeric_decimals:
        return _Number(format(value, "f"))
    return base64.b64encode(decimal_to_bytes(schema, value)).decode("ascii")


def decimal_to_bytes(schema: Schema, value: decimal.Decimal) -> bytes:
    """Kafka's ``Decimal.fromLogical``: the unscaled value, two's complement, big-endian."""
    scale = int(schema.params.get("scale", "0"))
    exp = value.as_tuple().exponent
    if not isinstance(exp, int) or -exp != scale:
        if isinstance(exp, int) and -exp < scale:  # 1.5 for scale 2: exact as 1.50
            value = value.quantize(decimal.Decimal(1).scaleb(-scale))
        else:
            raise DataError("Decimal value has mismatching scale for given Decimal schema")
    unscaled = int(value.scaleb(scale))
    n = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(n, "big", signed=True)


def decimal_from_bytes(schema: Schema, raw: bytes) -> decimal.Decimal:
    scale = int(schema.params.get("scale", "0"))
    return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


def _decimal_to_connect(schema: Schema, value: Any) -> decimal.Decimal:
    if isinstance(value, bool):
        pass
    elif isinstance(value, (int, decimal.Decimal)):
        return decimal.Decimal(value)
    elif isinstance(value, float):
        return decimal.Decimal(repr(value))
    elif isinstance(value, str):
        return decimal_from_bytes(schema, _b64(value, "Invalid bytes field"))
    raise DataError("Invalid type for Decimal, underlying representation should be numeric "
                    f"or bytes but was {_node_type(value)}")


def _date_to_json(conv: JsonConverter, schema: Schema, value: Any) -> int:
    if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
        raise DataError(f"Invalid type for Date, expected Date but was {type(value).__name__}")
    return (value - EPOCH).days


def _time_to_json(conv: JsonConverter, schema: Schema, value: Any) -> int:
    if not isinstance(value, datetime.time):
        raise DataError(f"Invalid type for Time, expected Date but was {type(value).__name__}")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
        + value.microsecond // 1000


def _timestamp_to_json(conv: JsonConverter, schema: Schema, value: Any) -> int:
    if not isinstance(value, datetime.datetime):
        raise DataError("Invalid type for Timestamp, expected Date but was "
                        f"{type(value).__name__}")
    return timestamp_ms(value)


def timestamp_ms(value: datetime.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    delta = value - EPOCH_DT
    return (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _int_for(kind: str, value: Any, integral: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(f"Invalid type for {kind}, underlying representation should be "
                        f"{'integral' if integral else 'integer'} but was {_node_type(value)}")
    return value


def _date_to_connect(schema: Schema, value: Any) -> datetime.date:
    return EPOCH + datetime.timedelta(days=_int_for("Date", value))


def _time_to_connect(schema: Schema, value: Any) -> datetime.time:
    ms = _int_for("Time", value)
    if not 0 <= ms < 86_400_000:
        raise DataError("Time values must use number of milliseconds greater than 0 and "
                        "less than 86400000")
    return (datetime.datetime.min + datetime.timedelta(milliseconds=ms)).time()


def _timestamp_to_connect(schema: Schema, value: Any) -> datetime.datetime:
    return EPOCH_DT + datetime.timedelta(milliseconds=_int_for("Timestamp", value, True))


_LOGICAL_TO_JSON = {data.DECIMAL: _decimal_to_json, data.DATE: _date_to_json,
                    data.TIME: _time_to_json, data.TIMESTAMP: _timestamp_to_json}
_LOGICAL_TO_CONNECT = {data.DECIMAL: _decimal_to_connect, data.DATE: _date_to_connect,
                       data.TIME: _time_to_connect, data.TIMESTAMP: _timestamp_to_connect}


# ---- JSON text

class _Number(float):
    """A JSON number written from its exact text (NUMERIC decimals)."""

    def __new__(cls, text: str) -> _Number:
        obj = super().__new__(cls, text)
        obj.text = text  # type: ignore[attr-defined]
        return obj

    def __repr__(self) -> str:
        return self.text  # type: ignore[attr-defined,no-any-return]


class _Encoder(json.JSONEncoder):
    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        # the C encoder calls float.__repr__ directly: use the Python one for _Number
        return json.encoder._make_iterencode(  # type: ignore[attr-defined]
            {}, self.default, json.encoder.py_encode_basestring, self.indent,
            _float_text, self.key_separator, self.item_separator, self.sort_keys,
            self.skipkeys, _one_shot)(o, 0)


def _float_text(o: float) -> str:
    if isinstance(o, _Number):
        return repr(o)
    if o != o:
        return "NaN"
    if o in (float("inf"), float("-inf")):
        return "Infinity" if o > 0 else "-Infinity"
    return float.__repr__(o)


def _contains_number(o: Any) -> bool:
    if isinstance(o, _Number):
        return True
    if isinstance(o, dict):
        return any(_contains_number(v) for v in o.values())
    if isinstance(o, list):
        return any(_contains_number(v) for v in o)
    return False


def dumps(doc: Any, numbers: bool = True) -> bytes:
    """Compact UTF-8 JSON, as Jackson writes it (``numbers``: ``doc`` may hold exact
    NUMERIC decimals)."""
    if numbers and _contains_number(doc):
        text = "".join(_Encoder(separators=(",", ":"), ensure_ascii=False).iterencode(doc))
    else:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _constant(c: str) -> float:
    return float(c.replace("Infinity", "inf"))


_DECODER = json.JSONDecoder(parse_float=decimal.Decimal, parse_constant=_constant)


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """JSON with non-integral numbers as ``decimal.Decimal`` (exact for decimals)."""
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    return json.loads(text, parse_float=decimal.Decimal, parse_constant=_constant)


def _schemaless(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list):
        return [_schemaless(v) for v in value]
    if isinstance(value, dict):
        return {k: _schemaless(v) for k, v in value.items()}
    return value


def _infer_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, (float, decimal.Decimal)):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Struct):
        return "struct"
    if isinstance(value, dict):
        return "map"
    return None


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return dumps(v).decode("utf-8")


def _b64(value: Any, message: str) -> bytes:
    if not isinstance(value, str):
        raise DataError(message)
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as e:
        raise DataError(message) from e


def _node_type(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, (int, float, decimal.Decimal)):
        return "NUMBER"
    if isinstance(v, str):
        return "STRING"
    if isinstance(v, list):
        return "ARRAY"
    return "OBJECT"


_DEFAULT = JsonConverter()
