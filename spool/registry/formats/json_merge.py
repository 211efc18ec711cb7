"""One schema for a conjunction (``allOf``, or keywords beside ``anyOf``/``oneOf``
branches), as ``json_diff`` compares schemas keyword by keyword.

``merge(base, extra, writer)`` is exact for type (intersection), enum/const
(intersection), required (union), bounds (the tighter), multipleOf (the larger when one
divides the other), uniqueItems, and for subschemas under the same name or keyword (both
kept, as ``allOf``). Where one schema cannot say both, the answer depends on the side:
a writer's merge keeps the base's keyword (it accepts more, so a compatible verdict
stays safe), a reader's raises ``Unmergeable`` (the caller reports the difference).
Closed content (additionalProperties beside properties) merged with properties the
other side declares is such a case for a reader.

Subschemas taken from another document keep their own ``$ref`` resolution: they are
``Embedded`` dicts carrying their ``json_diff.Node``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from spool.registry.formats.json_keywords import decimal, json_key

_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_ONES = ("additionalProperties", "additionalItems", "unevaluatedProperties",
                "unevaluatedItems", "propertyNames", "contains", "if", "then", "else")


class Unmergeable(Exception):
    """A reader's conjunction that one schema cannot state."""


class Embedded(dict):  # type: ignore[type-arg]
    """A subschema (its content, for inspection) that resolves in ``node``'s document."""

    def __init__(self, node: Any):
        super().__init__(node.schema)
        self.node = node


def embed(node: Any) -> Any:
    """``node``'s schema with each direct subschema carrying its own node."""
    schema = node.schema
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in ("$id", "id", "$schema", "$anchor")}
    for kw in _SCHEMA_MAPS + ("dependencies",):
        if isinstance(out.get(kw), dict):
            out[kw] = {k: _wrap(node, v) for k, v in out[kw].items()}
    for kw in (*_SCHEMA_ONES, "not", "items"):
        if kw in out and not isinstance(out[kw], list):
            out[kw] = _wrap(node, out[kw])
    for kw in ("allOf", "anyOf", "oneOf", "prefixItems", "items"):
        if isinstance(out.get(kw), list):
            out[kw] = [_wrap(node, v) for v in out[kw]]
    return out


def _wrap(node: Any, sub: Any) -> Any:
    return Embedded(node.child(sub)) if isinstance(sub, dict) else sub


def _both(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    return {"allOf": [a, b]}


def _closes(schema: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether ``schema``'s additionalProperties would judge names ``other`` declares."""
    rest = schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
    if rest is True or rest == {}:
        return False
    mine = set(schema.get("properties") or ()) | set(schema.get("patternProperties") or ())
    theirs = set(other.get("properties") or ()) | set(other.get("patternProperties") or ())
    return bool(theirs - mine)


def merge(base: dict[str, Any], extra: Any, writer: bool) -> Any:
    """A schema accepting what both accept (see the module docstring)."""
    if extra is False:
        return False
    if not isinstance(extra, dict):
        return base
    if not writer and (_closes(base, extra) or _closes(extra, base)):
        raise Unmergeable("closed content beside another's properties")
    merged, extra = _const_as_enum(base), _const_as_enum(extra)
    for kw, value in extra.items():
        if kw not in merged or json_key(merged[kw]) == json_key(value):
            merged[kw] = value
            continue
        combined = _combine(kw, merged[kw], value)
        if combined is not _NO:
            merged[kw] = combined
        elif not writer:
            raise Unmergeable(f"two {kw} values")
    return merged


_NO = object()


def _combine(kw: str, mine: Any, value: Any) -> Any:
    """One value of ``kw`` meaning both, or _NO (also for values of a shape the keyword
    does not have in this draft)."""
    if type(mine) is not type(value) and not (_number(mine) and _number(value)):
        return _NO
    if isinstance(mine, dict) and kw not in (*_SCHEMA_MAPS, "dependencies", *_SCHEMA_ONES,
                                             "not", "items"):
        return _NO
    if kw in _UPPER or kw in _LOWER or kw == "multipleOf":
        if not (_number(mine) and _number(value)):
            return _NO
    if kw in _SCHEMA_MAPS and isinstance(mine, dict):
        return {**mine, **value, **{k: _both(mine[k], value[k]) for k in mine.keys() & value.keys()}}
    if kw == "dependencies" and isinstance(mine, dict):
        out = {**mine, **value}
        for k in mine.keys() & value.keys():
            a, b = mine[k], value[k]
            if isinstance(a, list) != isinstance(b, list):
                return _NO
            out[k] = [*a, *[v for v in b if v not in a]] if isinstance(a, list) else _both(a, b)
        return out
    if kw == "not":
        return {"anyOf": [mine, value]}
    if kw in _SCHEMA_ONES or (kw == "items" and not isinstance(mine, list)
                              and not isinstance(value, list)):
        return _both(mine, value)
    if kw in ("items", "prefixItems"):
        if not (isinstance(mine, list) and isinstance(value, list)) or len(mine) != len(value):
            return _NO
        return [_both(a, b) for a, b in zip(mine, value, strict=True)]
    if kw == "anyOf" and isinstance(mine, list):
        return [_both(x, {"anyOf": value}) for x in mine]
    if kw in ("required", "allOf") and isinstance(mine, list):
        return [*mine, *[v for v in value if v not in mine]]
    if kw == "type" and isinstance(mine, (str, list)):
        return sorted(_types(mine) & _types(value))
    if kw == "enum" and isinstance(mine, list):
        keys = {json_key(v) for v in value}
        return [v for v in mine if json_key(v) in keys]
    if kw in _UPPER or kw in _LOWER:
        return (min if kw in _UPPER else max)((mine, value), key=decimal)
    if kw == "uniqueItems":
        return bool(mine or value)
    if kw == "multipleOf" and _divides(mine, value):
        return max(mine, value, key=decimal)
    return _NO


def _const_as_enum(schema: dict[str, Any]) -> dict[str, Any]:
    if "const" not in schema:
        return dict(schema)
    out = {k: v for k, v in schema.items() if k != "const"}
    enum = out.get("enum")
    keep = json_key(schema["const"])
    out["enum"] = ([v for v in enum if json_key(v) == keep] if isinstance(enum, list)
                   else [schema["const"]])
    return out


def _types(kind: Any) -> set[str]:
    types = {kind} if isinstance(kind, str) else set(kind)
    return types | ({"integer"} if "number" in types else set())


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _divides(a: Any, b: Any) -> bool:
    x, y = decimal(a), decimal(b)
    try:
        return x != Decimal(0) and y != Decimal(0) and (x % y == 0 or y % x == 0)
    except InvalidOperation:
        return False
