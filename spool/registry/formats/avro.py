"""Avro as a registry format: ``FORMAT`` (schemaType AVRO).

``parse(text, references)`` checks the text with fastavro's ``parse_schema`` and with
the spec's rules fastavro lets pass (names match ``[A-Za-z_][A-Za-z0-9_]*``, no named
type called after a primitive, unique field names, unions without a nested union or two
branches of one unnamed type or one full name, fixed sizes that are non-negative
integers, ``type`` a string). Named types not defined in the text are looked up by full
name in ``references`` (each reference's ``name`` is the full name of a type its text
defines, Confluent's convention; a referenced text's own references are in the map too).
Any refusal is a ``model.InvalidSchema`` whose message says what and where, as a JSON
pointer into the offending text (``/fields/2/type``), prefixed by the reference's name
when the fault is in a referenced text.

The parsed form is ``AvroSchema``: the text's ``root`` rewritten so every name is a full
name (``name`` and ``aliases`` of named types, references to them), ``namespace``
attributes dropped and primitives without attributes as their bare name; ``named`` maps
every full name the schema can reach (its own definitions and its references') to its
rewritten definition. Everything else (``doc``, ``default``, ``order``, ``logicalType``,
custom attributes) is kept as written.

``canonical`` is the spec's Parsing Canonical Form of the text itself: a referenced
type appears as its full name (the references are part of a schema's identity besides
its text), a named type defined in the text appears in full where the text defines it and
as its full name after. ``fingerprint64`` is the spec's CRC-64-AVRO of it.
``normalized`` applies the same normalisations but keeps every attribute (``doc``,
``default``, aliases, ``order``, ``logicalType``, custom ones): two texts have the same
one when they differ only as Confluent's registry deems the same schema. ``FORMAT``'s
``canonical`` (what the registry dedupes and looks up on) is ``normalized``, not the
Parsing Canonical Form, which merges texts differing in a default, a logical type or a
decimal's scale: data written under one id would be read with another's meaning.

``incompatibilities(reader, writer)`` is ``avro_resolution.incompatibilities``: the
spec's schema resolution rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from spool.registry.model import InvalidSchema

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes",
                        "string"))
NAMED = frozenset(("record", "error", "enum", "fixed"))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class AvroSchema:
    """A parsed schema: its rewritten ``root`` and every named type it can reach."""

    root: Any
    named: Mapping[str, dict[str, Any]]
    text: str

    def resolve(self, node: Any) -> Any:
        """``node`` with a reference to a named type replaced by the type's definition."""
        if isinstance(node, str) and node not in PRIMITIVES:
            return self.named[node]
        return node


def _fail(where: str, path: str, message: str) -> InvalidSchema:
    return InvalidSchema(f"{where}{path or '/'}: {message}")


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _namespace_of(full_name: str) -> str | None:
    return full_name.rpartition(".")[0] or None


class _Walker:
    """Rewrites one text's JSON, defining its named types into the shared ``named``."""

    def __init__(self, where: str, named: dict[str, dict[str, Any]],
                 load: Callable[[str], bool]):
        self.where = where
        self.named = named
        self.load = load

    def fail(self, path: str, message: str) -> InvalidSchema:
        return _fail(self.where, path, message)

    def schema(self, node: Any, ns: str | None, path: str) -> Any:
        if isinstance(node, str):
            return self.reference(node, ns, path)
        if isinstance(node, list):
            return self.union(node, ns, path)
        if not isinstance(node, dict):
            raise self.fail(path, f"a schema is a JSON string, object or array, not {node!r}")
        kind = node.get("type")
        if not isinstance(kind, str):
            raise self.fail(path, f"'type' must be a string naming a type, got {kind!r}")
        if kind in PRIMITIVES:
            return kind if len(node) == 1 else dict(node)
        if kind in NAMED:
            return self.named_type(node, kind, ns, path)
        if kind in ("array", "map"):
            key = "items" if kind == "array" else "values"
            if key not in node:
                raise self.fail(path, f"an {kind} needs '{key}'")
            out = dict(node)
            out[key] = self.schema(node[key], ns, f"{path}/{key}")
            return out
        raise self.fail(path, f"unknown type {kind!r} (a named type is referred to by its "
                        "name as a JSON string, not as an object's 'type')")

    def reference(self, name: str, ns: str | None, path: str) -> str:
        if name in PRIMITIVES:
            return name
        for candidate in dict.fromkeys((_full_name(name, ns), name)):
            if candidate in self.named or self.load(candidate):
                return candidate
        raise self.fail(path, f"unknown type {name!r} (not defined before this point "
                        "nor given by a reference)")

    def union(self, branches: list[Any], ns: str | None, path: str) -> list[Any]:
        out: list[Any] = []
        seen: dict[str, int] = {}
        for i, branch in enumerate(branches):
            where = f"{path}/{i}"
            rewritten = self.schema(branch, ns, where)
            definition = rewritten if not isinstance(rewritten, str) else (
                self.named.get(rewritten, rewritten))
            if isinstance(definition, list):
                raise self.fail(where, "a union may not immediately contain another union")
            key = node_kind(definition)
            if key in NAMED:
                key = definition["name"]
            if key in seen:
                raise self.fail(where, f"a union may not hold {key!r} twice (branches "
                                f"{seen[key]} and {i})")
            seen[key] = i
            out.append(rewritten)
        return out

    def named_type(self, node: dict[str, Any], kind: str, ns: str | None,
                   path: str) -> dict[str, Any]:
        name, namespace = node.get("name"), node.get("namespace", ns)
        if not isinstance(name, str):
            raise self.fail(path, f"a {kind} needs a string 'name'")
        if namespace is not None and not isinstance(namespace, str):
            raise self.fail(path, f"'namespace' must be a string, got {namespace!r}")
        full = _full_name(name, namespace or None)
        self.check_full_name(full, path)
        if full in self.named:
            raise self.fail(path, f"{full!r} is defined twice")
        inner = _namespace_of(full)
        out: dict[str, Any] = {k: v for k, v in node.items() if k != "namespace"}
        out["name"] = full
        out["aliases"] = self.aliases(node, inner, path)
        self.named[full] = out  # before the fields: a record may refer to itself
        if kind in ("record", "error"):
            out["fields"] = self.fields(node.get("fields"), inner, path)
        elif kind == "enum":
            self.symbols(node, path)
        else:
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise self.fail(path, f"a fixed needs a non-negative integer 'size', "
                                f"got {size!r}")
        return out

    def check_full_name(self, full: str, path: str) -> None:
        for part in full.split("."):
            if not _NAME.match(part):
                raise self.fail(path, f"invalid name {full!r}: each part must match "
                                "[A-Za-z_][A-Za-z0-9_]*")
        if full.rpartition(".")[2] in PRIMITIVES:
            raise self.fail(path, f"{full!r}: a primitive type's name cannot be redefined")

    def aliases(self, node: dict[str, Any], ns: str | None, path: str) -> list[str]:
        aliases = node.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise self.fail(path, "'aliases' must be an array of strings")
        return [_full_name(a, ns) for a in aliases]

    def fields(self, fields: Any, ns: str | None, path: str) -> list[dict[str, Any]]:
        if not isinstance(fields, list):
            raise self.fail(path, "a record needs a 'fields' array")
        out: list[dict[str, Any]] = []
        names: set[str] = set()
        for i, field in enumerate(fields):
            where = f"{path}/fields/{i}"
            if not isinstance(field, dict):
                raise self.fail(where, "a field is a JSON object")
            name = field.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise self.fail(where, f"invalid field name {name!r}")
            if name in names:
                raise self.fail(where, f"field {name!r} is defined twice")
            names.add(name)
            if "type" not in field:
                raise self.fail(where, f"field {name!r} needs a 'type'")
            aliases = field.get("aliases", [])
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise self.fail(where, "'aliases' must be an array of strings")
            rewritten = dict(field)
            rewritten["type"] = self.schema(field["type"], ns, f"{where}/type")
            out.append(rewritten)
        return out

    def symbols(self, node: dict[str, Any], path: str) -> None:
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise self.fail(path, "an enum needs a 'symbols' array of strings")
        for symbol in symbols:
            if not _NAME.match(symbol):
                raise self.fail(path, f"invalid enum symbol {symbol!r}")
        if len(set(symbols)) != len(symbols):
            raise self.fail(path, "enum symbols must be unique")
        if "default" in node and node["default"] not in symbols:
            raise self.fail(path, f"the enum's default {node['default']!r} is not one of "
                            "its symbols")


def node_kind(node: Any) -> str:
    """``int``, ``record``, ``array``, ``union``...: what a rewritten node is."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return "record" if node["type"] == "error" else node["type"]


def _load_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as e:
        raise _fail(where, "", f"not JSON: {e}") from None


def parse(schema: str, references: Mapping[str, str]) -> AvroSchema:
    try:
        return _parse(schema, references)
    except RecursionError:
        raise InvalidSchema("/: nested too deeply") from None


def _parse(schema: str, references: Mapping[str, str]) -> AvroSchema:
    named: dict[str, dict[str, Any]] = {}
    fastavro_named: dict[str, Any] = {}
    pending = dict(references)

    def check_with_fastavro(document: Any, where: str) -> None:
        try:
            fastavro.parse_schema(document, named_schemas=fastavro_named)
        except Exception as e:  # fastavro raises KeyError, TypeError... on some faults
            detail = f"missing {e}" if isinstance(e, KeyError) else str(e)
            raise InvalidSchema(f"{where}{detail or type(e).__name__}") from None

    def load(full_name: str) -> bool:
        text = pending.pop(full_name, None)
        if text is None:
            return False
        where = f"reference {full_name!r}: "
        document = _load_json(text, where)
        _Walker(where, named, load).schema(document, None, "")
        check_with_fastavro(document, where)
        return full_name in named

    document = _load_json(schema, "")
    root = _Walker("", named, load).schema(document, None, "")
    check_with_fastavro(document, "")
    return AvroSchema(root, named, schema)


def _canonical(node: Any, seen: set[str]) -> Any:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [_canonical(branch, seen) for branch in node]
    kind = node["type"]
    if kind in PRIMITIVES:
        return kind
    if kind == "array":
        return {"type": "array", "items": _canonical(node["items"], seen)}
    if kind == "map":
        return {"type": "map", "values": _canonical(node["values"], seen)}
    name = node["name"]
    if name in seen:
        return name
    seen.add(name)
    out: dict[str, Any] = {"name": name, "type": kind}
    if kind in ("record", "error"):
        out["fields"] = [{"name": f["name"], "type": _canonical(f["type"], seen)}
                         for f in node["fields"]]
    elif kind == "enum":
        out["symbols"] = node["symbols"]
    else:
        out["size"] = node["size"]
    return out


def canonical(parsed: AvroSchema) -> str:
    """The spec's Parsing Canonical Form of the schema's own text."""
    return json.dumps(_canonical(parsed.root, set()), separators=(",", ":"),
                      ensure_ascii=False)


_SCHEMA_KEYS = ("name", "type", "fields", "symbols", "items", "values", "size")


def _attributes(node: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``node``'s other attributes into ``out``, sorted, those equal to their absence
    dropped (no aliases, ascending order)."""
    for key in sorted(node.keys() - set(_SCHEMA_KEYS)):
        value = node[key]
        if key == "aliases":
            if value:
                out[key] = sorted(value)
        elif not (key == "order" and value == "ascending"):
            out[key] = _sorted(value)
    return out


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _normalized(node: Any) -> Any:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [_normalized(branch) for branch in node]
    kind = node["type"]
    if kind in PRIMITIVES and len(node) == 1:
        return kind
    out: dict[str, Any] = {k: node[k] for k in _SCHEMA_KEYS if k in node}
    for key in ("items", "values"):
        if key in out:
            out[key] = _normalized(out[key])
    if "fields" in out:
        out["fields"] = [_attributes(f, {"name": f["name"], "type": _normalized(f["type"])})
                         for f in out["fields"]]
    return _attributes(node, out)


def normalized(parsed: AvroSchema) -> str:
    """The text with the Parsing Canonical Form's normalisations ([PRIMITIVES] for a
    primitive with no attribute, [FULLNAMES], aliases included, [ORDER] then the other
    attributes sorted, [STRINGS], [WHITESPACE]) but every attribute kept: two texts
    that differ in a ``doc``, ``default``, alias, ``order`` or ``logicalType`` differ
    here, as they do for Confluent's registry."""
    return json.dumps(_normalized(parsed.root), separators=(",", ":"), ensure_ascii=False)


_EMPTY = 0xC15D213AA4D7A795


def _fp_table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY & -(fp & 1))
        table.append(fp)
    return table


_FP_TABLE = _fp_table()


def fingerprint64(parsed: AvroSchema) -> int:
    """The spec's CRC-64-AVRO (Rabin) fingerprint of the canonical form, unsigned."""
    fp = _EMPTY
    for byte in canonical(parsed).encode():
        fp = (fp >> 8) ^ _FP_TABLE[(fp ^ byte) & 0xFF]
    return fp


class _Avro:
    name = "AVRO"
    parse = staticmethod(parse)
    canonical = staticmethod(normalized)  # the registry's identity: see the module doc

    @staticmethod
    def incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[str]:
        from spool.registry.formats.avro_resolution import incompatibilities

        return incompatibilities(reader, writer)


FORMAT = _Avro()
