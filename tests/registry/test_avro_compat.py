"""Avro as a registry format: validity, Parsing Canonical Form, and the spec's resolution rules.

The compatibility table states, for each pair, whether data written with ``writer`` can
be read with ``reader`` and, the other way round, whether data written with ``reader``
can be read with ``writer``, with the rule of the Avro spec ("Schema Resolution") that
decides it. The ``avro`` package (Apache's Python implementation, a dev dependency) is
an oracle for the canonical forms and for the table, except where it departs from the
spec; those places are listed and checked to depart as described.
"""

from __future__ import annotations

import json
from typing import Any

import avro.compatibility
import avro.schema
import pytest

from spool.registry.formats.avro import FORMAT, fingerprint64
from spool.registry.model import InvalidSchema


def parse(schema: Any, references: dict[str, str] | None = None):
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return FORMAT.parse(text, references or {})


def problems(reader: Any, writer: Any, references: dict[str, str] | None = None) -> list[str]:
    return FORMAT.incompatibilities(parse(reader, references), parse(writer, references))


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def record(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def enum(*symbols: str, name: str = "E", **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(size: int, name: str = "F", **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **extra}


def array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def map_(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


def decimal(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def linked(value: str, *more: dict[str, Any]) -> dict[str, Any]:
    return record(field("value", value), field("next", ["null", "L"]), *more, name="L")


def test_format_is_avro():
    assert FORMAT.name == "AVRO"


# --- Parsing Canonical Form ------------------------------------------------------------

SPEC_NAMES_EXAMPLE = {  # the spec's example under "Names", with its docs
    "type": "record", "name": "Example", "doc": "null namespace",
    "fields": [
        {"name": "inheritNull", "type": {"type": "enum", "name": "Simple", "doc": "d",
                                         "symbols": ["a", "b"]}},
        {"name": "explicitNamespace", "type": {"type": "fixed", "name": "Simple",
                                               "namespace": "explicit", "size": 12}},
        {"name": "fullName", "type": {
            "type": "record", "name": "a.full.Name", "namespace": "ignored",
            "fields": [{"name": "inheritNamespace", "type": {
                "type": "enum", "name": "Understanding", "symbols": ["d", "e"]}}]}},
    ],
}

CANONICAL = [
    # [PRIMITIVES]
    ('"int"', '"int"'),
    ('{"type": "int"}', '"int"'),
    ('{"type": "long", "logicalType": "timestamp-millis"}', '"long"'),
    ('[ "null", {"type": "string"} ]', '["null","string"]'),
    # [FULLNAMES], [STRIP], [ORDER], [WHITESPACE]
    ('{"size": 16, "type": "fixed", "namespace": "x", "name": "md5", "aliases": ["m"]}',
     '{"name":"x.md5","type":"fixed","size":16}'),
    ('{"type": "enum", "name": "Suit", "namespace": "cards", "doc": "d", "default": "A",'
     ' "symbols": ["A", "B"]}',
     '{"name":"cards.Suit","type":"enum","symbols":["A","B"]}'),
    ('{"type": "array", "items": {"type": "map", "values": "string", "doc": "x"}, "default": []}',
     '{"type":"array","items":{"type":"map","values":"string"}}'),
    (json.dumps(record(field("a", "int", default=1, doc="d", order="descending",
                             aliases=["b"]), name="R", namespace="n", doc="d")),
     '{"name":"n.R","type":"record","fields":[{"name":"a","type":"int"}]}'),
    (json.dumps(SPEC_NAMES_EXAMPLE),
     '{"name":"Example","type":"record","fields":['
     '{"name":"inheritNull","type":{"name":"Simple","type":"enum","symbols":["a","b"]}},'
     '{"name":"explicitNamespace","type":{"name":"explicit.Simple","type":"fixed","size":12}},'
     '{"name":"fullName","type":{"name":"a.full.Name","type":"record","fields":['
     '{"name":"inheritNamespace","type":{"name":"a.full.Understanding","type":"enum",'
     '"symbols":["d","e"]}}]}}]}'),
    # a name used again is written as its full name, as in the text
    (json.dumps(record(field("a", fixed(1)), field("b", "F"), namespace="n")),
     '{"name":"n.R","type":"record","fields":[{"name":"a","type":{"name":"n.F","type":"fixed",'
     '"size":1}},{"name":"b","type":"n.F"}]}'),
    # "" is the null namespace: no namespace inherited
    (json.dumps(record(field("e", enum("A", namespace="")), namespace="n")),
     '{"name":"n.R","type":"record","fields":[{"name":"e","type":{"name":"E","type":"enum",'
     '"symbols":["A"]}}]}'),
    # [STRINGS]: escapes replaced by the characters
    ('{"type": "record", "name": "R\\u0031", "fields": [{"name": "\\u00e9t\\u00e9", '
     '"type": "int"}]}'.replace("\\u00e9t\\u00e9", "ete"),
     '{"name":"R1","type":"record","fields":[{"name":"ete","type":"int"}]}'),
    # recursion
    (json.dumps(linked("long")),
     '{"name":"L","type":"record","fields":[{"name":"value","type":"long"},'
     '{"name":"next","type":["null","L"]}]}'),
    ('{"type": "error", "name": "Oops", "fields": []}', '{"name":"Oops","type":"error","fields":[]}'),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_parsing_canonical_form(text, expected):
    assert FORMAT.canonical(parse(text)) == expected


def test_canonical_form_is_the_same_for_equivalent_texts():
    a = parse('{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"int"}]}')
    b = parse('{\n  "fields": [{"type": {"type": "int"}, "name": "a", "doc": "x"}],\n'
              '  "name": "n.R", "type": "record", "doc": "a record"\n}')
    c = parse('{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"long"}]}')
    assert FORMAT.canonical(a) == FORMAT.canonical(b) != FORMAT.canonical(c)


# The avro package writes {"type": "int"} for a logical type (the spec's [PRIMITIVES]
# says "int"), gives an enum with namespace "" its parent's namespace (the spec: the null
# namespace) and expands a named type each time it is used: not asked of it here.
ORACLE_CANONICAL = [text for text, _ in CANONICAL
                    if "logicalType" not in text and '"namespace": ""' not in text
                    and '"b", "type": "F"' not in text]


@pytest.mark.parametrize("text", ORACLE_CANONICAL)
def test_canonical_form_and_fingerprint_agree_with_the_avro_package(text):
    ours = parse(text)
    theirs = avro.schema.parse(text)
    assert FORMAT.canonical(ours) == theirs.canonical_form
    assert fingerprint64(ours).to_bytes(8, "little") == theirs.fingerprint("CRC-64-AVRO")


def test_fingerprint_of_int_is_the_specs():
    # Avro's own test data: the CRC-64-AVRO of "int" is 0x7275d51a3f395c8f (as a long)
    assert fingerprint64(parse('"int"')) == 0x7275D51A3F395C8F


# --- invalid schemas -------------------------------------------------------------------

INVALID = [
    ("{", r"^/: not JSON"),
    ("", r"^/: not JSON"),
    ("42", r"^/: a schema is a JSON string, object or array"),
    ('"Nope"', r"^/: unknown type 'Nope'"),
    ('{"type": "nope"}', r"^/: unknown type 'nope'"),
    ('{"type": {"type": "int"}}', r"^/: 'type' must be a string"),
    ('{"type": "record", "fields": []}', r"^/: a record needs a string 'name'"),
    ('{"type": "record", "name": "R"}', r"^/: a record needs a 'fields' array"),
    ('{"type": "record", "name": "1R", "fields": []}', r"^/: invalid name '1R'"),
    ('{"type": "record", "name": "a..R", "fields": []}', r"^/: invalid name 'a..R'"),
    ('{"type": "record", "name": "int", "fields": []}', r"primitive type's name"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a"}]}',
     r"^/fields/0: field 'a' needs a 'type'"),
    ('{"type": "record", "name": "R", "fields": [{"type": "int"}]}',
     r"^/fields/0: invalid field name None"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, '
     '{"name": "a", "type": "long"}]}', r"^/fields/1: field 'a' is defined twice"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Q"}]}',
     r"^/fields/0/type: unknown type 'Q'"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": '
     '{"type": "record", "name": "R", "fields": []}}]}', r"^/fields/0/type: 'R' is defined twice"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
     r"Default value <x> must match schema type: int"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', r"^/: enum symbols must be unique"),
    ('{"type": "enum", "name": "E", "symbols": ["1"]}', r"^/: invalid enum symbol '1'"),
    ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
     r"^/: the enum's default 'B' is not one of its symbols"),
    ('{"type": "enum", "name": "E"}', r"^/: an enum needs a 'symbols' array"),
    ('{"type": "fixed", "name": "F"}', r"^/: a fixed needs a non-negative integer 'size'"),
    ('{"type": "fixed", "name": "F", "size": -1}', r"non-negative integer 'size', got -1"),
    ('{"type": "fixed", "name": "F", "size": "16"}', r"non-negative integer 'size', got '16'"),
    ('{"type": "array"}', r"^/: an array needs 'items'"),
    ('{"type": "map", "values": "Q"}', r"^/values: unknown type 'Q'"),
    ('["int", "int"]', r"^/1: a union may not hold 'int' twice \(branches 0 and 1\)"),
    ('["null", ["int"]]', r"^/1: a union may not immediately contain another union"),
    ('[{"type": "array", "items": "int"}, {"type": "array", "items": "long"}]',
     r"^/1: a union may not hold 'array' twice"),
    ('[{"type": "fixed", "name": "F", "size": 1}, "F"]', r"^/1: a union may not hold 'F' twice"),
    ('{"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3}',
     r"decimal scale must be less than or equal to the precision"),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_schema(text, message):
    with pytest.raises(InvalidSchema, match=message):
        parse(text)


def test_a_union_may_hold_two_records_of_different_full_names():
    parse([record(name="a.X"), record(name="b.X")])


# --- references --------------------------------------------------------------------------

ADDRESS = json.dumps(record(field("street", "string"), field("country", "x.Country"),
                            name="Address", namespace="x"))
COUNTRY = json.dumps(fixed(2, name="x.Country"))
REFERENCES = {"x.Address": ADDRESS, "x.Country": COUNTRY}


def test_references_resolve_by_full_name_and_stay_names_in_the_canonical_form():
    parsed = parse(record(field("home", "x.Address"), field("work", ["null", "x.Address"])),
                   REFERENCES)
    assert FORMAT.canonical(parsed) == (
        '{"name":"R","type":"record","fields":[{"name":"home","type":"x.Address"},'
        '{"name":"work","type":["null","x.Address"]}]}')
    assert set(parsed.named) == {"R", "x.Address", "x.Country"}


def test_a_reference_resolves_by_the_enclosing_namespace():
    parse(record(field("home", "Address"), namespace="x"), REFERENCES)


def test_a_missing_reference_is_an_unknown_type():
    with pytest.raises(InvalidSchema, match=r"^/fields/0/type: unknown type 'x.Address'"):
        parse(record(field("home", "x.Address")), {"x.Country": COUNTRY})


def test_a_fault_in_a_referenced_schema_names_the_reference():
    with pytest.raises(InvalidSchema,
                       match=r"^reference 'x.Address': /fields/1/type: unknown type 'x.Country'"):
        parse(record(field("home", "x.Address")), {"x.Address": ADDRESS})


def test_a_type_defined_both_in_the_text_and_by_a_reference_is_refused():
    with pytest.raises(InvalidSchema, match=r"'x.Country' is defined twice"):
        parse(record(field("c", "x.Country"), field("d", fixed(2, name="x.Country"))),
              REFERENCES)


def test_compatibility_across_references():
    # the reader has the type through a reference, the writer inline: same type
    inline = json.loads(ADDRESS)
    inline["fields"][1]["type"] = json.loads(COUNTRY)
    reader = parse(record(field("home", "x.Address")), REFERENCES)
    writer = parse(record(field("home", inline)))
    assert FORMAT.incompatibilities(reader, writer) == []
    narrower = dict(inline, fields=[field("street", "string"), field("zip", "string"),
                                    field("country", json.loads(COUNTRY))])
    assert FORMAT.incompatibilities(parse(record(field("home", narrower))), reader) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/0/type/fields/1: the reader's field "
        "'zip' has no default and the writer's record 'x.Address' has no such field"]
