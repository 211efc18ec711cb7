"""JSON Schema: validity by draft, canonical form, and Confluent's compatibility rules.

Each CASES row is (the rule, old, new, backward, forward): BACKWARD asks whether ``new``
reads what ``old`` wrote (reader=new, writer=old), FORWARD the other way round; the
expectations are the (jsonPath, difference type) pairs Confluent's rules give, empty when
compatible. INVALID: schemas refused, saying where. Then references, the transitive
levels through ``compatibility.check``, the registry's core, and property tests: a
compatible verdict checked against jsonschema's validation of generated documents (random
pairs and mutated neighbours, drafts 7 and 2020-12), and any keyword soup that parses
compares without an exception.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spool.registry.compatibility import check
from spool.registry.core import Core
from spool.registry.formats.json_schema import FORMAT
from spool.registry.model import InvalidSchema, Reference, RegistryError
from spool.registry.store import Store

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"
S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741


def obj(props: dict[str, Any], *, extra: Any = None, required: list[str] | None = None,
        **more: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, **more}
    if extra is not None:
        schema["additionalProperties"] = extra
    if required:
        schema["required"] = required
    return schema


def field(schema: dict[str, Any]) -> dict[str, Any]:
    return obj({"f": schema})


def parse(schema: Any, references: dict[str, Any] | None = None):
    text = schema if isinstance(schema, str) else json.dumps(schema)
    refs = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (references or {}).items()}
    return FORMAT.parse(text, refs)


def found(reader: Any, writer: Any) -> list[tuple[str, str]]:
    messages = FORMAT.incompatibilities(parse(reader), parse(writer))
    out = []
    for m in messages:
        match = re.fullmatch(r"Found incompatible change: Difference\{jsonPath='(.*)', "
                             r"type=([A-Z_]+)\}", m)
        assert match, m
        out.append((match[1], match[2]))
    return out


TUPLE7 = {"type": "array", "items": [S]}
TUPLE2020 = {"$schema": D2020, "type": "array", "prefixItems": [S]}
TREE = {"type": "object", "properties": {"v": I, "kids": {"type": "array", "items": {"$ref": "#"}}}}

CASES: list[tuple[str, Any, Any, list[tuple[str, str]], list[tuple[str, str]]]] = [
    # id, old, new, backward (reader=new), forward (reader=old)
    ("open: optional property added", obj({"a": S}), obj({"a": S, "b": S}),
     [("#/properties/b", "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")], []),
    ("open: property with the empty schema added", obj({"a": S}), obj({"a": S, "b": {}}),
     [], []),
    ("closed: optional property added", obj({"a": S}, extra=False),
     obj({"a": S, "b": S}, extra=False),
     [], [("#/properties/b", "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")]),
    ("closed: required property added", obj({"a": S}, extra=False),
     obj({"a": S, "b": S}, extra=False, required=["b"]),
     [("#/required/b", "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")],
     [("#/properties/b", "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")]),
    ("partially open: added property covered", obj({"a": S}, extra=S),
     obj({"a": S, "b": S}, extra=S), [], []),
    ("partially open: added property not covered", obj({"a": S}, extra=S),
     obj({"a": S, "b": I}, extra=S),
     [("#/properties/b", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")],
     [("#/properties/b", "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")]),
    ("patternProperties cover an added property",
     obj({"a": S}, extra=False, patternProperties={"^x_": S}),
     obj({"a": S, "x_b": S}, extra=False, patternProperties={"^x_": S}), [], []),
    ("required added to an existing property", obj({"a": S}), obj({"a": S}, required=["a"]),
     [("#/required/a", "REQUIRED_ATTRIBUTE_ADDED")], []),
    ("required added to a property with a default", obj({"a": S}),
     obj({"a": {**S, "default": "x"}}, required=["a"]), [], []),
    ("additionalProperties true -> false", obj({"a": S}), obj({"a": S}, extra=False),
     [("#/additionalProperties", "ADDITIONAL_PROPERTIES_REMOVED")], []),
    ("additionalProperties true -> a schema", obj({"a": S}), obj({"a": S}, extra=S),
     [("#/additionalProperties", "ADDITIONAL_PROPERTIES_NARROWED")], []),
    ("additionalProperties schema changed", obj({}, extra=S), obj({}, extra=I),
     [("#/additionalProperties", "TYPE_CHANGED")], [("#/additionalProperties", "TYPE_CHANGED")]),
    ("type string -> integer", field(S), field(I),
     [("#/properties/f", "TYPE_CHANGED")], [("#/properties/f", "TYPE_CHANGED")]),
    ("type integer -> number (widened)", field(I), field({"type": "number"}),
     [], [("#/properties/f", "TYPE_NARROWED")]),
    ("type string -> [string, null]", field(S), field({"type": ["string", "null"]}),
     [], [("#/properties/f", "TYPE_NARROWED")]),
    ("root type object -> array", obj({}), {"type": "array"},
     [("#/", "TYPE_CHANGED")], [("#/", "TYPE_CHANGED")]),
    ("enum extended", field({"enum": ["a", "b"]}), field({"enum": ["a", "b", "c"]}),
     [], [("#/properties/f/enum", "ENUM_ARRAY_NARROWED")]),
    ("enum changed", field({"enum": ["a", "b"]}), field({"enum": ["a", "c"]}),
     [("#/properties/f/enum", "ENUM_ARRAY_CHANGED")],
     [("#/properties/f/enum", "ENUM_ARRAY_CHANGED")]),
    ("enum added to a string", field(S), field({**S, "enum": ["a"]}),
     [("#/properties/f/enum", "ENUM_ARRAY_NARROWED")], []),
    ("const changed", field({"const": 1}), field({"const": 2}),
     [("#/properties/f/const", "ENUM_ARRAY_CHANGED")],
     [("#/properties/f/const", "ENUM_ARRAY_CHANGED")]),
    ("maxLength added", field(S), field({**S, "maxLength": 5}),
     [("#/properties/f/maxLength", "MAX_LENGTH_ADDED")], []),
    ("maxLength decreased", field({**S, "maxLength": 10}), field({**S, "maxLength": 5}),
     [("#/properties/f/maxLength", "MAX_LENGTH_DECREASED")], []),
    ("minLength increased", field({**S, "minLength": 1}), field({**S, "minLength": 3}),
     [("#/properties/f/minLength", "MIN_LENGTH_INCREASED")], []),
    ("pattern added", field(S), field({**S, "pattern": "^a"}),
     [("#/properties/f/pattern", "PATTERN_ADDED")], []),
    ("pattern changed", field({**S, "pattern": "^a"}), field({**S, "pattern": "^b"}),
     [("#/properties/f/pattern", "PATTERN_CHANGED")],
     [("#/properties/f/pattern", "PATTERN_CHANGED")]),
    ("maximum decreased", field({**I, "maximum": 100}), field({**I, "maximum": 50}),
     [("#/properties/f/maximum", "MAXIMUM_DECREASED")], []),
    ("minimum added", field(I), field({**I, "minimum": 0}),
     [("#/properties/f/minimum", "MINIMUM_ADDED")], []),
    ("exclusiveMinimum increased", field({**I, "exclusiveMinimum": 0}),
     field({**I, "exclusiveMinimum": 5}),
     [("#/properties/f/exclusiveMinimum", "EXCLUSIVE_MINIMUM_INCREASED")], []),
    ("draft 4 boolean exclusiveMaximum added",
     {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 5},
     {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 5,
      "exclusiveMaximum": True},
     [("#/exclusiveMaximum", "EXCLUSIVE_MAXIMUM_ADDED")], []),
    ("multipleOf 2 -> 4", field({**I, "multipleOf": 2}), field({**I, "multipleOf": 4}),
     [("#/properties/f/multipleOf", "MULTIPLE_OF_EXPANDED")], []),
    ("multipleOf 2 -> 3", field({**I, "multipleOf": 2}), field({**I, "multipleOf": 3}),
     [("#/properties/f/multipleOf", "MULTIPLE_OF_CHANGED")],
     [("#/properties/f/multipleOf", "MULTIPLE_OF_CHANGED")]),
    ("maxProperties added, minProperties increased", obj({}, minProperties=1),
     obj({}, minProperties=2, maxProperties=5),
     [("#/maxProperties", "MAX_PROPERTIES_ADDED"), ("#/minProperties", "MIN_PROPERTIES_INCREASED")],
     []),
    ("dependency array added", obj({"a": S, "b": S}),
     obj({"a": S, "b": S}, dependencies={"a": ["b"]}),
     [("#/dependencies/a", "DEPENDENCY_ARRAY_ADDED")], []),
    ("array items string -> integer", {"type": "array", "items": S},
     {"type": "array", "items": I},
     [("#/items", "TYPE_CHANGED")], [("#/items", "TYPE_CHANGED")]),
    ("maxItems decreased, minItems added, uniqueItems added",
     {"type": "array", "maxItems": 10},
     {"type": "array", "maxItems": 5, "minItems": 1, "uniqueItems": True},
     [("#/maxItems", "MAX_ITEMS_DECREASED"), ("#/minItems", "MIN_ITEMS_ADDED"),
      ("#/uniqueItems", "UNIQUE_ITEMS_ADDED")], []),
    ("draft 7 tuple: position added to an open tuple", TUPLE7, {**TUPLE7, "items": [S, I]},
     [("#/items/1", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")], []),
    ("draft 7 tuple: position added to a closed tuple", {**TUPLE7, "additionalItems": False},
     {**TUPLE7, "items": [S, I], "additionalItems": False},
     [], [("#/items/1", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")]),
    ("2020-12 tuple: position added to an open tuple", TUPLE2020,
     {**TUPLE2020, "prefixItems": [S, I]},
     [("#/prefixItems/1", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")], []),
    ("2020-12 tuple: rest closed", TUPLE2020, {**TUPLE2020, "items": False},
     [("#/items", "ADDITIONAL_ITEMS_REMOVED")], []),
    ("oneOf: branch added", field({"oneOf": [S, I]}), field({"oneOf": [S, I, {"type": "null"}]}),
     [], [("#/properties/f", "SUM_TYPE_NARROWED")]),
    ("oneOf -> anyOf", field({"oneOf": [S, I]}), field({"anyOf": [S, I]}),
     [], [("#/properties/f", "COMBINED_TYPE_CHANGED")]),
    ("oneOf branch changed", field({"oneOf": [S, I]}), field({"oneOf": [S, {"type": "null"}]}),
     [("#/properties/f", "COMBINED_TYPE_SUBSCHEMAS_CHANGED")],
     [("#/properties/f", "COMBINED_TYPE_SUBSCHEMAS_CHANGED")]),
    ("string -> oneOf [string, null]", field(S), field({"oneOf": [S, {"type": "null"}]}),
     [], [("#/properties/f", "SUM_TYPE_NARROWED")]),
    ("type list <-> anyOf of the same types", field({"type": ["string", "null"]}),
     field({"anyOf": [S, {"type": "null"}]}), [], []),
    ("type list -> anyOf missing one", field({"type": ["string", "null", "integer"]}),
     field({"anyOf": [S, {"type": "null"}]}),
     [("#/properties/f", "TYPE_CHANGED")], []),
    ("anyOf keywords beside the branches", field({"type": "object", "anyOf": [
        {"required": ["a"]}, {"required": ["b"]}]}),
     field({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}, {}]}),
     [], [("#/properties/f", "SUM_TYPE_NARROWED")]),
    ("allOf: conjunct added", {"allOf": [obj({"a": S})]},
     {"allOf": [obj({"a": S}), {"required": ["a"]}]},
     [("#/", "PRODUCT_TYPE_EXTENDED")], []),
    ("allOf on one side merges", obj({"a": S}, required=["a"]),
     {"allOf": [obj({"a": S}), {"required": ["a"]}]}, [], []),
    ("keywords beside anyOf apply to each branch",
     {"not": {"anyOf": [obj({}, minProperties=0)]}},
     {"not": {"anyOf": [obj({}, minProperties=0)], "minProperties": 1}},
     [], [("#/not", "NOT_TYPE_NARROWED")]),
    ("a reader's closed content beside branches declaring more: not one schema",
     obj({"a": S}, extra=False),
     {**obj({"a": S}, extra=False), "anyOf": [obj({"b": S}), {"required": ["a"]}]},
     [("#/", "COMBINED_TYPE_CHANGED")], [("#/", "SUM_TYPE_NARROWED")]),
    ("not added", {}, {"not": {"type": "null"}}, [("#/not", "NOT_TYPE_NARROWED")], []),
    ("not narrowed to a smaller set", {"not": {"type": ["null", "string"]}},
     {"not": {"type": "null"}}, [], [("#/not", "NOT_TYPE_NARROWED")]),
    ("$ref followed", obj({"a": {"$ref": "#/definitions/x"}}, definitions={"x": S}),
     obj({"a": {"$ref": "#/definitions/x"}}, definitions={"x": I}),
     [("#/properties/a", "TYPE_CHANGED")], [("#/properties/a", "TYPE_CHANGED")]),
    ("2020-12 $ref beside a keyword",
     {"$schema": D2020, "$defs": {"x": S}, "$ref": "#/$defs/x"},
     {"$schema": D2020, "$defs": {"x": S}, "$ref": "#/$defs/x", "maxLength": 3},
     [("#/maxLength", "MAX_LENGTH_ADDED")], []),
    ("recursive schema unchanged", TREE, TREE, [], []),
    ("recursive schema changed inside", TREE,
     {**TREE, "properties": {**TREE["properties"], "v": S}},
     [("#/properties/v", "TYPE_CHANGED")], [("#/properties/v", "TYPE_CHANGED")]),
    ("nested property added to an open object", obj({"n": obj({})}),
     obj({"n": obj({"b": S})}),
     [("#/properties/n/properties/b", "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")], []),
    ("boolean schema true -> false", True, False, [("#/", "TYPE_NARROWED")], []),
    ("description and title only", field(S), field({**S, "title": "t", "description": "d"}),
     [], []),
    ("contains added (unmodelled keyword)", {"type": "array"},
     {"type": "array", "contains": S}, [("#/contains", "CONTAINS_CHANGED")], []),
]


@pytest.mark.parametrize("old,new,backward,forward", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_compatibility_both_directions(old, new, backward, forward):
    assert found(reader=new, writer=old) == backward
    assert found(reader=old, writer=new) == forward


INVALID: list[tuple[str, Any, dict[str, Any], str]] = [
    # id, schema, references, a phrase the message carries
    ("not JSON", '{"type": "string"', {}, "not JSON"),
    ("NaN is not JSON", '{"type": "number", "maximum": NaN}', {}, "not JSON"),
    ("an array", "[1, 2]", {}, "must be a JSON object or boolean"),
    ("unknown type name", {"type": "strin"}, {}, "#/type"),
    ("negative minLength", {"type": "string", "minLength": -1}, {}, "#/minLength"),
    ("bad regex", {"type": "string", "pattern": "("}, {}, "regex"),
    ("nested fault named by its path", obj({"a": {"type": 5}}), {}, "#/properties/a/type"),
    ("unknown $schema", {"$schema": "http://example.com/my-draft", "type": "string"}, {},
     "unknown $schema"),
    ("2020-12: prefixItems must be an array", {"$schema": D2020, "prefixItems": S}, {},
     "#/prefixItems"),
    ("draft 7: items must be a schema or array", {"$schema": D7, "items": 5}, {}, "#/items"),
    ("$ref to a missing definition", obj({"a": {"$ref": "#/definitions/nope"}}), {},
     "'#/definitions/nope' at #/properties/a does not resolve"),
    ("$ref to a reference not given", obj({"a": {"$ref": "customer.json"}}), {},
     "'customer.json' at #/properties/a does not resolve"),
    ("a reference that is not JSON", obj({"a": {"$ref": "customer.json"}}),
     {"customer.json": "{"}, "reference 'customer.json' is not JSON"),
    ("a reference invalid for its draft", obj({"a": {"$ref": "customer.json"}}),
     {"customer.json": {"type": "nope"}}, "reference 'customer.json' at #/type"),
    ("a reference's own $ref not resolving", obj({"a": {"$ref": "customer.json"}}),
     {"customer.json": obj({"b": {"$ref": "address.json"}})}, "'address.json'"),
]


@pytest.mark.parametrize("schema,references,phrase", [c[1:] for c in INVALID],
                         ids=[c[0] for c in INVALID])
def test_invalid_schemas_are_refused_saying_where(schema, references, phrase):
    with pytest.raises(InvalidSchema) as refused:
        parse(schema, references)
    assert phrase in str(refused.value)


def test_a_schema_nested_too_deeply_is_refused_not_a_crash():
    deep: Any = S
    for _ in range(400):
        deep = obj({"a": deep})
    with pytest.raises(InvalidSchema, match="nested too deeply"):
        parse(deep)


def test_a_deep_schema_that_parses_compares():
    def nest(leaf: Any) -> Any:
        for _ in range(120):
            leaf = obj({"a": leaf})
        return leaf

    assert found(nest(I), nest(S)) == [("#" + "/properties/a" * 120, "TYPE_CHANGED")]


def test_prefix_items_is_only_a_keyword_in_2020_12():
    """Validity is by the schema's own draft: draft 7 ignores an unknown keyword."""
    parse({"$schema": D7, "prefixItems": S})
    parse({"prefixItems": S})  # no $schema: draft 7, Confluent's default


@pytest.mark.parametrize("draft", [
    "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
    D7, "https://json-schema.org/draft/2019-09/schema", D2020])
def test_each_draft_parses(draft):
    parse({"$schema": draft, **obj({"a": S}, required=["a"])})


def test_boolean_schemas_parse():
    assert FORMAT.canonical(parse(True)) == "true"
    assert FORMAT.canonical(parse("false")) == "false"


def test_canonical_form_ignores_layout_and_key_order():
    a = parse('{"type": "object",\n  "properties": {"b": {"type": "string"}, "a": {}}}')
    b = parse('{"properties":{"a":{},"b":{"type":"string"}},"type":"object"}')
    assert FORMAT.canonical(a) == FORMAT.canonical(b)
    assert FORMAT.canonical(a) == '{"properties":{"a":{},"b":{"type":"string"}},"type":"object"}'
    assert FORMAT.canonical(parse({"enum": ["é"]})) == '{"enum":["é"]}'


def test_canonical_form_keeps_differences_that_matter():
    assert FORMAT.canonical(parse(field(S))) != FORMAT.canonical(parse(field(I)))
    assert FORMAT.canonical(parse({"maximum": 1})) != FORMAT.canonical(parse({"maximum": 1.5}))


CUSTOMER = obj({"name": S, "address": {"$ref": "address.json"}})
ADDRESS = obj({"street": S})


def test_references_resolve_by_name_transitively():
    order = parse(obj({"customer": {"$ref": "customer.json"}}),
                  {"customer.json": CUSTOMER, "address.json": ADDRESS})
    same = parse(obj({"customer": {"$ref": "customer.json"}}),
                 {"customer.json": CUSTOMER, "address.json": ADDRESS})
    assert FORMAT.incompatibilities(order, same) == []


def test_references_resolve_by_name_under_an_id_base_and_into_a_fragment():
    schema = {"$id": "https://example.com/schemas/order.json", **obj(
        {"street": {"$ref": "address.json#/properties/street"}})}
    parse(schema, {"address.json": ADDRESS})


def test_reference_by_its_own_id():
    address = {"$id": "https://example.com/address", **ADDRESS}
    parse(obj({"a": {"$ref": "https://example.com/address"}}), {"address.json": address})


def test_a_change_inside_a_referenced_schema_is_found_through_the_ref():
    writer = parse(obj({"customer": {"$ref": "customer.json"}}),
                   {"customer.json": CUSTOMER, "address.json": ADDRESS})
    reader = parse(obj({"customer": {"$ref": "customer.json"}}),
                   {"customer.json": CUSTOMER,
                    "address.json": obj({"street": S, "zip": S}, required=["zip"])})
    messages = FORMAT.incompatibilities(reader, writer)
    assert messages == [
        "Found incompatible change: Difference{jsonPath='#/properties/customer/properties/"
        "address/properties/zip', type=PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL}",
        "Found incompatible change: Difference{jsonPath='#/properties/customer/properties/"
        "address/required/zip', type=REQUIRED_ATTRIBUTE_ADDED}",
    ]
    assert FORMAT.incompatibilities(writer, reader) == []


BASE = {"type": "object", "properties": {"id": I}, "required": ["id"]}


def inherits(props: dict[str, Any]) -> Any:
    return parse({"allOf": [{"$ref": "base.json"}, obj(props)]}, {"base.json": BASE})


def test_allof_over_a_referenced_schema_reads_as_the_flat_schema():
    """The inheritance pattern: allOf [$ref to another subject's schema, own properties]
    compares like the one schema it means, in either direction."""
    flat = parse({"type": "object", "properties": {"id": I, "name": S}, "required": ["id"]})
    assert found_parsed(flat, inherits({"name": S})) == []
    assert found_parsed(inherits({"name": S}), flat) == []
    changed = parse({"type": "object", "properties": {"id": S, "name": S}})
    assert found_parsed(changed, inherits({"name": S})) == [("#/properties/id",
                                                             "TYPE_CHANGED")]


def test_allof_both_sides_matches_conjuncts():
    assert found_parsed(inherits({"name": S}), inherits({"name": S})) == []
    assert found_parsed(inherits({"name": S, "email": S}), inherits({"name": S})) == [
        ("#/", "COMBINED_TYPE_SUBSCHEMAS_CHANGED")]
    assert found_parsed(inherits({"name": S}), inherits({"name": S, "email": S})) == []


def test_mutually_recursive_references_terminate():
    a = {"type": "object", "properties": {"b": {"$ref": "b.json"}}}
    b = {"type": "object", "properties": {"a": {"$ref": "a.json"}, "v": S}}
    b2 = {"type": "object", "properties": {"a": {"$ref": "a.json"}, "v": I}}
    one = parse(obj({"root": {"$ref": "a.json"}}), {"a.json": a, "b.json": b})
    two = parse(obj({"root": {"$ref": "a.json"}}), {"a.json": a, "b.json": b2})
    assert found_parsed(two, two) == []
    assert found_parsed(two, one) == [("#/properties/root/properties/b/properties/v",
                                       "TYPE_CHANGED")]


def found_parsed(reader: Any, writer: Any) -> list[tuple[str, str]]:
    out = []
    for m in FORMAT.incompatibilities(reader, writer):
        match = re.fullmatch(r".*jsonPath='(.*)', type=([A-Z_]+)\}", m)
        assert match, m
        out.append((match[1], match[2]))
    return out


def versions(*schemas: Any) -> list[Any]:
    return [parse(s) for s in schemas]


def test_transitive_levels_check_every_previous_version():
    """v2 was registered while the subject's level was NONE (a type change); v3 only
    documents v2. BACKWARD compares v3 with v2 alone, *_TRANSITIVE with v1 too."""
    v1, v2, v3 = versions(field(S), field(I), field({**I, "description": "count"}))
    assert check("BACKWARD", v3, [v1, v2], FORMAT) == []
    assert check("FORWARD", v3, [v1, v2], FORMAT) == []
    for level in ("BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"):
        assert check(level, v3, [v1, v2], FORMAT) == [
            "Found incompatible change: Difference{jsonPath='#/properties/f', "
            "type=TYPE_CHANGED} (against previous version 1 of 2)"], level


def test_transitive_widening_chain_is_backward_but_not_forward():
    """integer -> number -> [number, null]: each step widens, so every later schema reads
    every earlier one; the earliest reads none of the later ones."""
    v1, v2, v3 = versions(field(I), field({"type": "number"}),
                          field({"type": ["number", "null"]}))
    assert check("BACKWARD_TRANSITIVE", v3, [v1, v2], FORMAT) == []
    forward = check("FORWARD_TRANSITIVE", v3, [v1, v2], FORMAT)
    assert [m.split(" (against")[0].rsplit("type=", 1)[1] for m in forward] == [
        "TYPE_NARROWED}", "TYPE_NARROWED}"]
    assert check("FULL", v3, [v1, v2], FORMAT) == [
        "Found incompatible change: Difference{jsonPath='#/properties/f', "
        "type=TYPE_NARROWED}"]


def test_closed_model_evolution_full_transitive():
    """With a closed content model, adding optional properties is BACKWARD, and FULL
    needs the reader to keep accepting them (partially open: covered)."""
    v1 = obj({"a": S}, extra=False)
    v2 = obj({"a": S, "b": S}, extra=False)
    v3 = obj({"a": S, "b": S, "c": S}, extra=False)
    assert check("BACKWARD_TRANSITIVE", parse(v3), versions(v1, v2), FORMAT) == []
    assert len(check("FORWARD_TRANSITIVE", parse(v3), versions(v1, v2), FORMAT)) == 3
    p1, p2, p3 = (obj(o["properties"], extra=S) for o in (v1, v2, v3))
    assert check("FULL_TRANSITIVE", parse(p3), versions(p1, p2), FORMAT) == []


# A compatible verdict must hold for real documents: whatever the writer accepts, the
# reader accepts (jsonschema's validators decide). Schemas come from a grammar of the
# keywords the rules cover; oneOf only over distinct types (Confluent reads oneOf as a
# sum, which overlapping branches are not), no ``default`` (Confluent lets a required
# property with a default pass, which validation does not).
NAMES = ["a", "b", "c"]
SMALL = st.sampled_from([0, 1, 2, 3, 5, 10])
BOUNDS = ["maxLength", "minLength", "maximum", "minimum", "exclusiveMaximum",
          "exclusiveMinimum", "multipleOf"]
STRING_BOUNDS = {"maxLength", "minLength"}


def _leaf(kind: str, bounds: dict[str, int]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    for kw, value in bounds.items():
        if (kw in STRING_BOUNDS) == (kind == "string") and kind in ("string", "integer",
                                                                     "number"):
            schema[kw] = max(value, 1) if kw == "multipleOf" else value
    return schema


LEAVES = st.one_of(
    st.builds(_leaf, st.sampled_from(["string", "integer", "number", "boolean", "null"]),
              st.dictionaries(st.sampled_from(BOUNDS), SMALL, max_size=2)),
    st.lists(st.sampled_from(["string", "integer", "number", "null"]), min_size=1,
             max_size=3, unique=True).map(lambda ts: {"type": ts}),
    st.lists(st.sampled_from([0, 1, "a", "b", None, 2.5]), min_size=1, max_size=3,
             unique=True).map(lambda vs: {"enum": vs}),
    st.sampled_from([{}, True, False]),
)


def _optional(key: str, strategy: Any) -> Any:
    return st.one_of(st.just({}), strategy.map(lambda v: {key: v}))


def _compound(children: Any) -> Any:
    props = st.dictionaries(st.sampled_from(NAMES), children, max_size=2)
    rest = st.one_of(st.just(False), st.just(True), children)
    objects = st.builds(
        lambda p, *extras: {"type": "object", "properties": p,
                            **{k: v for e in extras for k, v in e.items()}},
        props, _optional("additionalProperties", rest),
        _optional("required", st.lists(st.sampled_from(NAMES), max_size=2, unique=True)),
        _optional("patternProperties", st.dictionaries(
            st.sampled_from(["^a", "^b", "c$", "^x"]), children, max_size=2)),
        _optional("dependencies", st.dictionaries(st.sampled_from(NAMES), st.one_of(
            st.lists(st.sampled_from(NAMES), unique=True, max_size=2), children), max_size=2)),
        _optional("minProperties", SMALL), _optional("maxProperties", SMALL),
        _optional("propertyNames", st.sampled_from([{"maxLength": 1}, {"enum": ["a", "b"]}])))
    arrays = st.one_of(
        st.builds(lambda i, m: {"type": "array", "items": i, **m}, children,
                  _optional("maxItems", SMALL)),
        st.builds(lambda i, m: {"type": "array", "items": i, **m},
                  st.lists(children, min_size=1, max_size=2),
                  _optional("additionalItems", rest)))
    combined = st.one_of(
        st.builds(lambda k, xs: {k: xs}, st.sampled_from(["anyOf", "allOf"]),
                  st.lists(children, min_size=1, max_size=3)),
        st.lists(st.sampled_from(["string", "integer", "boolean", "null", "array"]),
                 min_size=1, max_size=3, unique=True).map(
                     lambda ts: {"oneOf": [{"type": t} for t in ts]}),
        children.map(lambda x: {"not": x}))
    return st.one_of(objects, arrays, combined)


SCHEMAS = st.recursive(LEAVES, _compound, max_leaves=6)
SCALARS = st.sampled_from([None, True, False, 0, 1, 2, 3, 4, 5, 6, 2.5, -1, 7, 10, 11, "",
                           "a", "ab", "abc", "abcd", "abcde", "abcdef", "b", "c"])
DOCUMENTS = st.lists(st.recursive(SCALARS, lambda c: st.one_of(
    st.lists(c, max_size=4), st.dictionaries(st.sampled_from([*NAMES, "x1"]), c, max_size=3)),
    max_leaves=8), min_size=1, max_size=30)
MUTATION_BOUNDS = [*BOUNDS, "maxItems", "minItems", "maxProperties", "minProperties"]


def _nodes(schema: Any, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every object subschema of ``schema`` (the grammar's keywords)."""
    if isinstance(schema, dict):
        out.append(schema)
        for kw, value in schema.items():
            if kw in ("properties", "patternProperties", "dependencies"):
                for sub in value.values():
                    _nodes(sub, out)
            elif isinstance(value, list) and kw in ("items", "anyOf", "allOf", "oneOf"):
                for sub in value:
                    _nodes(sub, out)
            elif kw in ("items", "additionalProperties", "additionalItems", "not"):
                _nodes(value, out)
    return out


@st.composite
def mutated(draw: Any, schema: Any) -> Any:
    """``schema`` with one or two small edits: a neighbour worth comparing it with."""
    schema = json.loads(json.dumps(schema))
    for _ in range(draw(st.integers(1, 2))):
        nodes = _nodes(schema, [])
        if not nodes:
            break
        node = draw(st.sampled_from(nodes))
        op = draw(st.sampled_from(["drop", "bound", "rest", "required", "property", "type",
                                   "enum", "unique"]))
        if op == "drop" and node:
            node.pop(draw(st.sampled_from(sorted(node))))
        elif op == "bound":
            kw = draw(st.sampled_from(MUTATION_BOUNDS))
            node[kw] = max(draw(SMALL), 1) if kw == "multipleOf" else draw(SMALL)
        elif op == "rest":
            kw = draw(st.sampled_from(["additionalProperties", "additionalItems"]))
            node[kw] = draw(st.one_of(st.just(False), st.just(True), LEAVES))
        elif op == "required":
            node["required"] = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
        elif op == "property" and isinstance(node.setdefault("properties", {}), dict):
            node["properties"][draw(st.sampled_from(NAMES))] = draw(LEAVES)
        elif op == "type":
            node["type"] = draw(st.sampled_from(["string", "integer", "number", "object",
                                                 "array", ["integer", "null"]]))
        elif op == "enum":
            node["enum"] = draw(st.lists(st.sampled_from([0, 1, "a", "ab", None]), min_size=1,
                                         max_size=3, unique=True))
        elif op == "unique":
            node["uniqueItems"] = True
    return schema


def _disjoint_one_ofs(schema: Any) -> bool:
    """oneOf only over distinct types (see above)."""
    for node in _nodes(schema, []):
        branches = node.get("oneOf", [])
        kinds = [b.get("type") if isinstance(b, dict) and list(b) == ["type"] else None
                 for b in branches]
        if (any(not isinstance(k, str) for k in kinds) or len(set(kinds)) != len(kinds)
                or {"integer", "number"} <= set(kinds)):
            return False
    return True


def to_2020_12(schema: Any) -> Any:
    """The same schema in draft 2020-12's words (prefixItems, dependentRequired, ...)."""
    if isinstance(schema, list):
        return [to_2020_12(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for kw, value in schema.items():
        if kw == "items" and isinstance(value, list):
            out["prefixItems"] = to_2020_12(value)
        elif kw == "additionalItems":
            if isinstance(schema.get("items"), list):
                out["items"] = to_2020_12(value)
        elif kw == "dependencies":
            for name, dep in value.items():
                target = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
                out.setdefault(target, {})[name] = to_2020_12(dep)
        elif kw in ("properties", "patternProperties"):
            out[kw] = {name: to_2020_12(sub) for name, sub in value.items()}
        else:
            out[kw] = to_2020_12(value)
    return out


def with_2020_12(schema: Any) -> Any:
    return {"$schema": D2020, **to_2020_12(schema)} if isinstance(schema, dict) else schema


def assert_verdict_holds(reader: Any, writer: Any, documents: list[Any], cls: Any) -> None:
    try:
        cls.check_schema(reader)
        cls.check_schema(writer)
    except jsonschema.SchemaError:
        return  # a mutation made it invalid
    if not (_disjoint_one_ofs(reader) and _disjoint_one_ofs(writer)) or found(reader, writer):
        return
    reads, writes = cls(reader), cls(writer)
    for doc in documents:
        try:
            refused = writes.is_valid(doc) and not reads.is_valid(doc)
        except TypeError:
            return  # jsonschema 4.26's draft 7 additionalItems beside "items": true
        assert not refused, f"compatible, yet the reader refuses {doc!r}"


EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@EXAMPLES
@given(SCHEMAS, SCHEMAS, DOCUMENTS)
def test_a_compatible_verdict_holds_for_documents_draft_7(reader, writer, documents):
    assert_verdict_holds(reader, writer, documents, jsonschema.Draft7Validator)


@EXAMPLES
@given(SCHEMAS, SCHEMAS, DOCUMENTS)
def test_a_compatible_verdict_holds_for_documents_2020_12(reader, writer, documents):
    assert_verdict_holds(with_2020_12(reader), with_2020_12(writer), documents,
                         jsonschema.Draft202012Validator)


@EXAMPLES
@given(st.data(), DOCUMENTS)
def test_a_compatible_verdict_holds_between_neighbours_draft_7(data, documents):
    one = data.draw(SCHEMAS)
    other = data.draw(mutated(one))
    assert_verdict_holds(one, other, documents, jsonschema.Draft7Validator)
    assert_verdict_holds(other, one, documents, jsonschema.Draft7Validator)


@EXAMPLES
@given(st.data(), DOCUMENTS)
def test_a_compatible_verdict_holds_between_neighbours_2020_12(data, documents):
    one = data.draw(SCHEMAS)
    other = data.draw(mutated(one))
    one, other = with_2020_12(one), with_2020_12(other)
    assert_verdict_holds(one, other, documents, jsonschema.Draft202012Validator)
    assert_verdict_holds(other, one, documents, jsonschema.Draft202012Validator)


def test_a_comparison_too_large_stops_reporting_incompatible():
    """Nested anyOf 10 levels deep (94 KB) visits 150,000 schema pairs (3 s; 12 levels:
    over a million, 37 s); the check stops after its budget instead of holding the
    registry."""
    def nested(leaf: Any) -> Any:
        for _ in range(10):
            leaf = {"anyOf": [leaf, obj({"a": leaf}), {"type": "null"}]}
        return leaf

    reader, writer = parse(nested(S)), parse(nested(I))
    started = time.monotonic()
    messages = FORMAT.incompatibilities(reader, writer)
    assert time.monotonic() - started < 10
    assert messages == ["Found incompatible change: the schemas are too complex to compare "
                        "(over 100000 schema pairs)"]


# Through the registry's core (a real Store over a list-backed log): what a client sees.
def registry() -> Core:
    store = Store()

    async def append(batch: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in batch:
            store.apply(key, value)

    return Core(store, append)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_json_subjects_evolve_through_the_registry_with_references():
    core = registry()
    address = json.dumps(ADDRESS)
    run(core.register("address", address, "JSON", []))
    ref = [Reference("address.json", "address", 1)]
    customer = obj({"name": S, "address": {"$ref": "address.json"}}, extra=False)
    first = run(core.register("customer", json.dumps(customer), "JSON", ref))
    # the same schema laid out otherwise is the same schema: same id, no new version
    relaid = json.dumps(customer, indent=2, sort_keys=True)
    assert run(core.register("customer", relaid, "JSON", ref)) == first
    assert run(core.versions("customer")) == [1]
    # BACKWARD (the default): an optional property added to a closed model is fine...
    grown = obj({"name": S, "address": {"$ref": "address.json"}, "vip": {"type": "boolean"}},
                extra=False)
    assert run(core.register("customer", json.dumps(grown), "JSON", ref)) == first + 1
    # ...a required one is not: 409 with Confluent's difference
    required = {**grown, "required": ["email"],
                "properties": {**grown["properties"], "email": S}}
    verdict = run(core.check("customer", "latest", json.dumps(required), "JSON", ref))
    assert not verdict.is_compatible
    assert verdict.messages[0] == (
        "Found incompatible change: Difference{jsonPath='#/required/email', "
        "type=REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL}")
    with pytest.raises(RegistryError) as refused:
        run(core.register("customer", json.dumps(required), "JSON", ref))
    assert (refused.value.status, refused.value.error_code) == (409, 409)
    assert "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" in refused.value.message


def test_an_invalid_json_schema_is_42201_through_the_registry():
    core = registry()
    with pytest.raises(RegistryError) as refused:
        run(core.register("s", json.dumps({"type": "strin"}), "JSON", []))
    assert (refused.value.status, refused.value.error_code) == (422, 42201)
    assert "#/type" in refused.value.message
    with pytest.raises(RegistryError) as refused:
        run(core.register("s", json.dumps(obj({"a": {"$ref": "nope.json"}})), "JSON", []))
    assert (refused.value.status, refused.value.error_code) == (422, 42201)


# Whatever parses compares without an exception: keywords with values of any shape, in
# every draft (a keyword a draft does not know may hold anything, schemas included).
ANY_KEYWORD = st.sampled_from([
    "type", "enum", "const", "not", "allOf", "anyOf", "oneOf", "maxLength", "pattern",
    "maximum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "properties",
    "patternProperties", "additionalProperties", "unevaluatedProperties", "required",
    "minProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "propertyNames", "items", "prefixItems", "additionalItems", "maxItems", "uniqueItems",
    "$ref", "$defs", "definitions", "contains", "if", "then", "$id", "$schema", "x-custom"])
ANY_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 12),
                       st.sampled_from([0.5, 1e-30, 1e30, 2.5, 3.0, "string", "integer",
                                        "object", "null", "a", "^a", "#",
                                        "#/definitions/a", "#/$defs/a", "x.json"]))
ANY_SCHEMA = st.recursive(
    st.one_of(st.booleans(), st.just({}), st.builds(lambda k, v: {k: v}, ANY_KEYWORD,
                                                    ANY_SCALAR)),
    lambda c: st.one_of(st.booleans(), st.dictionaries(ANY_KEYWORD, st.one_of(
        ANY_SCALAR, c, st.lists(st.one_of(ANY_SCALAR, c), max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "^a"]), st.one_of(
            c, st.lists(st.sampled_from(["a", "b"]), max_size=2)), max_size=2)), max_size=5)),
    max_leaves=10)
DRAFTS = st.sampled_from([None, "http://json-schema.org/draft-04/schema#",
                          "http://json-schema.org/draft-06/schema#", D7,
                          "https://json-schema.org/draft/2019-09/schema", D2020])


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(ANY_SCHEMA, ANY_SCHEMA, DRAFTS)
def test_whatever_parses_compares_without_an_exception(one, other, draft):
    parsed = []
    for schema in (one, other):
        if isinstance(schema, dict) and draft and "$schema" not in schema:
            schema = {"$schema": draft, **schema}
        try:
            parsed.append(parse(schema, {"x.json": S}))
        except InvalidSchema:
            return
    for reader, writer in (parsed, parsed[::-1]):
        assert isinstance(FORMAT.incompatibilities(reader, writer), list)
    assert FORMAT.canonical(parsed[0])
