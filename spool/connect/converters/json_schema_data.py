"""Connect schemas <-> JSON Schema, as Confluent's ``JsonSchemaData`` maps them.

Connect -> JSON Schema (``to_json_schema``): struct ``{"type":"object","title":name,
"properties":{f: {..., "connect.index": i}}, "required": [non-optional fields]}``;
int8..int64 ``{"type":"integer","connect.type":"int8".."int64"}``; float32/64
``{"type":"number","connect.type":"float32"|"float64"}``; boolean, string; bytes
``{"type":"string","connect.type":"bytes"}`` (base64 payload); array ``items``; a map with
string keys ``{"type":"object","additionalProperties":V,"connect.type":"map"}``, other
maps an array of ``{key, value}`` objects with ``"connect.type":"map"``; logical types
keep their base type and name: Decimal ``{"type":"number","title":"...Decimal",
"connect.parameters":{"scale":..}}`` (numbers in the payload), Date/Time int32 and
Timestamp int64 integers. ``title`` is a named schema's name, ``description`` its doc, ``default`` its default (in
Kafka's JSON form), ``connect.version``/``connect.parameters`` are kept; optional is
``{"oneOf":[{"type":"null"},T]}``.

``to_connect(doc)`` reads it back, also JSON Schemas Connect did not write (``integer``
int64, ``number`` float64, an object with properties a struct, with only
``additionalProperties`` a map; ``$ref``, ``allOf``/``anyOf`` other than the null union:
DataError). Payloads are Kafka's JSON (``json.JsonConverter.to_json``/``to_connect``
with numeric decimals).
"""

from __future__ import annotations

from typing import Any

from spool.connect import data
from spool.connect.data import DataError, Schema

_LOGICAL_BASE = {data.DECIMAL: "bytes", data.DATE: "int32", data.TIME: "int32",
                 data.TIMESTAMP: "int64"}


def to_json_schema(s: Schema) -> dict[str, Any]:
    node = _required(s)
    if s.optional:
        return {"oneOf": [{"type": "null"}, node]}
    return node


def _required(s: Schema) -> dict[str, Any]:
    t = s.type
    node: dict[str, Any]
    if s.name == data.DECIMAL:
        node = {"type": "number"}
    elif t in ("int8", "int16", "int32", "int64"):
        node = {"type": "integer", "connect.type": t}
    elif t in ("float32", "float64"):
        node = {"type": "number", "connect.type": t}
    elif t == "boolean":
        node = {"type": "boolean"}
    elif t == "string":
        node = {"type": "string"}
    elif t == "bytes":
        node = {"type": "string", "connect.type": "bytes"}
    elif t == "array":
        node = {"type": "array", "items": to_json_schema(s.value_schema)}  # type: ignore[arg-type]
    elif t == "map":
        ks, vs = s.key_schema, s.value_schema
        assert ks is not None and vs is not None
        if ks.type == "string" and not ks.optional:
            node = {"type": "object", "additionalProperties": to_json_schema(vs),
                    "connect.type": "map"}
        else:
            node = {"type": "array", "items": {"type": "object", "properties": {
                "key": {**to_json_schema(ks), "connect.index": 0},
                "value": {**to_json_schema(vs), "connect.index": 1}}}, "connect.type": "map"}
    else:
        props = {f.name: {**to_json_schema(f.schema), "connect.index": f.index}
                 for f in s.fields}
        node = {"type": "object", "properties": props}
        required = [f.name for f in s.fields if not f.schema.optional]
        if required:
            node["required"] = required
    if s.name is not None:
        node["title"] = s.name
    if s.doc is not None:
        node["description"] = s.doc
    if s.version is not None:
        node["connect.version"] = s.version
    if s.parameters:
        node["connect.parameters"] = dict(s.parameters)
    if s.default is not None and t != "struct":
        from spool.connect.converters.json import JsonConverter
        node["default"] = JsonConverter().to_json(s, s.default)
    return node


def to_connect(doc: Any) -> Schema:
    schema = _to_connect(doc)
    if isinstance(doc, dict) and doc.get("default") is not None and schema.type != "struct":
        import dataclasses

        from spool.connect.converters.json import JsonConverter
        schema = dataclasses.replace(schema, default=JsonConverter().to_connect(
            dataclasses.replace(schema, optional=True), doc["default"]))
    return schema


def _to_connect(doc: Any) -> Schema:
    if doc is True or doc == {}:
        raise DataError("A JSON Schema accepting anything has no Connect schema")
    if not isinstance(doc, dict):
        raise DataError(f"Not a JSON Schema: {doc!r}")
    one_of = doc.get("oneOf") or doc.get("anyOf")
    if one_of is not None:
        rest = [b for b in one_of if b != {"type": "null"}]
        if len(rest) == 1 and len(one_of) == 2:
            return data.optional(to_connect(rest[0]))
        raise DataError("JSON Schema unions other than oneOf [null, T] are not supported")
    if "$ref" in doc or "allOf" in doc:
        raise DataError("JSON Schema $ref and allOf are not supported by the converter")
    t = doc.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        if len(rest) == 1:
            return data.optional(to_connect({**doc, "type": rest[0]}))
        raise DataError(f"JSON Schema type {t} is not supported")
    title = doc.get("title")
    opts: dict[str, Any] = {"name": title, "doc": doc.get("description")}
    if "connect.version" in doc:
        opts["version"] = int(doc["connect.version"])
    if "connect.parameters" in doc:
        opts["parameters"] = tuple((str(k), str(v))
                                   for k, v in doc["connect.parameters"].items())
    ctype = doc.get("connect.type")
    if title in _LOGICAL_BASE:
        return Schema(_LOGICAL_BASE[title], **opts)
    if ctype == "map":
        if t == "object":
            return Schema("map", key_schema=data.STRING,
                          value_schema=to_connect(doc.get("additionalProperties", {})), **opts)
        props = doc["items"]["properties"]
        return Schema("map", key_schema=to_connect(props["key"]),
                      value_schema=to_connect(props["value"]), **opts)
    if t == "integer":
        return Schema(ctype if ctype in ("int8", "int16", "int32", "int64") else "int64",
                      **opts)
    if t == "number":
        return Schema(ctype if ctype in ("float32", "float64") else "float64", **opts)
    if t == "boolean":
        return Schema("boolean", **opts)
    if t == "string":
        return Schema("bytes" if ctype == "bytes" else "string", **opts)
    if t == "array":
        return Schema("array", value_schema=to_connect(doc.get("items", {})), **opts)
    if t == "object":
        props = doc.get("properties")
        if props is None and isinstance(doc.get("additionalProperties"), dict):
            return Schema("map", key_schema=data.STRING,
                          value_schema=to_connect(doc["additionalProperties"]), **opts)
        items = sorted((props or {}).items(),
                       key=lambda kv: kv[1].get("connect.index", 1 << 30)
                       if isinstance(kv[1], dict) else 1 << 30)
        required = set(doc.get("required", []))
        fields = []
        for i, (name, sub) in enumerate(items):
            fs = to_connect(sub)
            if name not in required and not fs.optional and "connect.index" not in sub:
                fs = data.optional(fs)  # plain JSON Schema: properties are optional
            fields.append(data.Field(name, i, fs))
        return Schema("struct", fields=tuple(fields), **opts)
    raise DataError(f"JSON Schema type {t!r} is not supported")
