"""The per-keyword halves of ``json_diff``'s rules (strings, numbers, enums, objects,
arrays); ``json_diff``'s docstring states them. Each function takes the running diff
(``add(path, kind)``, ``compare(reader, writer, path)``, ``reads(reader, writer)``) and
the two sides, and records the incompatible differences it finds.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spool.registry.formats.json_diff import Node, _Diff

ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$comment", "$defs", "definitions",
    "$vocabulary", "title", "description", "default", "examples", "readOnly", "writeOnly",
    "deprecated", "format", "contentEncoding", "contentMediaType", "contentSchema",
})

# keyword: (the type name's stem, True when a larger value accepts more)
_BOUNDS = {
    "maxLength": ("MAX_LENGTH", True), "minLength": ("MIN_LENGTH", False),
    "maximum": ("MAXIMUM", True), "minimum": ("MINIMUM", False),
    "exclusiveMaximum": ("EXCLUSIVE_MAXIMUM", True),
    "exclusiveMinimum": ("EXCLUSIVE_MINIMUM", False),
    "maxItems": ("MAX_ITEMS", True), "minItems": ("MIN_ITEMS", False),
    "maxProperties": ("MAX_PROPERTIES", True), "minProperties": ("MIN_PROPERTIES", False),
}


def trivial(schema: Any) -> bool:
    """Accepts every document: ``true`` or only annotations."""
    return schema is True or (isinstance(schema, dict) and not (schema.keys() - ANNOTATIONS))


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def decimal(value: Any) -> Decimal:
    return Decimal(str(value))


def bounds(d: _Diff, r: dict[str, Any], w: dict[str, Any], path: str,
           keywords: tuple[str, ...]) -> None:
    for kw in keywords:
        stem, larger_reads_more = _BOUNDS[kw]
        if kw not in r:
            continue  # removed or never there: the reader accepts at least as much
        if kw not in w:
            d.add(f"{path}/{kw}", f"{stem}_ADDED")
            continue
        rv, wv = decimal(r[kw]), decimal(w[kw])
        if rv != wv and (rv > wv) != larger_reads_more:
            d.add(f"{path}/{kw}", f"{stem}_DECREASED" if larger_reads_more
                  else f"{stem}_INCREASED")


def strings(d: _Diff, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
    bounds(d, r, w, path, ("maxLength", "minLength"))
    if "pattern" in r and r["pattern"] != w.get("pattern"):
        d.add(f"{path}/pattern", "PATTERN_CHANGED" if "pattern" in w else "PATTERN_ADDED")


def _limit(schema: dict[str, Any], upper: bool) -> tuple[Decimal, bool, str] | None:
    """The tighter of a schema's inclusive and exclusive bounds on one side:
    (value, exclusive, its keyword)."""
    found = []
    for kw, exclusive in ((("maximum", False), ("exclusiveMaximum", True)) if upper
                          else (("minimum", False), ("exclusiveMinimum", True))):
        if kw in schema:
            value = decimal(schema[kw])
            found.append(((-value if upper else value), exclusive, kw))
    if not found:
        return None
    tightest = max(found, key=lambda f: (f[0], f[1]))
    return (-tightest[0] if upper else tightest[0]), tightest[1], tightest[2]


def numbers(d: _Diff, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
    for upper in (True, False):
        rb, wb = _limit(r, upper), _limit(w, upper)
        if rb is None:
            continue
        stem, _ = _BOUNDS[rb[2]]
        if wb is None or rb[2] not in w:
            if wb is None or not _within(wb, rb, upper):
                d.add(f"{path}/{rb[2]}", f"{stem}_ADDED")
        elif not _within(wb, rb, upper):
            d.add(f"{path}/{rb[2]}", f"{stem}_DECREASED" if upper else f"{stem}_INCREASED")
    if "multipleOf" not in r:
        return
    if "multipleOf" not in w:
        d.add(f"{path}/multipleOf", "MULTIPLE_OF_ADDED")
        return
    rm, wm = decimal(r["multipleOf"]), decimal(w["multipleOf"])
    try:
        if wm % rm == 0:
            return  # every multiple of the writer's is one of the reader's
        kind = "MULTIPLE_OF_EXPANDED" if rm % wm == 0 else "MULTIPLE_OF_CHANGED"
    except InvalidOperation:
        kind = "MULTIPLE_OF_CHANGED"
    d.add(f"{path}/multipleOf", kind)


def _within(writer: tuple[Decimal, bool, str], reader: tuple[Decimal, bool, str],
            upper: bool) -> bool:
    """Whether every number within the writer's bound is within the reader's."""
    (wv, w_excl, _), (rv, r_excl, _) = writer, reader
    if wv == rv:
        return w_excl or not r_excl
    return wv < rv if upper else wv > rv


def enum_and_not(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    r, w = reader.schema, writer.schema
    r_values, w_values = enum_values(r), enum_values(w)
    if r_values is not None:
        where = f"{path}/{'const' if 'const' in r else 'enum'}"
        if w_values is None:
            d.add(where, "ENUM_ARRAY_NARROWED")
        else:
            r_keys, w_keys = {json_key(v) for v in r_values}, {json_key(v) for v in w_values}
            if not w_keys <= r_keys:
                d.add(where, "ENUM_ARRAY_NARROWED" if r_keys < w_keys else "ENUM_ARRAY_CHANGED")
    if "not" in r:
        if "not" not in w or not d.reads(writer.child(w["not"]), reader.child(r["not"])):
            d.add(f"{path}/not", "NOT_TYPE_NARROWED")


def enum_values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return enum if isinstance(enum, list) else None


def _rest(schema: dict[str, Any], keyword: str, modern: bool) -> Any:
    """The content model's schema: True (open), False (closed) or a schema."""
    value = schema.get(keyword)
    if value is None and modern:
        value = schema.get(keyword.replace("additional", "unevaluated"))
    return True if value is None else value


def _cover(node: Node, name: str) -> Any:
    """The schema an undeclared property ``name`` meets in ``node``."""
    for pattern, sub in as_dict(node.schema.get("patternProperties")).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:
            continue
    return _rest(node.schema, "additionalProperties", node.modern())


def objects(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    r, w = reader.schema, writer.schema
    r_props, w_props = as_dict(r.get("properties")), as_dict(w.get("properties"))
    for name, sub in r_props.items():
        where = f"{path}/properties/{name}"
        if name in w_props:
            d.compare(reader.child(sub), writer.child(w_props[name]), where)
            continue
        cover = _cover(writer, name)
        if cover is True:
            if not trivial(sub):
                d.add(where, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        elif cover is not False and not d.reads(reader.child(sub), writer.child(cover)):
            d.add(where, "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    for name, sub in w_props.items():
        if name in r_props:
            continue
        where = f"{path}/properties/{name}"
        cover = _cover(reader, name)
        if cover is False:
            if sub is not False:
                d.add(where, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        elif cover is not True and not d.reads(reader.child(cover), writer.child(sub)):
            d.add(where, "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    _additional(d, reader, writer, path)
    _required(d, r, w, path, writer_open=_rest(w, "additionalProperties",
                                                writer.modern()) is True)
    bounds(d, r, w, path, ("maxProperties", "minProperties"))
    _dependencies(d, reader, writer, path)
    for kw in ("propertyNames",):
        if kw in r:
            d.compare(reader.child(r[kw]), writer.child(w.get(kw, True)), f"{path}/{kw}")
    w_patterns = as_dict(w.get("patternProperties"))
    for pattern, sub in as_dict(r.get("patternProperties")).items():
        other = w_patterns.get(pattern, _rest(w, "additionalProperties", writer.modern()))
        d.compare(reader.child(sub), writer.child(other), f"{path}/patternProperties/{pattern}")


def _additional(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    ra = _rest(reader.schema, "additionalProperties", reader.modern())
    wa = _rest(writer.schema, "additionalProperties", writer.modern())
    _rest_members(d, reader, writer, ra, wa, f"{path}/additionalProperties", "PROPERTIES")


def _rest_members(d: _Diff, reader: Node, writer: Node, r_rest: Any, w_rest: Any,
                  where: str, what: str) -> None:
    """The schemas of what the named or positional members leave (``additionalProperties``,
    ``additionalItems``/``items``): a closed writer or open reader is fine; a reader
    closing is ``ADDITIONAL_<what>_REMOVED``, one narrowing an open writer
    ``ADDITIONAL_<what>_NARROWED``; else the two schemas are compared."""
    if r_rest is True or w_rest is False:
        return
    if r_rest is False:
        d.add(where, f"ADDITIONAL_{what}_REMOVED")
    elif w_rest is True:
        if not trivial(r_rest):
            d.add(where, f"ADDITIONAL_{what}_NARROWED")
    else:
        d.compare(reader.child(r_rest), writer.child(w_rest), where)


def _required(d: _Diff, r: dict[str, Any], w: dict[str, Any], path: str,
              writer_open: bool) -> None:
    r_props, w_props = as_dict(r.get("properties")), as_dict(w.get("properties"))
    before = set(w.get("required") or ())
    for name in r.get("required") or ():
        if name in before or "default" in as_dict(r_props.get(name)):
            continue
        new_property = name in r_props and name not in w_props
        d.add(f"{path}/required/{name}",
              "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
              if new_property and not writer_open else "REQUIRED_ATTRIBUTE_ADDED")


def _dependencies(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    r, w = reader.schema, writer.schema
    for kw in ("dependencies", "dependentRequired", "dependentSchemas"):
        w_deps = as_dict(w.get(kw))
        for name, dep in as_dict(r.get(kw)).items():
            where = f"{path}/{kw}/{name}"
            before = w_deps.get(name)
            if isinstance(dep, list):
                now = {json_key(n) for n in dep}
                if not isinstance(before, list):
                    d.add(where, "DEPENDENCY_ARRAY_ADDED")
                elif not now <= (then := {json_key(n) for n in before}):
                    d.add(where, "DEPENDENCY_ARRAY_EXTENDED" if then < now
                          else "DEPENDENCY_ARRAY_CHANGED")
            elif before is None or isinstance(before, list):
                d.add(where, "DEPENDENCY_SCHEMA_ADDED")
            else:
                d.compare(reader.child(dep), writer.child(before), where)


def _tuple(node: Node) -> tuple[list[Any] | None, Any, str, str]:
    """(positions or None for a plain list, the rest, their keywords) of an array."""
    s = node.schema
    if node.spec.name == "draft2020-12":
        prefix = s.get("prefixItems")
        return (prefix, s.get("items", True), "prefixItems", "items")
    items = s.get("items", True)
    if isinstance(items, list):
        return items, s.get("additionalItems", True), "items", "additionalItems"
    return None, items, "items", "items"


def arrays(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    r, w = reader.schema, writer.schema
    bounds(d, r, w, path, ("maxItems", "minItems"))
    if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
        d.add(f"{path}/uniqueItems", "UNIQUE_ITEMS_ADDED")
    r_pos, r_rest, r_pos_kw, r_rest_kw = _tuple(reader)
    w_pos, w_rest, _, _ = _tuple(writer)
    if r_pos is None and w_pos is None:
        d.compare(reader.child(r_rest), writer.child(w_rest), f"{path}/{r_rest_kw}")
        return
    r_pos, w_pos = r_pos or [], w_pos or []
    for i, sub in enumerate(r_pos):
        where = f"{path}/{r_pos_kw}/{i}"
        if i < len(w_pos):
            d.compare(reader.child(sub), writer.child(w_pos[i]), where)
        elif w_rest is True:
            if not trivial(sub):
                d.add(where, "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        elif w_rest is not False and not d.reads(reader.child(sub), writer.child(w_rest)):
            d.add(where, "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    for i in range(len(r_pos), len(w_pos)):
        where = f"{path}/{r_pos_kw}/{i}"
        if r_rest is False:
            if w_pos[i] is not False:
                d.add(where, "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        elif r_rest is not True and not d.reads(reader.child(r_rest), writer.child(w_pos[i])):
            d.add(where, "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    _rest_members(d, reader, writer, r_rest, w_rest, f"{path}/{r_rest_kw}", "ITEMS")
