"""Kafka's Flatten, HoistField, Cast, SetSchemaMetadata ($Key and $Value each),
InsertHeader and DropHeaders.

- **Flatten**: ``delimiter`` (``.``): nested structs (maps when schemaless) become
  top-level fields named ``outer<delimiter>inner``; a field inside an optional struct
  becomes optional. Arrays are kept as they are.
- **HoistField**: ``field``: the key/value becomes a struct (map) with that one field.
- **Cast**: ``spec``: ``type`` (the whole key/value) or ``field:type,...``; types
  ``int8 int16 int32 int64 float32 float64 boolean string`` (and ``bytes`` from bytes);
  strings are parsed, numbers truncated toward zero, booleans 1/0, ``string`` of a
  Decimal is its plain text; a value that does not convert is a DataError.
- **SetSchemaMetadata**: ``schema.name``, ``schema.version``: the schema gets them
  (the struct value is re-attached to the new schema).
- **InsertHeader**: ``header``, ``value.literal``: adds a header (a string, schema
  string). **DropHeaders**: ``headers``: removes every header with one of those names.
"""

from __future__ import annotations

import dataclasses
import decimal
from typing import Any

from spool.connect import api, data
from spool.connect.data import DataError, Schema, Struct
from spool.connect.transforms.base import (
    KeyOrValue,
    SchemaCache,
    non_empty_list,
    require_map,
    require_struct,
    struct_like,
)

# ---- Flatten

class Flatten(KeyOrValue):
    PURPOSE = "flattening"

    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define("delimiter", api.STRING, ".", api.MEDIUM,
                                      "Delimiter to insert between field names from the "
                                      "input record when generating field names for the "
                                      "output record")

    def configure(self, props: dict[str, Any]) -> None:
        self.delimiter = self.config_def().parse(props)["delimiter"]
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if value is None:
            return record
        if schema is None:
            out: dict[str, Any] = {}
            self._flat_map(require_map(value, self.PURPOSE), "", out)
            return self.updated(record, None, out)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get(struct.schema, self._schema)
        vals: dict[str, Any] = {}
        self._flat_struct(struct, struct.schema, "", vals)
        return self.updated(record, new_schema, Struct(new_schema, vals))

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.delimiter}{name}" if prefix else name

    def _flat_map(self, m: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for k, v in m.items():
            if isinstance(v, dict) and not isinstance(v, Struct):
                self._flat_map(v, self._name(prefix, str(k)), out)
            else:
                out[self._name(prefix, str(k))] = v

    def _schema(self, base: Schema) -> Schema:
        fields: list[tuple[str, Schema]] = []
        self._flat_fields(base, "", False, fields)
        return struct_like(base, fields)

    def _flat_fields(self, s: Schema, prefix: str, optional: bool,
                     out: list[tuple[str, Schema]]) -> None:
        for f in s.fields:
            name = self._name(prefix, f.name)
            if f.schema.type == "struct":
                self._flat_fields(f.schema, name, optional or f.schema.optional, out)
            else:
                fs = f.schema
                if optional and not fs.optional:
                    fs = dataclasses.replace(fs, optional=True)
                out.append((name, fs))

    def _flat_struct(self, value: dict[str, Any] | None, s: Schema, prefix: str,
                     out: dict[str, Any]) -> None:
        for f in s.fields:
            name = self._name(prefix, f.name)
            v = None if value is None else value.get(f.name)
            if f.schema.type == "struct":
                self._flat_struct(v, f.schema, name, out)
            else:
                out[name] = v


class FlattenKey(Flatten):
    operates_on = "key"


class FlattenValue(Flatten):
    operates_on = "value"


# ---- HoistField

class HoistField(KeyOrValue):
    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define("field", api.STRING, api.REQUIRED, api.MEDIUM,
                                      "Field name for the single field that will be created "
                                      "in the resulting Struct or Map.")

    def configure(self, props: dict[str, Any]) -> None:
        self.field = self.config_def().parse(props)["field"]
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if schema is None:
            return self.updated(record, None, {self.field: value})
        new_schema = self.cache.get(schema, lambda s: data.struct(None, [(self.field, s)]))
        return self.updated(record, new_schema, Struct(new_schema, {self.field: value}))


class HoistFieldKey(HoistField):
    operates_on = "key"


class HoistFieldValue(HoistField):
    operates_on = "value"


# ---- Cast

CAST_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string",
              "bytes")


def _spec(items: list[str], name: str = "spec") -> tuple[str | None, dict[str, str]]:
    whole: str | None = None
    fields: dict[str, str] = {}
    for item in items:
        field, sep, t = item.rpartition(":")
        t = t.strip().lower()
        if t not in CAST_TYPES or (not sep and len(items) > 1):
            raise api.ConfigError({name: [f"Invalid value {items} for configuration {name}: "
                                          "Invalid type found in casting spec: " + item]})
        if sep:
            fields[field.strip()] = t
        else:
            whole = t
    return whole, fields


class Cast(KeyOrValue):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("spec", api.LIST, api.REQUIRED, api.HIGH,
                        "List of fields and the type to cast them to of the form "
                        "field1:type,field2:type to cast fields of Maps or Structs. A single "
                        "type to cast the entire value.", validator=_checked_spec)
                .define("replace.null.with.default", api.BOOLEAN, True, api.MEDIUM,
                        "Whether to replace fields that have a default value and that are "
                        "null to the default value."))

    def configure(self, props: dict[str, Any]) -> None:
        self.whole, self.fields = _spec(self.config_def().parse(props)["spec"])
        self.cache = SchemaCache()

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if self.whole is not None:
            new_schema = None if schema is None else _cast_schema(schema, self.whole)
            return self.updated(record, new_schema, None if value is None
                                else cast_value(value, self.whole))
        if value is None:
            return record
        if schema is None:
            m = dict(require_map(value, "cast types"))
            for k, t in self.fields.items():
                if k in m and m[k] is not None:
                    m[k] = cast_value(m[k], t)
            return self.updated(record, None, m)
        struct = require_struct(value, "cast types")
        new_schema = self.cache.get(struct.schema, self._schema)
        vals = {f.name: (cast_value(struct.get(f.name), self.fields[f.name])
                         if f.name in self.fields and struct.get(f.name) is not None
                         else struct.get(f.name)) for f in struct.schema.fields}
        return self.updated(record, new_schema, Struct(new_schema, vals))

    def _schema(self, base: Schema) -> Schema:
        return struct_like(base, [(f.name, _cast_schema(f.schema, self.fields[f.name])
                                   if f.name in self.fields else f.schema)
                                  for f in base.fields])


def _checked_spec(name: str, value: Any) -> None:
    if not value:
        non_empty_list(name, value)
    _spec(value, name)


def _cast_schema(s: Schema, t: str) -> Schema:
    if s.type in ("struct", "array", "map"):
        raise DataError(f"Cast transformation does not support casting to/from "
                        f"{s.type.upper()}")
    return Schema(t, optional=s.optional)


def cast_value(v: Any, t: str) -> Any:
    """``v`` as Connect type ``t`` (Kafka's Cast rules, module doc)."""
    try:
        if t in ("int8", "int16", "int32", "int64"):
            if isinstance(v, bool):
                out = int(v)
            elif isinstance(v, str):
                out = int(decimal.Decimal(v.strip()))
            else:
                out = int(v)
            data.validate(Schema(t), out)
            return out
        if t in ("float32", "float64"):
            return float(int(v) if isinstance(v, bool) else v)
        if t == "boolean":
            if isinstance(v, str):
                s = v.strip().lower()
                if s not in ("true", "false"):
                    raise ValueError(v)
                return s == "true"
            return bool(v)
        if t == "string":
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, decimal.Decimal):
                return format(v, "f")
            if isinstance(v, (bytes, bytearray)):
                import base64
                return base64.b64encode(bytes(v)).decode("ascii")
            return str(v)
        if t == "bytes" and isinstance(v, (bytes, bytearray)):
            return bytes(v)
    except (ValueError, TypeError, ArithmeticError, DataError):
        pass
    raise DataError(f"Unexpected type in Cast transformation: cannot cast {v!r} to {t}")


class CastKey(Cast):
    operates_on = "key"


class CastValue(Cast):
    operates_on = "value"


# ---- SetSchemaMetadata

class SetSchemaMetadata(KeyOrValue):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("schema.name", api.STRING, None, api.HIGH, "Schema name to set.")
                .define("schema.version", api.INT, None, api.HIGH, "Schema version to set."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.name, self.version = cfg["schema.name"], cfg["schema.version"]
        if self.name is None and self.version is None:
            raise api.ConfigError({"schema.name": [
                "Neither schema name nor version configured"]})

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        schema, value = self.operating(record)
        if schema is None:
            raise DataError("Schema required for [updating schema metadata]")
        changes: dict[str, Any] = {}
        if self.name is not None:
            changes["name"] = self.name
        if self.version is not None:
            changes["version"] = self.version
        new_schema = dataclasses.replace(schema, **changes)
        if isinstance(value, Struct):
            value = Struct(new_schema, dict(value))
        return self.updated(record, new_schema, value)


class SetSchemaMetadataKey(SetSchemaMetadata):
    operates_on = "key"


class SetSchemaMetadataValue(SetSchemaMetadata):
    operates_on = "value"


# ---- headers

class InsertHeader(api.Transformation):
    def config_def(self) -> api.ConfigDef:
        return (api.ConfigDef()
                .define("header", api.STRING, api.REQUIRED, api.HIGH,
                        "The name of the header.")
                .define("value.literal", api.STRING, api.REQUIRED, api.HIGH,
                        "The literal value that is to be set as the header value on all "
                        "records."))

    def configure(self, props: dict[str, Any]) -> None:
        cfg = self.config_def().parse(props)
        self.header = api.Header(cfg["header"], data.STRING, cfg["value.literal"])

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        return record.new_record(headers=(*record.headers, self.header))


class DropHeaders(api.Transformation):
    def config_def(self) -> api.ConfigDef:
        return api.ConfigDef().define("headers", api.LIST, api.REQUIRED, api.HIGH,
                                      "The name of the headers to be removed.",
                                      validator=non_empty_list)

    def configure(self, props: dict[str, Any]) -> None:
        self.names = set(self.config_def().parse(props)["headers"])

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        return record.new_record(headers=tuple(h for h in record.headers
                                               if h.key not in self.names))
