"""Avro through a schema registry (``schema.registry.url``): Confluent's framing, resolved.

With ``valueFormat=avro`` and ``schema.registry.url`` (``formats.py``):

* Reading: the reader schema is ``valueSchema`` if given, else the latest version of
  the subject (``valueSubject``, default ``<topic>-value`` for the one ``subscribe``d
  topic), fetched once when the query is planned: its record's fields are the
  columns. Each value must be Confluent-framed (magic byte 0, the writer schema's id as
  4 big-endian bytes, then Avro binary); the id's schema is fetched from the registry
  once per executor process (``/schemas/ids/{id}``, its references resolved) and the
  value decoded with it as writer and the reader schema as reader (the Avro spec's
  resolution: fields the writer lacks take the reader's default, fields the reader
  lacks are skipped). A value that is not framed, whose id the registry does not know
  (40403) or that does not decode exactly -> null (spark-avro's PERMISSIVE mode). A
  registry that does not answer fails the task, naming the URL.
* Writing: the schema (``valueSchema``, else derived from the column's type as
  ``to_avro`` derives one, named as the subject's latest record if there is one, so
  that Avro's name matching lets it resolve) is registered under the subject
  (``valueSubject``, default ``<topic option>-value``) when the query starts, and every value is framed with the
  id the registry gave (registering the same schema again gives the same id; an
  incompatible one is refused there with Confluent's 409 message).
* References (Avro named types from other subjects) are resolved by inlining the
  referenced types' definitions where the schema first names them, so each schema
  handed to fastavro and to the Spark type mapping stands alone.
* Logical types Spark does not map (``uuid``, ``time-millis``...) are dropped from the
  writer schemas too, so their values read as the underlying type, as without a
  registry.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from spool.registry.client import RegistryClient, RegistryClientError, RegistryHTTPError
from spool.spark.avro_format import (
    _SPARK_LOGICAL,
    CONFLUENT_MAGIC,
    _full_name,
    _offsets,
    _read_exact,
    parsed,
)
from spool.spark.ddl import arrow_type

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_NAMED = ("record", "error", "enum", "fixed")
SCHEMA_NOT_FOUND = 40403


def _client(url: str) -> RegistryClient:
    return RegistryClient(url, timeout=30.0)


def _fail(url: str, what: str, e: RegistryClientError) -> ValueError:
    return ValueError(f"schema registry {url}: {what}: {e}")


def latest_schema(url: str, subject: str) -> str:
    """The subject's latest Avro schema, references inlined, as JSON text."""
    try:
        doc = _client(url).version(subject, "latest")
    except RegistryClientError as e:
        raise _fail(url, f"cannot get the latest schema of subject {subject!r}", e) from None
    if doc.get("schemaType", "AVRO") != "AVRO":
        raise ValueError(f"schema registry {url}: subject {subject!r} holds a "
                         f"{doc['schemaType']} schema, not Avro")
    return json.dumps(standalone(url, doc))


def latest_name(url: str, subject: str) -> tuple[str, str]:
    """(name, namespace) of the subject's latest Avro record, for a schema derived from a
    column's type to resolve against it (Avro matches records by name); Spark's
    ``("topLevelRecord", "")`` when the subject has none."""
    try:
        doc = _client(url).version(subject, "latest")
    except RegistryHTTPError as e:
        if e.status == 404:
            return "topLevelRecord", ""
        raise _fail(url, f"cannot get the latest schema of subject {subject!r}", e) from None
    except RegistryClientError as e:
        raise _fail(url, f"cannot get the latest schema of subject {subject!r}", e) from None
    try:
        schema = json.loads(doc["schema"]) if doc.get("schemaType", "AVRO") == "AVRO" else None
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return "topLevelRecord", ""
    full, namespace = _full_name(schema, None)
    return full.rsplit(".", 1)[-1], namespace or ""


def register(url: str, subject: str, schema_text: str) -> int:
    """The id under which ``subject`` has the Avro schema (registered now if new)."""
    try:
        return _client(url).register(subject, schema_text, "AVRO")
    except RegistryClientError as e:
        raise _fail(url, f"cannot register the schema under subject {subject!r}", e) from None


def standalone(url: str, doc: dict[str, Any]) -> Any:
    """The schema of a registry answer (``schema``, ``references``) with every referenced
    named type inlined where first named."""
    schema = json.loads(doc["schema"])
    known: dict[str, Any] = {}
    for ref in doc.get("references") or []:
        ref_doc = _client(url).version(ref["subject"], ref["version"])
        _collect(standalone(url, ref_doc), None, known)
    return _inline(schema, None, known, set()) if known else schema


def _collect(node: Any, ns: str | None, out: dict[str, Any]) -> None:
    """Every named type ``node`` defines: full name -> its definition, named in full."""
    if isinstance(node, list):
        for branch in node:
            _collect(branch, ns, out)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in _NAMED:
            full, child_ns = _full_name(node, ns)
            out.setdefault(full, {**{k: v for k, v in node.items() if k != "namespace"},
                                  "name": full})
            for f in node.get("fields", []):
                _collect(f["type"], child_ns, out)
        elif kind == "array":
            _collect(node["items"], ns, out)
        elif kind == "map":
            _collect(node["values"], ns, out)
        elif isinstance(kind, dict | list):
            _collect(kind, ns, out)


def _inline(node: Any, ns: str | None, known: dict[str, Any], defined: set[str]) -> Any:
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        full = node if "." in node or not ns else f"{ns}.{node}"
        for key in (full, node):
            if key in defined:
                return node
            if key in known:
                return _inline(known[key], None, known, defined)
        return node
    if isinstance(node, list):
        return [_inline(b, ns, known, defined) for b in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in _NAMED:
        full, child_ns = _full_name(node, ns)
        defined.add(full)
        if "fields" in node:
            return {**node, "fields": [{**f, "type": _inline(f["type"], child_ns, known, defined)}
                                       for f in node["fields"]]}
        return node
    if kind == "array":
        return {**node, "items": _inline(node["items"], ns, known, defined)}
    if kind == "map":
        return {**node, "values": _inline(node["values"], ns, known, defined)}
    return {**node, "type": _inline(kind, ns, known, defined)}


def _plain(node: Any) -> Any:
    """``node`` without the logical types Spark does not map."""
    if isinstance(node, list):
        return [_plain(b) for b in node]
    if not isinstance(node, dict):
        return node
    out = {k: _plain(v) if k in ("type", "items", "values") else v for k, v in node.items()}
    if "fields" in node:
        out["fields"] = [{**f, "type": _plain(f["type"])} for f in node["fields"]]
    if out.get("logicalType") is not None and out["logicalType"] not in _SPARK_LOGICAL:
        del out["logicalType"]
        if isinstance(out.get("type"), str) and out["type"] not in _NAMED and len(out) == 1:
            return out["type"]
    return out


@lru_cache(maxsize=256)
def writer_schema(url: str, schema_id: int) -> str | None:
    """The schema with this id, standalone and plain, as JSON text; None if the registry
    does not know the id. Cached per process: an id's schema never changes."""
    try:
        doc = _client(url).by_id(schema_id)
    except RegistryHTTPError as e:
        if e.error_code == SCHEMA_NOT_FOUND:
            return None
        raise _fail(url, f"cannot get schema id {schema_id}", e) from None
    except RegistryClientError as e:
        raise _fail(url, f"cannot get schema id {schema_id}", e) from None
    if doc.get("schemaType", "AVRO") != "AVRO":
        return None
    return json.dumps(_plain(standalone(url, doc)))


def decode_registry(values: pa.Array, reader_schema: str, t: StructType, url: str) -> pa.Array:
    """Confluent-framed Avro values -> a struct column of Spark type ``t``, each decoded
    with its writer schema (by id) into ``reader_schema``."""
    from fastavro import schemaless_reader

    reader = parsed(reader_schema)
    offsets, data = _offsets(values)
    stream = io.BytesIO(data)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    raw = bytes(data)
    # per id in this batch: (writer, reader or None when they are the same schema), or None
    by_id: dict[int, tuple[Any, Any] | None] = {}
    out: list[dict | None] = []
    for i in range(len(values)):
        start, end = int(offsets[i]), int(offsets[i + 1])
        if not valid[i] or end - start < 5 or raw[start] != CONFLUENT_MAGIC:
            out.append(None)
            continue
        schema_id = int.from_bytes(raw[start + 1:start + 5], "big")
        if schema_id not in by_id:
            text = writer_schema(url, schema_id)
            by_id[schema_id] = None if text is None else (
                parsed(text), None if text == reader_schema else reader)
        schemas = by_id[schema_id]
        if schemas is None:
            out.append(None)
            continue
        out.append(_read_exact(schemaless_reader, stream, start + 5, end, *schemas))
    return pa.array(out, type=arrow_type(t))
