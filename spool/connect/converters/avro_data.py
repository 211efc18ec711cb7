"""Connect schemas and values <-> Avro, as Confluent's ``AvroData`` maps them.

Connect -> Avro schema (``to_avro``):

==============  =========================================================================
int8, int16     ``{"type":"int","connect.type":"int8"|"int16"}``
int32, int64    ``int``, ``long``; float32/64 ``float``/``double``; boolean, string, bytes
struct          ``record`` named after the schema's name (``ConnectDefault``,
                ``ConnectDefault2``... in ``io.confluent.connect.avro`` when unnamed)
array           ``{"type":"array","items":...}``
map             string keys: ``{"type":"map","values":...}``; other keys: an array of
                ``io.confluent.connect.avro.MapEntry`` records ``{key, value}``
Decimal         bytes, ``logicalType`` decimal, ``scale``, ``precision``
                (``connect.decimal.precision`` parameter, else 64)
Date, Time,     int ``date``, int ``time-millis``, long ``timestamp-millis``
Timestamp
optional        the union ``["null", T]``, and a field default of null
==============  =========================================================================

Each named, versioned, documented, parametrised or defaulted schema also carries
``connect.name``, ``connect.version``, ``connect.doc``, ``connect.parameters``,
``connect.default`` (the default in Kafka's JSON form) so reading restores it exactly. ``to_connect(avro_schema)`` is the inverse, also for schemas Connect did not
write: a record's full name becomes the struct's name, ``enum`` a string, ``fixed``
bytes; ``["null", T]`` an optional T; other unions are a DataError (not supported).
``to_avro_value``/``to_connect_value`` convert values under a pair of schemas; fastavro
writes and reads the binary encoding.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from typing import Any

from spool.connect import data
from spool.connect.data import DataError, Schema, Struct

NAMESPACE = "io.confluent.connect.avro"
_PRIMITIVE = {"int32": "int", "int64": "long", "float32": "float", "float64": "double",
              "boolean": "boolean", "string": "string", "bytes": "bytes"}
_LOGICAL = {data.DECIMAL: "decimal", data.DATE: "date", data.TIME: "time-millis",
            data.TIMESTAMP: "timestamp-millis"}
_NAME_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Namer:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def unique(self, full: str) -> str:
        n = self.seen.get(full, 0) + 1
        self.seen[full] = n
        return full if n == 1 else f"{full}{n}"


def to_avro(schema: Schema) -> Any:
    """The Avro schema (JSON-ready) for a Connect schema (module doc)."""
    return _avro(schema, _Namer(), {})


def _avro(s: Schema, namer: _Namer, defined: dict[Schema, str]) -> Any:
    out = _avro_required(s, namer, defined)
    return ["null", out] if s.optional else out


def _avro_name(name: str | None, namer: _Namer) -> str:
    if name and all(_NAME_PART.match(p) for p in name.split(".")):
        return namer.unique(name)
    return namer.unique(f"{NAMESPACE}.ConnectDefault")


def _avro_required(s: Schema, namer: _Namer, defined: dict[Schema, str]) -> Any:
    t = s.type
    node: dict[str, Any]
    if t == "struct":
        key = dataclasses.replace(s, optional=False)
        try:
            if key in defined:
                return defined[key]
        except TypeError:
            pass
        full = _avro_name(s.name, namer)
        try:
            defined[key] = full
        except TypeError:
            pass
        fields = []
        for f in s.fields:
            fd: dict[str, Any] = {"name": f.name, "type": _avro(f.schema, namer, defined)}
            if f.schema.optional:
                fd["default"] = None
            fields.append(fd)
        node = {"type": "record", "name": full, "fields": fields}
        if s.doc is not None:
            node["doc"] = s.doc
    elif t == "array":
        node = {"type": "array", "items": _avro(s.value_schema, namer, defined)}  # type: ignore[arg-type]
    elif t == "map":
        ks, vs = s.key_schema, s.value_schema
        assert ks is not None and vs is not None
        if ks.type == "string" and not ks.optional:
            node = {"type": "map", "values": _avro(vs, namer, defined)}
        else:
            entry = {"type": "record", "name": namer.unique(f"{NAMESPACE}.MapEntry"),
                     "fields": [{"name": "key", "type": _avro(ks, namer, defined)},
                                {"name": "value", "type": _avro(vs, namer, defined)}]}
            node = {"type": "array", "items": entry}
    elif s.name in _LOGICAL:
        node = {"type": "bytes" if s.name == data.DECIMAL else
                "long" if s.name == data.TIMESTAMP else "int", "logicalType": _LOGICAL[s.name]}
        if s.name == data.DECIMAL:
            node["scale"] = int(s.params.get("scale", "0"))
            node["precision"] = int(s.params.get("connect.decimal.precision", "64"))
    elif t in ("int8", "int16"):
        node = {"type": "int", "connect.type": t}
    else:
        node = {"type": _PRIMITIVE[t]}
    if t != "struct":
        if s.name is not None:
            node["connect.name"] = s.name
        if s.doc is not None:
            node["connect.doc"] = s.doc
    elif s.name is not None and node["name"] != s.name:
        node["connect.name"] = s.name
    if s.version is not None:
        node["connect.version"] = s.version
    if s.parameters:
        node["connect.parameters"] = dict(s.parameters)
    if s.default is not None and t != "struct":
        from spool.connect.converters.json import JsonConverter
        node["connect.default"] = JsonConverter().to_json(s, s.default)
    if len(node) == 1:
        return node["type"]
    return node


def to_connect(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (module doc)."""
    return _connect(avro, {}, None)


def _connect(a: Any, named: dict[str, Schema], namespace: str | None) -> Schema:
    if isinstance(a, list):
        branches = [b for b in a if b != "null"]
        if len(branches) == 1 and len(a) == 2:
            inner = _connect(branches[0], named, namespace)
            return data.optional(inner)
        raise DataError(f"Avro unions other than [\"null\", T] are not supported: {a}")
    if isinstance(a, str):
        if a in ("null",):
            raise DataError("Avro null outside a union is not supported")
        prim = {v: k for k, v in _PRIMITIVE.items()}.get(a)
        if prim is not None:
            return Schema(prim)
        full = a if "." in a or namespace is None else f"{namespace}.{a}"
        if full in named:
            return named[full]
        if a in named:
            return named[a]
        raise DataError(f"Unknown Avro type {a}")
    if not isinstance(a, dict):
        raise DataError(f"Not an Avro schema: {a!r}")
    t = a.get("type")
    opts: dict[str, Any] = {}
    if "connect.version" in a:
        opts["version"] = int(a["connect.version"])
    if "connect.parameters" in a:
        opts["parameters"] = tuple((str(k), str(v)) for k, v in a["connect.parameters"].items())
    if t == "record":
        name = a["name"]
        ns = a.get("namespace", namespace if "." not in name else None)
        full = name if "." in name or not ns else f"{ns}.{name}"
        inner_ns = full.rpartition(".")[0] or None
        fields = tuple(data.Field(f["name"], i, _connect(f["type"], named, inner_ns))
                       for i, f in enumerate(a.get("fields", [])))
        default_name = full.startswith(f"{NAMESPACE}.ConnectDefault")
        schema = Schema("struct", name=a.get("connect.name", None if default_name else full),
                        doc=a.get("doc"),
                        fields=fields, **opts)
        named[full] = schema
        return schema
    if t == "enum":
        named[a["name"]] = data.STRING
        return data.STRING
    if t == "fixed":
        named[a["name"]] = data.BYTES
        return data.BYTES
    if t == "array":
        items = a["items"]
        item_schema = _connect(items, named, namespace)
        if item_schema.type == "struct" and (item_schema.name or "").startswith(
                f"{NAMESPACE}.MapEntry") and [f.name for f in item_schema.fields] == \
                ["key", "value"]:
            return data.map_of(item_schema.fields[0].schema, item_schema.fields[1].schema)
        return Schema("array", value_schema=item_schema, **opts)
    if t == "map":
        return Schema("map", key_schema=data.STRING,
                      value_schema=_connect(a["values"], named, namespace), **opts)
    logical = a.get("logicalType")
    cname = a.get("connect.name")
    if logical == "decimal" or cname == data.DECIMAL:
        params = dict(opts.pop("parameters", ()))
        params.setdefault("scale", str(a.get("scale", 0)))
        if "precision" in a and a["precision"] != 64:
            params.setdefault("connect.decimal.precision", str(a["precision"]))
        opts.setdefault("version", 1)
        return _with_default(Schema("bytes", name=data.DECIMAL,
                                    parameters=tuple(params.items()), **opts), a)
    for name, lt in _LOGICAL.items():
        if logical == lt or cname == name:
            if name == data.DECIMAL:
                continue
            opts.setdefault("version", 1)
            return _with_default(Schema("int64" if name == data.TIMESTAMP else "int32",
                                        name=name, **opts), a)
    if isinstance(t, (dict, list)):
        return _connect(t, named, namespace)
    ctype = a.get("connect.type")
    base = ctype if ctype in ("int8", "int16") else \
        {v: k for k, v in _PRIMITIVE.items()}.get(t)
    if base is None:
        if t in ("enum", "fixed"):
            return data.STRING
        raise DataError(f"Unknown Avro type {t}")
    return _with_default(Schema(base, name=cname, doc=a.get("connect.doc"), **opts), a)


def _with_default(schema: Schema, a: dict[str, Any]) -> Schema:
    if a.get("connect.default") is None:
        return schema
    from spool.connect.converters.json import JsonConverter
    return dataclasses.replace(schema, default=JsonConverter().to_connect(
        schema, a["connect.default"]))


def to_avro_value(schema: Schema, value: Any) -> Any:
    """A Connect value as the datum fastavro writes for ``to_avro(schema)``."""
    if value is None:
        if schema.default is not None:
            return to_avro_value(schema, schema.default)
        if schema.optional:
            return None
        raise DataError(f"Conversion error: null value for field that is required and has "
                        f"no default value ({schema.type})")
    t = schema.type
    if t == "struct":
        if not isinstance(value, dict):
            raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
        return {f.name: to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t == "array":
        return [to_avro_value(schema.value_schema, v) for v in value]  # type: ignore[arg-type]
    if t == "map":
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if ks.type == "string" and not ks.optional:
            return {k: to_avro_value(vs, v) for k, v in value.items()}
        return [{"key": to_avro_value(ks, k), "value": to_avro_value(vs, v)}
                for k, v in value.items()]
    if t == "bytes" and schema.name != data.DECIMAL and isinstance(value, (bytearray,
                                                                          memoryview)):
        return bytes(value)
    data.validate(schema, value)
    return value


def to_connect_value(schema: Schema, value: Any) -> Any:
    """A datum fastavro read, as the Connect value of ``schema``."""
    if value is None:
        return None
    t = schema.type
    if t == "struct":
        return Struct(schema, {f.name: to_connect_value(f.schema, value.get(f.name))
                               for f in schema.fields})
    if t == "array":
        return [to_connect_value(schema.value_schema, v) for v in value]  # type: ignore[arg-type]
    if t == "map":
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if isinstance(value, dict):
            return {k: to_connect_value(vs, v) for k, v in value.items()}
        return {to_connect_value(ks, e["key"]): to_connect_value(vs, e["value"]) for e in value}
    if schema.name == data.DECIMAL:
        scale = int(schema.params.get("scale", "0"))
        return value if value.as_tuple().exponent == -scale \
            else value.quantize(decimal.Decimal(1).scaleb(-scale))
    return value
