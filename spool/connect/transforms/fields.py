"""Kafka's field transforms: InsertField, ReplaceField, MaskField, ExtractField (``$Key``
and ``$Value`` each) and ValueToKey, with Kafka's keys and behaviour.

- **InsertField**: ``topic.field``, ``partition.field``, ``offset.field`` (sink records
  only), ``timestamp.field``, ``static.field`` + ``static.value``. A field name ending in
  ``!`` is required in the new schema, ``?`` (or nothing) optional. Schemaless maps get
  the values (timestamp as ms); structs get a schema with the fields appended (string,
  int32, int64, Timestamp, string).
- **ReplaceField**: ``exclude``, ``include`` (a field is kept when not excluded and
  ``include`` is empty or names it), ``renames`` (``old:new,...``).
- **MaskField**: ``fields``, ``replacement``: the fields' values become their type's
  empty value (0, 0.0, false, "", b"", Decimal 0, the epoch, [] or {}) or
  ``replacement`` converted to the field's type.
- **ExtractField**: ``field``: the record's key/value becomes that field (schemaless
  maps: the entry, or None); with ``field.syntax.version=V2`` a dotted path
  (``after.id``) into nested structs/maps (KIP-821).
- **ValueToKey**: ``fields``: the key becomes a struct (or map) of those value fields.

A null key/value (a tombstone) passes through unchanged, as in Kafka 3.x. Wrong shapes
are ``DataError`` with Kafka's messages (``Only Struct objects supported for
[field insertion], found: ...``).
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct
from spool.connect.transforms.base import (
    KeyOrValue,
    SchemaCache,
    non_empty_list,
    require_map,
    require_sink_record,
    require_struct,
    struct_like,
)

EPOCH_DT = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


# ---- InsertField

def _spec(spec: str | None) -> tuple[str, bool] | None:
    """``(name, optional)`` of an InsertField field spec, or None when unset."""
    if not spec:
        return None
    if spec.endswith("?"):
        return spec[:-1], True
    if spec.endswith("!"):
        return spec[:-1], False
    return spec, True


class InsertField(KeyOrValue):
    PURPOSE = "field insertion"

    def config_def(self) -> api.ConfigDef:
        d = api.ConfigDef()
        for k, doc in (("topic.field", "Field name for Kafka topic."),
                       ("partition.field", "Field name for Kafka partition."),
                       ("offset.field", "Field name for Kafka offset (sink connectors only)."),
                       ("timestamp.field", "Field name for record timestamp."),
                       ("static.field", "Field name for static data field."),
                       ("static.value", "Static field value, if field name configured.")):
            d.define(k, api.STRING, None, api.MEDIUM, doc)
        return d.define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value.")

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.topic = _spec(cfg["topic.field"])
        self.partition = _spec(cfg["partition.field"])
        self.offset = _spec(cfg["offset.field"])
        self.timestamp = _spec(cfg["timestamp.field"])
        self.static = _spec(cfg["static.field"])
        self.static_value = cfg["static.value"]
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if value is None:
            return record
        if schema is None:
            out = dict(require_map(value, self.PURPOSE))
            if self.topic:
                out[self.topic[0]] = record.topic
            if self.partition and record.kafka_partition is not None:
                out[self.partition[0]] = record.kafka_partition
            if self.offset:
                out[self.offset[0]] = require_sink_record(record, self.PURPOSE).kafka_offset
            if self.timestamp and record.timestamp is not None:
                out[self.timestamp[0]] = record.timestamp
            if self.static and self.static_value is not None:
                out[self.static[0]] = self.static_value
            return self.updated(record, None, out)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get(struct.schema, self._schema)
        vals = {f.name: struct.get(f.name) for f in struct.schema.fields}
        if self.topic:
            vals[self.topic[0]] = record.topic
        if self.partition and record.kafka_partition is not None:
            vals[self.partition[0]] = record.kafka_partition
        if self.offset:
            vals[self.offset[0]] = require_sink_record(record, self.PURPOSE).kafka_offset
        if self.timestamp and record.timestamp is not None:
            vals[self.timestamp[0]] = EPOCH_DT + datetime.timedelta(
                milliseconds=record.timestamp)
        if self.static and self.static_value is not None:
            vals[self.static[0]] = self.static_value
        return self.updated(record, new_schema, Struct(new_schema, vals))

    def _schema(self, base: Schema) -> Schema:
        fields = [(f.name, f.schema) for f in base.fields]
        for spec, schema in ((self.topic, data.STRING), (self.partition, data.INT32),
                             (self.offset, data.INT64), (self.timestamp, data.TIMESTAMP_SCHEMA),
                             (self.static, data.STRING)):
            if spec:
                fields.append((spec[0], data.optional(schema) if spec[1] else schema))
        return struct_like(base, fields)


class InsertFieldKey(InsertField):
    operates_on = "key"


class InsertFieldValue(InsertField):
    operates_on = "value"


# ---- ReplaceField

class ReplaceField(KeyOrValue):
    PURPOSE = "field replacement"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("exclude", api.LIST, [], api.MEDIUM,
                        "Fields to exclude. This takes precedence over the fields to include.")
                .define("include", api.LIST, [], api.MEDIUM,
                        "Fields to include. If specified, only these fields will be used.")
                .define("renames", api.LIST, [], api.MEDIUM,
                        "Field rename mappings.", validator=_check_renames)
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.exclude = set(cfg["exclude"])
        self.include = set(cfg["include"])
        self.renames = dict(r.split(":", 1) for r in cfg["renames"])
        self.cache = SchemaCache()

    def keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if value is None:
            return record
        if schema is None:
            m = require_map(value, self.PURPOSE)
            return self.updated(record, None, {self.renamed(k): v for k, v in m.items()
                                               if self.keep(k)})
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get(struct.schema, self._schema)
        vals = {self.renamed(f.name): struct.get(f.name) for f in struct.schema.fields
                if self.keep(f.name)}
        return self.updated(record, new_schema, Struct(new_schema, vals))

    def _schema(self, base: Schema) -> Schema:
        return struct_like(base, [(self.renamed(f.name), f.schema) for f in base.fields
                                  if self.keep(f.name)])


def _check_renames(name: str, value: Any) -> None:
    for r in value:
        parts = r.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                          f"Invalid rename mapping: {r}"]})


class ReplaceFieldKey(ReplaceField):
    operates_on = "key"


class ReplaceFieldValue(ReplaceField):
    operates_on = "value"


# ---- MaskField

_EMPTY_BY_TYPE: dict[str, Any] = {
    "boolean": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "float32": 0.0,
    "float64": 0.0, "string": "", "bytes": b"", "array": [], "map": {}}
_EMPTY_BY_LOGICAL: dict[str, Any] = {
    data.DECIMAL: decimal.Decimal(0), data.DATE: datetime.date(1970, 1, 1),
    data.TIME: datetime.time(0), data.TIMESTAMP: EPOCH_DT}


class MaskField(KeyOrValue):
    PURPOSE = "mask fields"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("fields", api.LIST, api.REQUIRED, api.HIGH, "Names of fields to mask.",
                        validator=non_empty_list)
                .define("replacement", api.STRING, None, api.LOW,
                        "Custom value replacement, that will be applied to all 'fields' "
                        "values (numeric or non-empty string values only).",
                        validator=_non_empty_string)
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.fields = set(cfg["fields"])
        self.replacement = cfg["replacement"]

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if value is None:
            return record
        if schema is None:
            m = dict(require_map(value, self.PURPOSE))
            for f in self.fields:
                if f in m:
                    m[f] = self._masked_by_value(m[f])
            return self.updated(record, None, m)
        struct = require_struct(value, self.PURPOSE)
        vals = dict(struct)
        for f in struct.schema.fields:
            if f.name in self.fields:
                vals[f.name] = self._masked_by_schema(f.schema, vals.get(f.name))
        return self.updated(record, schema, Struct(struct.schema, vals))

    def _masked_by_schema(self, schema: Schema, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is not None:
            return _replacement(schema.name or schema.type, self.replacement)
        if schema.name in _EMPTY_BY_LOGICAL:
            return _EMPTY_BY_LOGICAL[schema.name]
        if schema.type == "struct":
            raise DataError(f"Cannot mask value of type: {schema.type.upper()}")
        return type(_EMPTY_BY_TYPE[schema.type])(_EMPTY_BY_TYPE[schema.type])

    def _masked_by_value(self, value: Any) -> Any:
        if value is None:
            return None
        kind = _value_kind(value)
        if kind is None:
            raise DataError(f"Cannot mask value of type: {type(value).__name__}")
        if self.replacement is not None:
            return _replacement(kind, self.replacement)
        if kind in _EMPTY_BY_LOGICAL:
            return _EMPTY_BY_LOGICAL[kind]
        return type(_EMPTY_BY_TYPE[kind])(_EMPTY_BY_TYPE[kind])


def _value_kind(v: Any) -> str | None:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, decimal.Decimal):
        return data.DECIMAL
    if isinstance(v, str):
        return "string"
    if isinstance(v, (bytes, bytearray)):
        return "bytes"
    if isinstance(v, datetime.datetime):
        return data.TIMESTAMP
    if isinstance(v, datetime.date):
        return data.DATE
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict) and not isinstance(v, Struct):
        return "map"
    return None


def _replacement(kind: str, text: str) -> Any:
    try:
        if kind in ("int8", "int16", "int32", "int64"):
            return int(text)
        if kind in ("float32", "float64"):
            return float(text)
        if kind == data.DECIMAL:
            return decimal.Decimal(text)
        if kind == "boolean":
            return text.strip().lower() == "true"
        if kind == "string":
            return text
    except (ValueError, decimal.InvalidOperation):
        raise DataError(f"Unable to convert {text} to {kind}") from None
    raise DataError(f"Cannot mask value with a replacement of type: {kind}")


def _non_empty_string(name: str, value: Any) -> None:
    if value is not None and value == "":
        raise api.ConfigError({name: [f"Invalid value {value} for configuration {name}: "
                                      "String may not be empty"]})


class MaskFieldKey(MaskField):
    operates_on = "key"


class MaskFieldValue(MaskField):
    operates_on = "value"


# ---- ExtractField

class ExtractField(KeyOrValue):
    PURPOSE = "field extraction"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("field", api.STRING, api.REQUIRED, api.MEDIUM,
                        "Field name to extract.", validator=_non_empty_string)
                .define("field.syntax.version", api.STRING, "V1", api.MEDIUM,
                        "V1: a field name; V2: a dotted path into nested structs/maps.",
                        validator=api.in_values("V1", "V2"))
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.field = cfg["field"]
        self.path = self.field.split(".") if cfg["field.syntax.version"].upper() == "V2" \
            else [self.field]

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if schema is None:
            if value is None:
                return self.updated(record, None, None)
            v: Any = require_map(value, self.PURPOSE)
            for part in self.path:
                v = v.get(part) if isinstance(v, dict) else None
            return self.updated(record, None, v)
        if value is not None:
            require_struct(value, self.PURPOSE)
        s: Schema | None = schema
        for part in self.path:
            f = s.field(part) if s is not None and s.type == "struct" else None
            if f is None:
                raise DataError(f"Unknown field: {self.field}")
            s = f.schema
            value = value.get(part) if isinstance(value, dict) else None
        return self.updated(record, s, value)


class ExtractFieldKey(ExtractField):
    operates_on = "key"


class ExtractFieldValue(ExtractField):
    operates_on = "value"


# ---- ValueToKey

class ValueToKey(api.Transformation):
    PURPOSE = "copying fields from value to key"

    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("fields", api.LIST, api.REQUIRED, api.HIGH,
                        "Field names on the record value to extract as the record key.",
                        validator=non_empty_list)
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        self.fields = self.config_def().parse(props)["fields"]
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None,
                                     key={f: value.get(f) for f in self.fields})
        value = require_struct(record.value, self.PURPOSE)
        key_schema = self.cache.get(value.schema, self._schema)
        return record.new_record(key_schema=key_schema,
                                 key=Struct(key_schema, {f: value.get(f) for f in self.fields}))

    def _schema(self, value_schema: Schema) -> Schema:
        fields = []
        for name in self.fields:
            f = value_schema.field(name)
            if f is None:
                raise DataError(f"Field does not exist: {name}")
            fields.append((name, f.schema))
        return data.struct(None, fields)
