"""Confluent's JSON Schema compatibility rules: can ``reader`` read what ``writer`` wrote?

``incompatibilities(reader, writer)`` walks both schemas side by side and lists each
incompatible difference as ``Found incompatible change: Difference{jsonPath='#/...',
type=NAME}`` (Confluent's words; the path is the reader's). A difference is compatible
when every document valid against the writer stays valid against the reader; the rules
below only ever err towards incompatible (the tests check each compatible verdict
against jsonschema's validation of generated documents), except where Confluent's own
rules do not (oneOf, a required property with a default). The rules:

Schemas and types
  * ``true``/``{}`` reader, or ``false`` writer: compatible. ``false`` reader of anything
    else: TYPE_NARROWED. ``$ref`` is followed on both sides (references included); a
    pair already being compared (recursion) counts as compatible.
  * ``type`` (a missing one is every type; ``enum``/``const`` values imply theirs):
    reader types covering the writer's, ``integer`` covered by ``number``: compatible
    (TYPE_EXTENDED); covering some: TYPE_NARROWED (e.g. number -> integer); none:
    TYPE_CHANGED. Keyword checks below apply only to types both sides share.
  * ``enum`` (``const`` is a one-value enum): reader's a superset (or none): compatible
    (ENUM_ARRAY_EXTENDED); a subset, or added: ENUM_ARRAY_NARROWED; else ENUM_ARRAY_CHANGED.
  * ``not``: the reader's must exclude no more than the writer's (their ``not`` schemas
    compared the other way round), else NOT_TYPE_NARROWED.
Strings and numbers (X_ADDED means the reader has it and the writer had not)
  * maxLength, maximum, exclusiveMaximum, maxItems, maxProperties: ADDED or DECREASED is
    incompatible, REMOVED or INCREASED compatible. minLength, minimum, exclusiveMinimum,
    minItems, minProperties: ADDED or INCREASED incompatible, REMOVED or DECREASED not.
    (Draft 4's boolean exclusive flags are read as draft 6's numbers.)
  * pattern: PATTERN_ADDED, PATTERN_CHANGED incompatible; removed compatible.
  * multipleOf: MULTIPLE_OF_ADDED; MULTIPLE_OF_EXPANDED (the reader's a multiple of the
    writer's, 2 -> 4) and MULTIPLE_OF_CHANGED incompatible; REDUCED (4 -> 2) compatible.
  * format is an annotation (as Confluent has it): not checked.
Objects: the content model is open (additionalProperties absent or true; draft 2019+
unevaluatedProperties counts when additionalProperties is absent), closed (false) or
partially open (a schema); a property whose name a patternProperties entry matches is
covered by that entry's schema.
  * A property the reader adds: to an open writer PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
    (compatible only when its schema is ``true``/``{}``); to a closed writer compatible;
    to a partially open one compatible when the reader's property schema reads the
    writer's additionalProperties, else PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL.
  * A property the reader removes: open reader compatible; closed reader
    PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL (unless the writer's was ``false``);
    partially open reader compatible when its additionalProperties reads the writer's
    property, else PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL.
  * A property on both sides: compared recursively (#/properties/name).
  * additionalProperties: reader false, writer not: ADDITIONAL_PROPERTIES_REMOVED; reader a
    schema, writer true: ADDITIONAL_PROPERTIES_NARROWED; both schemas: recursive.
  * required: a name the reader adds: REQUIRED_ATTRIBUTE_ADDED, or
    REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL when the property itself is new and
    the writer was not open; compatible when the reader's property has a ``default``
    (Confluent's REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED). Removed: compatible.
  * dependencies / dependentRequired arrays: DEPENDENCY_ARRAY_ADDED, _EXTENDED, _CHANGED
    incompatible, removed or narrowed compatible; dependency schemas
    (dependentSchemas): DEPENDENCY_SCHEMA_ADDED, or compared recursively. propertyNames,
    patternProperties of the same pattern: recursive.
Arrays: a tuple (draft 7 ``items: [...]`` + additionalItems, 2020-12 prefixItems +
items) has an open (absent/true), closed (false) or partial (schema) rest.
  * items as one schema on both sides: recursive (#/items).
  * A position the reader adds: open writer rest ITEM_ADDED_TO_OPEN_CONTENT_MODEL, closed
    compatible, partial ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL unless
    covered. A position the reader drops: closed reader rest
    ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL, partial ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_
    OPEN_CONTENT_MODEL unless covered, open compatible. The rest: ADDITIONAL_ITEMS_REMOVED
    (reader false), ADDITIONAL_ITEMS_NARROWED (reader schema, writer open), or recursive.
  * uniqueItems added: UNIQUE_ITEMS_ADDED.
Combined schemas
  * oneOf/anyOf on both sides: every writer branch must be read by some reader branch,
    else SUM_TYPE_NARROWED (the reader has fewer branches) or
    COMBINED_TYPE_SUBSCHEMAS_CHANGED; oneOf -> anyOf is compatible
    (COMBINED_TYPE_EXTENDED), any other change of kind COMBINED_TYPE_CHANGED. A writer
    schema that a reader branch reads (a writer's type list: each of its types by some
    branch, as Confluent reads ``"type": [...]`` as anyOf): compatible
    (SUM_TYPE_EXTENDED); else TYPE_CHANGED.
    A writer sum read by a plain reader: each branch must be read, else SUM_TYPE_NARROWED.
    A schema's own keywords beside oneOf/anyOf are merged into each of its branches.
    oneOf is read as a sum, as Confluent does (branches a document matches twice are
    not told apart).
  * allOf on both sides: each reader conjunct must read some writer conjunct (or the
    whole writer), else PRODUCT_TYPE_EXTENDED (the reader has more) or
    COMBINED_TYPE_SUBSCHEMAS_CHANGED, then the reader's own keywords are compared with
    the whole writer; allOf on one side only is merged into one schema (``$ref``s in it
    followed), so allOf [$ref base, own properties] compares like the flat schema.
  * Merging (``json_merge``) is exact for most keywords; where one schema cannot say
    both, a writer keeps the one (it then accepts more: a compatible verdict stays
    safe) and a reader is reported COMBINED_TYPE_CHANGED.
Keywords: only those the schema's draft gives meaning to count (jsonschema's validators
for that draft: draft 4 has no const or propertyNames, 2019-09 no dependencies, 2020-12
no additionalItems); other keys, custom ones included, constrain nothing and are ignored.
A known keyword modelled nowhere above (contains, if/then/else, unevaluatedItems,
$dynamicRef, ...): the reader adding or changing one is incompatible (KEYWORD_CHANGED,
e.g. CONTAINS_CHANGED); dropping one is compatible.
Cost: sub-verdicts are remembered per comparison; one visiting more than BUDGET schema
pairs stops (``TooComplex``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema
from referencing import Resource, Specification
from referencing.jsonschema import specification_with

from spool.registry.formats import json_keywords
from spool.registry.formats.json_keywords import ANNOTATIONS, as_dict, json_key, trivial
from spool.registry.formats.json_merge import Embedded, Unmergeable, embed, merge

MODELLED = frozenset({
    "$ref", "type", "enum", "const", "not", "allOf", "anyOf", "oneOf",
    "maxLength", "minLength", "pattern", "maximum", "minimum", "exclusiveMaximum",
    "exclusiveMinimum", "multipleOf", "properties", "patternProperties",
    "additionalProperties", "unevaluatedProperties", "required", "maxProperties",
    "minProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "propertyNames", "items", "prefixItems", "additionalItems", "maxItems", "minItems",
    "uniqueItems",
})
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_ONES = ("additionalProperties", "additionalItems", "unevaluatedProperties",
                "unevaluatedItems", "not", "if", "then", "else", "contains", "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_NUMERIC = {"integer", "number"}
BUDGET = 100_000  # schema pairs one comparison may visit (about 2 s)
_ALL_TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


@dataclass(frozen=True)
class Node:
    """A schema in its document: how its ``$ref``s resolve, and the draft it is in."""

    schema: Any
    resolver: Any  # referencing.Resolver
    spec: Specification[Any]

    def child(self, schema: Any) -> Node:
        if isinstance(schema, Embedded):
            return schema.node  # a merged-in subschema of another document
        if not isinstance(schema, dict) or not any(
                isinstance(schema.get(k), str) for k in ("$id", "id", "$schema")):
            return Node(schema, self.resolver, self.spec)
        draft = schema.get("$schema")
        spec = specification_with(draft, default=self.spec) if isinstance(draft, str) else self.spec
        resource = Resource.from_contents(schema, default_specification=spec)
        if resource.id() is None:
            return Node(schema, self.resolver, spec)
        return Node(schema, self.resolver.in_subresource(resource), spec)

    def lookup(self, ref: str) -> Node:
        """The node ``ref`` names (raises ``referencing.exceptions.Unresolvable``)."""
        resolved = self.resolver.lookup(ref)
        contents = resolved.contents
        spec = self.spec
        if isinstance(contents, dict) and "$schema" in contents:
            spec = specification_with(contents["$schema"], default=spec)
        return Node(contents, resolved.resolver, spec)

    def modern(self) -> bool:
        return self.spec.name in ("draft2019-09", "draft2020-12")


def subschemas(node: Node) -> Iterator[tuple[str, Node]]:
    """Each (keyword path, subschema) directly inside ``node``, under the keywords its
    draft knows."""
    schema = node.schema
    if not isinstance(schema, dict):
        return
    known = vocabulary(node.spec.name)
    schema = {k: v for k, v in schema.items() if k in known or k in ("$defs", "definitions")}
    for key in _SCHEMA_MAPS:
        for name, sub in as_dict(schema.get(key)).items():
            yield f"{key}/{name}", node.child(sub)
    for key in _SCHEMA_ONES:
        if key in schema:
            yield key, node.child(schema[key])
    for key in (*_SCHEMA_LISTS, "items"):
        value = schema.get(key)
        if isinstance(value, list):
            for i, sub in enumerate(value):
                yield f"{key}/{i}", node.child(sub)
        elif key == "items" and value is not None:
            yield key, node.child(value)
    for name, sub in as_dict(schema.get("dependencies")).items():
        if not isinstance(sub, list):
            yield f"dependencies/{name}", node.child(sub)


_VALIDATORS = {
    "draft-04": jsonschema.Draft4Validator, "draft-06": jsonschema.Draft6Validator,
    "draft-07": jsonschema.Draft7Validator, "draft2019-09": jsonschema.Draft201909Validator,
    "draft2020-12": jsonschema.Draft202012Validator,
}


@functools.cache
def vocabulary(draft: str) -> frozenset[str]:
    """The keywords ``draft`` gives meaning to (jsonschema's validators), annotations and
    what its validators read beside their own keyword."""
    known = set(_VALIDATORS.get(draft, jsonschema.Draft7Validator).VALIDATORS)
    known |= {"then", "else"} if "if" in known else set()
    known |= {"exclusiveMaximum", "exclusiveMinimum"} if draft == "draft-04" else set()
    known |= {"minContains", "maxContains"} if "unevaluatedItems" in known else set()
    return frozenset(known | ANNOTATIONS)


class TooComplex(Exception):
    """The comparison took more than BUDGET schema pairs."""


def incompatibilities(reader: Node, writer: Node) -> list[str]:
    diffs = _Diff()
    try:
        diffs.compare(reader, writer, "#")
    except TooComplex:
        return [f"Found incompatible change: the schemas are too complex to compare "
                f"(over {BUDGET} schema pairs)"]
    return [f"Found incompatible change: Difference{{jsonPath='{'#/' if path == '#' else path}', "
            f"type={kind}}}" for path, kind in dict.fromkeys(diffs.found)]


def _types_of(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    if kind is None:
        values = json_keywords.enum_values(schema)
        if values is None:
            return set(_ALL_TYPES)
        return {_json_type(v) for v in values}
    types = {kind} if isinstance(kind, str) else set(kind)
    return types | ({"integer"} if "number" in types else set())


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def _numeric_bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """Draft 4's boolean exclusiveMaximum/Minimum as draft 6's numbers."""
    out = dict(schema)
    for bound, flag in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        if isinstance(out.get(flag), bool):
            if out.pop(flag) and bound in out:
                out[flag] = out.pop(bound)
    return out


class _Diff:
    """One comparison's findings. ``reads`` answers sub-questions (is this branch read
    by that one?) in a trial whose verdicts are remembered for the whole comparison:
    an incompatible one always, a compatible one unless it leaned on a pair still being
    compared (recursion), which keeps nested combinators from going exponential."""

    def __init__(self, parent: _Diff | None = None) -> None:
        self.found: list[tuple[str, str]] = []
        self._active: set[tuple[int, int]] = set(parent._active) if parent else set()
        self._memo: dict[tuple[int, int], tuple[bool, Any, Any]] = (
            parent._memo if parent else {})
        self._branch_memo: dict[tuple[int, str, bool], tuple[list[Node], Any]] = (
            parent._branch_memo if parent else {})
        self._budget = parent._budget if parent else [BUDGET]
        self._stripped: dict[int, tuple[Any, dict[str, Any]]] = (
            parent._stripped if parent else {})
        self._texts: dict[int, tuple[Any, str]] = parent._texts if parent else {}
        self.assumed = False  # a verdict here took a pair in progress as compatible

    def add(self, path: str, kind: str) -> None:
        self.found.append((path, kind))

    def _text(self, schema: Any) -> str:
        key = id(schema)
        if key not in self._texts:
            self._texts[key] = (schema, json_key(schema))
        return self._texts[key][1]

    def _known(self, node: Node) -> Node:
        """``node`` with only the keywords its draft knows (and annotations): anything
        else constrains nothing, and its value was never checked to be a schema. The
        same dict stays the same dict (recursion is told by identity)."""
        schema = node.schema
        if not isinstance(schema, dict):
            return Node(schema if isinstance(schema, bool) else True, node.resolver, node.spec)
        known = vocabulary(node.spec.name)
        if schema.keys() <= known:
            return node
        key = id(schema)
        if key not in self._stripped:
            self._stripped[key] = (schema, {k: v for k, v in schema.items() if k in known})
        return Node(self._stripped[key][1], node.resolver, node.spec)

    def reads(self, reader: Node, writer: Node) -> bool:
        """Whether ``reader`` reads ``writer``, without recording why not."""
        reader, writer = _deref(reader), _deref(writer)
        key = (id(reader.schema), id(writer.schema))
        if key in self._memo:
            return self._memo[key][0]
        trial = _Diff(self)
        trial.compare(reader, writer, "#")
        verdict = not trial.found
        if trial.assumed:
            self.assumed = True
        if not verdict or not trial.assumed:  # the schemas pinned: their ids stay theirs
            self._memo[key] = (verdict, reader.schema, writer.schema)
        return verdict

    def compare(self, reader: Node, writer: Node, path: str) -> None:
        self._budget[0] -= 1
        if self._budget[0] < 0:
            raise TooComplex
        reader, writer = self._known(_deref(reader)), self._known(_deref(writer))
        r, w = reader.schema, writer.schema
        if w is False or trivial(r):
            return
        if r is False:
            self.add(path, "TYPE_NARROWED")
            return
        if w is True:
            w = {}
            writer = Node(w, writer.resolver, writer.spec)
        pair = (id(r), id(w))
        if pair in self._active:
            self.assumed = True
            return
        if self._text(r) == self._text(w) and "$ref" not in self._text(r):
            return  # the same text, no $ref that could lead to different references
        self._active.add(pair)
        try:
            self._compare_dicts(reader, writer, path)
        except Unmergeable:
            self.add(path, "COMBINED_TYPE_CHANGED")
        finally:
            self._active.discard(pair)

    def _compare_dicts(self, reader: Node, writer: Node, path: str) -> None:
        r, w = reader.schema, writer.schema
        r_sum = next((k for k in ("oneOf", "anyOf") if k in r), None)
        w_sum = next((k for k in ("oneOf", "anyOf") if k in w), None)
        if r_sum or w_sum:
            self._sums(reader, writer, path, r_sum, w_sum)
            return
        if "allOf" in r or "allOf" in w:
            self._products(reader, writer, path)
            return
        _structural(self, reader, writer, path)

    def _branches(self, node: Node, key: str, writer: bool) -> list[Node]:
        """Each branch of ``key``, with the keywords beside it merged in."""
        memo_key = (id(node.schema), key, writer)
        if memo_key in self._branch_memo:
            return self._branch_memo[memo_key][0]
        base = {k: v for k, v in node.schema.items() if k != key}
        out = []
        for sub in node.schema[key]:
            branch = _deref(node.child(sub))
            if not trivial(base):
                branch = node.child(merge(base, embed(branch), writer))
            out.append(branch)
        self._branch_memo[memo_key] = (out, node.schema)
        return out

    def _sums(self, reader: Node, writer: Node, path: str, r_sum: str | None,
              w_sum: str | None) -> None:
        if r_sum and w_sum:
            if r_sum != w_sum and not (w_sum == "oneOf" and r_sum == "anyOf"):
                self.add(path, "COMBINED_TYPE_CHANGED")
                return
            r_branches = self._branches(reader, r_sum, writer=False)
            w_branches = self._branches(writer, w_sum, writer=True)
            unread = [w for w in w_branches if not any(self.reads(r, w) for r in r_branches)]
            if unread:
                kind = ("SUM_TYPE_NARROWED" if len(r_branches) < len(w_branches)
                        else "COMBINED_TYPE_SUBSCHEMAS_CHANGED")
                self.add(path, kind)
        elif r_sum:
            r_branches = self._branches(reader, r_sum, writer=False)
            kinds = writer.schema.get("type")
            variants = ([writer.child({**writer.schema, "type": t}) for t in kinds]
                        if isinstance(kinds, list) and len(kinds) > 1 else [writer])
            if not all(any(self.reads(r, v) for r in r_branches) for v in variants):
                self.add(path, "TYPE_CHANGED")
        elif w_sum:
            for w in self._branches(writer, w_sum, writer=True):
                if not self.reads(reader, w):
                    self.add(path, "SUM_TYPE_NARROWED")
                    return

    def _products(self, reader: Node, writer: Node, path: str) -> None:
        r, w = reader.schema, writer.schema
        whole = _flatten(writer, writer=True)
        if "allOf" in r and "allOf" in w:
            r_parts = [_deref(reader.child(p)) for p in r["allOf"]]
            w_parts = [_deref(writer.child(p)) for p in w["allOf"]]
            unmatched = [p for p in r_parts
                         if not any(self.reads(p, q) for q in (*w_parts, whole))]
            if unmatched:
                self.add(path, "PRODUCT_TYPE_EXTENDED" if len(r_parts) > len(w_parts)
                         else "COMBINED_TYPE_SUBSCHEMAS_CHANGED")
            rest = reader.child({k: v for k, v in r.items() if k != "allOf"})
            self.compare(rest, whole, path)
            return
        self.compare(_flatten(reader, writer=False), whole, path)


def _flatten(node: Node, writer: bool, depth: int = 0) -> Node:
    """``allOf`` merged into the schema holding it (``json_merge``), ``$ref``s followed;
    a writer's ``allOf`` nested 32 deep (a cycle) stops accepting more, a reader's fails."""
    schema = node.schema
    if not isinstance(schema, dict) or "allOf" not in schema:
        return node
    if depth > 32:
        if writer:
            return node.child({})
        raise Unmergeable("allOf nested too deeply")
    merged: Any = {k: v for k, v in schema.items() if k != "allOf"}
    for sub in schema["allOf"]:
        part = _flatten(_deref(node.child(sub)), writer, depth + 1)
        merged = merge(merged, embed(part), writer)
        if merged is False:
            return node.child(False)
    return node.child(merged)


def _deref(node: Node) -> Node:
    """Follows ``$ref`` (a draft 2019+ ``$ref`` beside other keywords joins them)."""
    for _ in range(64):
        schema = node.schema
        if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
            return node
        target = node.lookup(schema["$ref"])
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        if node.modern() and not trivial(rest) and isinstance(target.schema, dict):
            joined = {**rest, "allOf": [*rest.get("allOf", ()), Embedded(target)]}
            return node.child(joined)
        node = target
    return node


def _structural(d: _Diff, reader: Node, writer: Node, path: str) -> None:
    r, w = _numeric_bounds(reader.schema), _numeric_bounds(writer.schema)
    r_types, w_types = _types_of(r), _types_of(w)
    shared = w_types & r_types
    if not w_types <= r_types:
        d.add(path, "TYPE_NARROWED" if shared else "TYPE_CHANGED")
    json_keywords.enum_and_not(d, reader, writer, path)
    if shared & {"string"}:
        json_keywords.strings(d, r, w, path)
    if shared & _NUMERIC:
        json_keywords.numbers(d, r, w, path)
    if "object" in shared:
        json_keywords.objects(d, reader, writer, path)
    if "array" in shared:
        json_keywords.arrays(d, reader, writer, path)
    unmodelled = r.keys() - MODELLED - ANNOTATIONS
    if "additionalProperties" in r and "unevaluatedProperties" in r:
        unmodelled.add("unevaluatedProperties")  # the rest is additionalProperties then
    for key in sorted(unmodelled):
        if key not in w or json_key(r[key]) != json_key(w[key]):
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", key.lstrip("$")).upper()
            d.add(f"{path}/{key}", f"{name}_CHANGED")

