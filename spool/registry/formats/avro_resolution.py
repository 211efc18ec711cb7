"""Can data written with one Avro schema be read with another? The spec's resolution rules.

``incompatibilities(reader, writer)`` walks both parsed schemas (``avro.AvroSchema``)
together and lists every place where the spec's "Schema Resolution" signals an error;
empty means every datum the writer can write, the reader can read. The rules, as the
spec states them:

- The two schemas must *match*: both arrays, both maps, both enums with the same
  unqualified name, both fixed with the same unqualified name and size, both records
  with the same unqualified name, either is a union, the same primitive, or the writer's
  primitive promotes to the reader's (int to long, float, double; long to float, double;
  float to double; string to bytes; bytes to string). A named type also matches when the
  writer's full name is one of the reader's aliases (the spec's aliases rewrite the
  writer's names with the reader's). Two ``decimal`` logical types match only with the
  same precision and scale.
- Records: fields are matched by name, else by the reader field's aliases; matched
  fields resolve recursively; a writer field the reader lacks is ignored; a reader field
  the writer lacks needs a ``default``.
- Enums: a writer symbol the reader lacks is an error unless the reader has a default.
- Arrays and maps: items and values resolve recursively.
- Unions: every branch of a writer's union must resolve against the reader; against a
  reader's union, a writer's schema resolves with the *first* reader branch it matches,
  and it is an error when none matches (or that branch does not resolve). So a writer's
  ``b.X`` read with a reader's ``[a.X, b.X]`` resolves with ``a.X`` (names match
  unqualified), as fastavro decodes it; Java's decoder would take ``b.X``.
- Recursive types terminate: a pair of named types already being compared is taken as
  resolving (the check is coinductive), so each pair is reported at most once.

Each message is ``ERROR_TYPE at PATH: what``, where ERROR_TYPE is Avro's own name for it
(NAME_MISMATCH, FIXED_SIZE_MISMATCH, MISSING_ENUM_SYMBOLS,
READER_FIELD_MISSING_DEFAULT_VALUE, TYPE_MISMATCH, MISSING_UNION_BRANCH) and PATH a JSON
pointer into the reader's schema (``/fields/2/type``; ``/`` is the whole schema).
Where Avro's ``SchemaCompatibility`` (Java, and the Python port) departs from the spec,
this follows the spec: a reader's union is resolved with its first matching branch, not
with whichever branch would resolve; decimals must agree on precision and scale.
"""

from __future__ import annotations

from typing import Any

from spool.registry.formats.avro import AvroSchema, node_kind

PROMOTIONS = {
    "int": frozenset(("long", "float", "double")),
    "long": frozenset(("float", "double")),
    "float": frozenset(("double",)),
    "string": frozenset(("bytes",)),
    "bytes": frozenset(("string",)),
}


def incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    return _Resolution(reader, writer).resolve(reader.root, writer.root, "")


def _short(full_name: str) -> str:
    return full_name.rpartition(".")[2]


def _describe(node: Any) -> str:
    kind = node_kind(node)
    return f"{kind} {node['name']!r}" if isinstance(node, dict) and "name" in node else kind


def _decimal(node: Any) -> tuple[int, int] | None:
    if isinstance(node, dict) and node.get("logicalType") == "decimal":
        precision, scale = node.get("precision"), node.get("scale", 0)
        if isinstance(precision, int) and isinstance(scale, int) and 0 <= scale <= precision:
            return precision, scale
    return None


class _Resolution:
    def __init__(self, reader: AvroSchema, writer: AvroSchema):
        self.reader = reader
        self.writer = writer
        self.visited: set[tuple[str, str]] = set()

    def resolve(self, r: Any, w: Any, path: str) -> list[str]:
        r, w = self.reader.resolve(r), self.writer.resolve(w)
        if isinstance(w, list):
            messages = []
            for i, branch in enumerate(w):
                problem = None if isinstance(r, list) else self.mismatch(
                    r, self.writer.resolve(branch))
                if problem:
                    messages.append(f"{problem[0]} at {path or '/'}: the writer's union "
                                    f"branch {i}: {problem[1]}")
                else:
                    messages += self.resolve(r, branch, path)
            return messages
        if isinstance(r, list):
            i = self.branch(r, w)
            if i is not None:
                return self.resolve(r[i], w, f"{path}/{i}")
            return [f"MISSING_UNION_BRANCH at {path or '/'}: no branch of the reader's "
                    f"union matches the writer's {_describe(w)}"]
        problem = self.mismatch(r, w)
        if problem:
            return [f"{problem[0]} at {path or '/'}: {problem[1]}"]
        kind = node_kind(r)
        if kind == "array":
            return self.resolve(r["items"], w["items"], f"{path}/items")
        if kind == "map":
            return self.resolve(r["values"], w["values"], f"{path}/values")
        if kind == "enum":
            return self.enum(r, w, path)
        if kind == "record":
            return self.record(r, w, path)
        return []

    def branch(self, union: list[Any], w: Any) -> int | None:
        """The reader's branch for the writer's ``w``: the first that matches."""
        return next((i for i, b in enumerate(union)
                     if self.mismatch(self.reader.resolve(b), w) is None), None)

    def mismatch(self, r: Any, w: Any) -> tuple[str, str] | None:
        """Why two non-union schemas do not match, as (error type, detail), else None."""
        rk, wk = node_kind(r), node_kind(w)
        if rk != wk:
            if rk in PROMOTIONS.get(wk, ()):
                return None
            return ("TYPE_MISMATCH", f"the writer's {_describe(w)} cannot be read as the "
                    f"reader's {_describe(r)}")
        if rk in ("record", "enum", "fixed"):
            if _short(r["name"]) != _short(w["name"]) and w["name"] not in r["aliases"]:
                return ("NAME_MISMATCH", f"the reader's {rk} is named {r['name']!r}, the "
                        f"writer's {w['name']!r} (and it is not one of the reader's aliases)")
            if rk == "fixed" and r["size"] != w["size"]:
                return ("FIXED_SIZE_MISMATCH", f"the reader's fixed {r['name']!r} has size "
                        f"{r['size']}, the writer's {w['size']}")
        rd, wd = _decimal(r), _decimal(w)
        if rd and wd and rd != wd:
            return ("TYPE_MISMATCH", f"the reader's decimal has precision and scale {rd}, "
                    f"the writer's {wd}")
        return None

    def enum(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        missing = [s for s in w["symbols"] if s not in r["symbols"]]
        if not missing or "default" in r:
            return []
        return [f"MISSING_ENUM_SYMBOLS at {path or '/'}: the reader's enum {r['name']!r} "
                f"lacks the writer's symbols {missing} and has no default"]

    def record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        pair = (r["name"], w["name"])
        if pair in self.visited:
            return []
        self.visited.add(pair)
        by_name = {f["name"]: f for f in w["fields"]}
        messages: list[str] = []
        for i, field in enumerate(r["fields"]):
            match = next((by_name[n] for n in (field["name"], *field.get("aliases", ()))
                          if n in by_name), None)
            if match is not None:
                messages += self.resolve(field["type"], match["type"],
                                         f"{path}/fields/{i}/type")
            elif "default" not in field:
                messages.append(
                    f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}/fields/{i}: the reader's "
                    f"field {field['name']!r} has no default and the writer's record "
                    f"{w['name']!r} has no such field")
        return messages
