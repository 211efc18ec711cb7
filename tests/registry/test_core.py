"""Core's Confluent semantics over a real Store, written through a list-backed log.

The log applies each record to the store as the backend's Kafka log does once the
record is read back; every test also replays the log into a fresh store and checks
that it answers the same (the state is the records, nothing else).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from spool.registry import compatibility
from spool.registry.core import Core
from spool.registry.formats import avro
from spool.registry.model import InvalidSchema, Reference, RegistryError
from spool.registry.store import Record, Store


class FieldsFormat:
    """A test-only format for ``compatibility``'s unit test: a JSON object of fields,
    each ``{"type": ..., "default"?: ...}``; a reader reads a writer's data when each of
    its fields is in the writer with the same type or has a default (Avro's record rules
    in miniature)."""

    name = "FIELDS"

    def parse(self, schema: str, references: Mapping[str, str]) -> dict[str, Any]:
        return json.loads(schema)

    def canonical(self, parsed: dict[str, Any]) -> str:
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"))

    def incompatibilities(self, reader: dict[str, Any], writer: dict[str, Any]) -> list[str]:
        found = []
        for name, f in reader.items():
            if name not in writer and "default" not in f:
                found.append(f"reader field {name} has no default")
            elif name in writer and writer[name]["type"] != f["type"]:
                found.append(f"field {name} changed type")
        return found


class AnyJson:
    """A second schema type for the tests that mix types (JSON Schema's own format is
    another helper's): any JSON text, compatible only with itself."""

    name = "JSON"

    def parse(self, schema: str, references: Mapping[str, str]) -> Any:
        try:
            return json.loads(schema)
        except ValueError as e:
            raise InvalidSchema(f"not JSON: {e}") from e

    def canonical(self, parsed: Any) -> str:
        return json.dumps(parsed, sort_keys=True, separators=(",", ":"))

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]:
        return [] if reader == writer else ["not the same JSON"]


FORMATS = {"AVRO": avro.FORMAT, "JSON": AnyJson()}


class Log:
    """The list-backed append: records kept in order, each applied to the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records: list[Record] = []

    async def __call__(self, batch: list[Record]) -> None:
        for key, value in batch:
            self.records.append((key, value))
            self.store.apply(key, value)


def s(_name: str = "R", **fields: str) -> str:
    """An Avro record of fields; ``name="int"``, or ``name="int="`` for one whose default
    is 0; a type may be a named type defined by a reference."""
    return json.dumps({"type": "record", "name": _name, "fields": [
        {"name": name, "type": spec.rstrip("=")} | ({"default": 0} if spec.endswith("=") else {})
        for name, spec in fields.items()]})


def no_default(field: str) -> str:
    return f"the reader's field '{field}' has no default"


@pytest.fixture
def reg():
    store = Store()
    log = Log(store)
    core = Core(store, log, FORMATS)
    yield core, log
    # The records are the state: a fresh store replaying them answers the same.
    replayed = Store()
    for key, value in log.records:
        replayed.apply(key, value)
    assert replayed.subjects(deleted=True) == store.subjects(deleted=True)
    for subject in store.subjects(deleted=True):
        assert replayed.versions(subject, deleted=True) == store.versions(subject, deleted=True)
        assert (replayed.config(subject), replayed.mode(subject)) == (
            store.config(subject), store.mode(subject))
    assert (replayed.config(None), replayed.mode(None), replayed.max_id) == (
        store.config(None), store.mode(None), store.max_id)


def run(coro):
    return asyncio.run(coro)


def error(coro) -> tuple[int, int]:
    with pytest.raises(RegistryError) as e:
        run(coro)
    return e.value.status, e.value.error_code


def register(core: Core, subject: str, schema: str, schema_type: str = "AVRO",
             refs: tuple[Reference, ...] = (), **kw) -> int:
    return run(core.register(subject, schema, schema_type, list(refs), **kw))


# -- ids and versions ------------------------------------------------------------------

def test_ids_are_global_and_dedupe_writes_nothing(reg):
    core, log = reg
    a = register(core, "a", s(x="int"))
    assert a == 1
    # The same schema, spelled differently, under the same subject: its id, no record.
    written = len(log.records)
    respelled = {"fields": [{"type": "int", "name": "x"}], "name": "R", "type": "record"}
    assert register(core, "a", json.dumps(respelled, indent=2)) == 1
    assert len(log.records) == written
    # Under another subject: the same id, a new version there.
    assert register(core, "b", s(x="int")) == 1
    assert run(core.subject_versions_of_id(1)) == [("a", 1), ("b", 1)]
    # Another schema: max id + 1; the same text under another type: another id.
    assert register(core, "a", s(x="int", y="int=")) == 2
    assert register(core, "c", s(x="int"), "JSON") == 3
    assert run(core.versions("a")) == [1, 2]
    assert run(core.subjects()) == ["a", "b", "c"]
    assert run(core.subjects(prefix="b")) == ["b"]
    v = run(core.version("a", "latest"))
    assert (v.subject, v.version, v.id, v.schema) == ("a", 2, 2, s(x="int", y="int="))
    assert run(core.version("a", 1)).id == 1
    assert run(core.version("a", "1")).id == 1
    assert run(core.version("a", -1)).version == 2
    assert run(core.by_id(3)).schema_type == "JSON"


def test_a_new_default_or_logical_type_is_a_new_schema(reg):
    core, log = reg
    register(core, "a", s(x="int"))
    assert register(core, "a", s(x="int=")) == 2
    assert run(core.version("a", "latest")).schema == s(x="int=")
    assert register(core, "t", '{"type": "long", "logicalType": "timestamp-millis"}') == 3
    assert register(core, "u", '"long"') == 4


def test_the_registered_text_is_kept(reg):
    core, _ = reg
    text = '{ "type" : "record", "name": "R", "fields": [{"name": "x", "type": "int"}] }'
    register(core, "a", text)
    assert run(core.by_id(1)).schema == text
    assert run(core.version("a", 1)).schema == text


@pytest.mark.parametrize("version", [0, -2, 2**31, "two", "", "1.5", True])
def test_invalid_versions(reg, version):
    core, _ = reg
    register(core, "a", s(x="int"))
    assert error(core.version("a", version)) == (422, 42202)


def test_not_found(reg):
    core, _ = reg
    assert error(core.versions("nope")) == (404, 40401)
    assert error(core.version("nope", 1)) == (404, 40401)
    register(core, "a", s(x="int"))
    assert error(core.version("a", 2)) == (404, 40402)
    assert error(core.by_id(2)) == (404, 40403)
    assert error(core.subject_versions_of_id(2)) == (404, 40403)
    assert error(core.referenced_by("nope", 1)) == (404, 40401)


def test_invalid_schema_and_type(reg):
    core, log = reg
    assert error(core.register("a", "not json", "AVRO", [])) == (422, 42201)
    assert error(core.register("a", '{"x": {}}', "AVRO", [])) == (422, 42201)
    assert error(core.register("a", s(x="int"), "XML", [])) == (422, 42201)
    assert error(core.lookup("a", "nope", "AVRO", [])) == (422, 42201)
    assert error(core.check("a", None, "nope", "AVRO", [])) == (422, 42201)
    assert log.records == []


def test_lookup(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    register(core, "a", s(x="int", y="int="))
    respelled = {"name": "R", "type": "record", "fields": [{"type": "int", "name": "x"}]}
    found = run(core.lookup("a", json.dumps(respelled), "AVRO", []))
    assert (found.version, found.id, found.schema) == (1, 1, s(x="int"))
    assert error(core.lookup("a", s(z="int"), "AVRO", [])) == (404, 40403)
    assert error(core.lookup("a", s(x="int"), "JSON", [])) == (404, 40403)
    assert error(core.lookup("b", s(x="int"), "AVRO", [])) == (404, 40401)
    run(core.delete_version("a", 1))
    assert error(core.lookup("a", s(x="int"), "AVRO", [])) == (404, 40403)
    assert run(core.lookup("a", s(x="int"), "AVRO", [], deleted=True)).deleted


# -- compatibility ---------------------------------------------------------------------

def test_backward_is_the_default_and_refuses_with_409(reg):
    core, log = reg
    register(core, "a", s(x="int"))
    assert run(core.get_config(None)) == "BACKWARD"
    # A new field without a default cannot read old data.
    with pytest.raises(RegistryError) as e:
        run(core.register("a", s(x="int", y="int"), "AVRO", []))
    assert (e.value.status, e.value.error_code) == (409, 409)
    assert no_default("y") in e.value.message
    assert "{oldSchemaVersion: 1}" in e.value.message
    assert "{compatibility: 'BACKWARD'}" in e.value.message
    written = len(log.records)
    # With a default it can; removing a field is backward compatible.
    assert register(core, "a", s(x="int", y="int=")) == 2
    assert register(core, "a", s(y="int=")) == 3
    assert len(log.records) == written + 2


def test_levels_subject_over_global(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    run(core.set_config(None, "FORWARD"))
    # FORWARD: old readers read new data: adding a field without default is fine,
    assert register(core, "a", s(x="int", y="int")) == 2
    # removing x (no default in the old reader) is not.
    assert error(core.register("a", s(y="int"), "AVRO", [])) == (409, 409)
    # The subject's level wins over the global one.
    assert run(core.set_config("a", "none")) == "NONE"
    assert register(core, "a", s(y="string")) == 3
    assert run(core.get_config("a")) == "NONE"
    assert error(core.get_config("b")) == (404, 40408)
    assert run(core.get_config("b", default_to_global=True)) == "FORWARD"
    assert run(core.delete_config("a")) == "NONE"
    assert error(core.get_config("a")) == (404, 40408)
    assert run(core.delete_config(None)) == "FORWARD"
    assert run(core.get_config(None)) == "BACKWARD"
    assert error(core.delete_config("nope")) == (404, 40401)
    assert error(core.set_config("a", "SIDEWAYS")) == (422, 42203)


def test_transitive_checks_every_live_version(reg):
    core, _ = reg
    run(core.set_config("a", "NONE"))
    register(core, "a", s(x="int"))
    register(core, "a", s(x="int", y="int="))
    register(core, "a", s(y="int="))
    # v1 {x}, v2 {x, y=}, v3 {y=}: BACKWARD checks against v3 only, the transitive
    # level against all three.
    new = s(x="int", y="int=")
    run(core.set_config("a", "BACKWARD"))
    assert not run(core.check("a", None, new, "AVRO", [])).is_compatible  # vs v3: no x
    transitive_new = s(y="int=", z="int=")
    run(core.set_config("a", "BACKWARD_TRANSITIVE"))
    assert run(core.check("a", None, transitive_new, "AVRO", [])).is_compatible
    assert not run(core.check("a", None, s(y="int"), "AVRO", [])).is_compatible  # v1
    run(core.set_config("a", "BACKWARD"))
    assert run(core.check("a", None, s(y="int"), "AVRO", [])).is_compatible  # v3 only
    # Soft-deleted versions are not checked.
    run(core.delete_version("a", 1))
    run(core.set_config("a", "BACKWARD_TRANSITIVE"))
    assert run(core.check("a", None, s(y="int"), "AVRO", [])).is_compatible


def test_check_against_one_version(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    run(core.set_config("a", "NONE"))
    register(core, "a", s(y="int"))
    run(core.delete_config("a"))
    result = run(core.check("a", 1, s(x="int", z="int="), "AVRO", []))
    assert result.is_compatible and result.messages == []
    result = run(core.check("a", "latest", s(x="int", z="int="), "AVRO", []))
    assert not result.is_compatible
    assert any(no_default("x") in m for m in result.messages)
    assert error(core.check("a", 3, s(x="int"), "AVRO", [])) == (404, 40402)
    assert error(core.check("a", "x", s(x="int"), "AVRO", [])) == (422, 42202)
    assert error(core.check("b", 1, s(x="int"), "AVRO", [])) == (404, 40401)
    # Without a version, a subject with nothing registered is compatible with anything.
    assert run(core.check("b", None, s(x="int"), "AVRO", [])).is_compatible


def test_another_schema_type_is_incompatible_but_under_none(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    with pytest.raises(RegistryError) as e:
        run(core.register("a", s(x="int"), "JSON", []))
    assert e.value.status == 409 and "different schema type" in e.value.message
    run(core.set_config("a", "NONE"))
    assert register(core, "a", s(x="int"), "JSON") == 2


def test_compatibility_levels_over_a_format():
    fmt = FieldsFormat()
    v1, v2, v3 = {"x": {"type": "int"}}, {"x": {"type": "int"}, "y": {"type": "int"}}, {
        "y": {"type": "int"}}
    assert compatibility.check("NONE", v3, [v1], fmt) == []
    assert compatibility.check("BACKWARD", v2, [v1], fmt) == ["reader field y has no default"]
    assert compatibility.check("FORWARD", v2, [v1], fmt) == []
    assert compatibility.check("FULL", v2, [v1], fmt) == ["reader field y has no default"]
    v4 = {"y": {"type": "int"}, "z": {"type": "int"}}
    assert compatibility.check("FORWARD", v4, [v1, v3], fmt) == []
    assert compatibility.check("FORWARD_TRANSITIVE", v4, [v1, v3], fmt) == [
        "reader field x has no default (against previous version 1 of 2)"]
    assert compatibility.check("FULL_TRANSITIVE", v1, [], fmt) == []
    with pytest.raises(ValueError):
        compatibility.check("SIDEWAYS", v1, [v1], fmt)


# -- deletes ---------------------------------------------------------------------------

def test_soft_then_permanent_delete_of_versions(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    register(core, "a", s(x="int", y="int="))
    assert error(core.delete_version("a", 1, permanent=True)) == (404, 40407)
    assert run(core.delete_version("a", 1)) == 1
    assert error(core.delete_version("a", 1)) == (404, 40406)
    assert run(core.versions("a")) == [2]
    assert run(core.versions("a", deleted=True)) == [1, 2]
    assert error(core.version("a", 1)) == (404, 40402)
    assert run(core.version("a", 1, deleted=True)).deleted
    # A soft-deleted version's id still answers.
    assert run(core.by_id(1)).schema == s(x="int")
    assert run(core.subject_versions_of_id(1)) == []
    assert run(core.subject_versions_of_id(1, deleted=True)) == [("a", 1)]
    assert run(core.delete_version("a", 1, permanent=True)) == 1
    assert error(core.version("a", 1, deleted=True)) == (404, 40402)
    assert error(core.by_id(1)) == (404, 40403)
    assert error(core.delete_version("a", 7)) == (404, 40402)
    assert error(core.delete_version("nope", 1)) == (404, 40401)
    assert error(core.delete_version("a", "x")) == (422, 42202)
    # latest: the highest live version.
    assert run(core.delete_version("a", "latest")) == 2
    assert run(core.subjects()) == [] and run(core.subjects(deleted=True)) == ["a"]


def test_versions_continue_after_a_soft_delete_and_restart_after_a_permanent_one(reg):
    core, _ = reg
    register(core, "a", s(x="int"))
    register(core, "a", s(x="int", y="int="))
    assert run(core.delete_subject("a")) == [1, 2]
    # Registering a soft-deleted schema again: the same id, a new version.
    assert register(core, "a", s(x="int")) == 1
    assert run(core.versions("a")) == [3]
    run(core.delete_subject("a"))
    assert run(core.delete_subject("a", permanent=True)) == [1, 2, 3]
    assert error(core.versions("a", deleted=True)) == (404, 40401)
    assert register(core, "a", s(z="int")) == 3  # ids are not reused
    assert run(core.versions("a")) == [1]


def test_delete_subject_errors_and_its_config_and_mode_go_with_the_permanent_delete(reg):
    core, _ = reg
    assert error(core.delete_subject("a")) == (404, 40401)
    register(core, "a", s(x="int"))
    run(core.set_config("a", "FULL"))
    run(core.set_mode("a", "READWRITE"))
    assert error(core.delete_subject("a", permanent=True)) == (404, 40405)
    assert run(core.delete_subject("a")) == [1]
    assert error(core.delete_subject("a")) == (404, 40404)
    assert run(core.get_config("a")) == "FULL"
    assert run(core.get_mode("a")) == "READWRITE"
    assert run(core.delete_subject("a", permanent=True)) == [1]
    assert error(core.get_config("a")) == (404, 40408)
    assert error(core.get_mode("a")) == (404, 40409)


# -- references ------------------------------------------------------------------------

def test_references_resolve_transitively_and_block_deletes(reg):
    core, _ = reg
    register(core, "base", s("Base", n="int"))
    mid_ref = Reference("Base", "base", 1)
    register(core, "mid", s("Mid", b="Base"), refs=(mid_ref,))
    top_ref = Reference("Mid", "mid", 1)
    # top names Base too: its text arrives through mid's reference, transitively.
    top = register(core, "top", s("Top", m="Mid", b="Base"), refs=(top_ref,))
    assert top == 3
    assert run(core.by_id(3)).references == (top_ref,)
    assert run(core.referenced_by("base", 1)) == [2]
    assert run(core.referenced_by("mid", "latest")) == [3]
    assert run(core.referenced_by("top", 1)) == []
    assert error(core.delete_version("base", 1)) == (422, 42206)
    assert error(core.delete_subject("mid")) == (422, 42206)
    # The same text with other references is another schema.
    assert error(core.lookup("top", s("Top", m="Mid", b="Base"), "AVRO", [])) == (422, 42201)
    assert run(core.lookup("top", s("Top", m="Mid", b="Base"), "AVRO", [top_ref])).id == 3
    # Once the referrer is deleted, the referenced may go.
    run(core.delete_subject("top"))
    assert run(core.referenced_by("mid", 1)) == []
    assert run(core.delete_subject("mid")) == [1]


def test_a_missing_reference_is_an_invalid_schema(reg):
    core, log = reg
    ref = Reference("Base", "base", 1)
    assert error(core.register("a", s(b="Base"), "AVRO", [ref])) == (422, 42201)
    register(core, "base", s("Base", n="int"))
    assert error(core.register("a", s(b="Base"), "AVRO", [Reference("Base", "base", 2)])) == (
        422, 42201)
    # A reference to latest is pinned to the version it names at registration.
    register(core, "a", s(b="Base"), refs=(Reference("Base", "base", -1),))
    assert run(core.version("a", 1)).references == (ref,)


# -- modes -----------------------------------------------------------------------------

def test_readonly_refuses_writes(reg):
    core, log = reg
    register(core, "a", s(x="int"))
    assert run(core.set_mode(None, "readonly")) == "READONLY"
    written = len(log.records)
    assert error(core.register("a", s(y="int="), "AVRO", [])) == (422, 42205)
    assert error(core.register("a", s(x="int"), "AVRO", [])) == (422, 42205)
    assert error(core.delete_version("a", 1)) == (422, 42205)
    assert error(core.delete_subject("a")) == (422, 42205)
    assert len(log.records) == written
    # The subject's mode wins over the global one.
    run(core.set_mode("a", "READWRITE"))
    assert register(core, "a", s(x="int", y="int=")) == 2
    assert error(core.register("b", s(x="int"), "AVRO", [])) == (422, 42205)
    assert run(core.get_mode("a")) == "READWRITE"
    assert run(core.get_mode(None)) == "READONLY"
    assert error(core.get_mode("b")) == (404, 40409)
    assert run(core.get_mode("b", default_to_global=True)) == "READONLY"
    assert run(core.delete_mode(None)) == "READONLY"
    assert run(core.get_mode(None)) == "READWRITE"
    assert run(core.delete_mode("a")) == "READWRITE"
    assert error(core.delete_mode("nope")) == (404, 40401)
    assert error(core.set_mode(None, "WRITEONLY")) == (422, 42204)


def test_import_mode(reg):
    core, log = reg
    register(core, "a", s(x="int"))
    assert error(core.register("b", s(x="int"), "AVRO", [], schema_id=9)) == (422, 42205)
    # -1 and 0 are how some clients say "no id" / "no version".
    assert register(core, "a", s(x="int"), schema_id=-1, version=0) == 1
    assert register(core, "a", s(x="int", y="int="), version=2) == 2
    assert error(core.register("a", s(x="int"), "AVRO", [], version=7)) == (422, 42201)
    assert error(core.set_mode(None, "IMPORT")) == (422, 42205)
    assert error(core.set_mode("a", "IMPORT")) == (422, 42205)
    assert run(core.set_mode("b", "IMPORT")) == "IMPORT"
    # Explicit ids and versions; no compatibility check.
    assert register(core, "b", s(y="int"), schema_id=10, version=5) == 10
    assert register(core, "b", s(z="int"), schema_id=7, version=2) == 7
    assert register(core, "b", s(w="int")) == 11  # no id given: max id + 1
    assert run(core.versions("b")) == [2, 5, 6]
    # An id already used by another schema, a version already there: refused.
    assert error(core.register("b", s(q="int"), "AVRO", [], schema_id=10)) == (422, 42205)
    assert error(core.register("b", s(q="int"), "AVRO", [], schema_id=20, version=5)) == (
        422, 42205)
    # The id of the same schema elsewhere is accepted, as is a schema already there.
    assert register(core, "b", s(x="int"), schema_id=1, version=8) == 1
    assert register(core, "b", s(y="int"), schema_id=10) == 10
    assert run(core.set_mode("a", "IMPORT", force=True)) == "IMPORT"
    # Soft-deleted schemas count: the subject is not empty.
    run(core.delete_subject("b"))
    run(core.delete_mode("b"))
    assert error(core.set_mode("b", "IMPORT")) == (422, 42205)
    assert register(core, "c", s(x="int")) == 1  # READWRITE globally: no id chosen


def test_concurrent_registrations_get_distinct_ids():
    store = Store()
    written: list[Record] = []

    async def slow_append(batch: list[Record]) -> None:
        await asyncio.sleep(0)  # the log answers later, as Kafka's does
        for key, value in batch:
            written.append((key, value))
            store.apply(key, value)

    core = Core(store, slow_append, FORMATS)

    async def many() -> list[int]:
        return await asyncio.gather(*(
            core.register(f"s{i}", s(**{f"f{i}": "int"}), "AVRO", []) for i in range(20)))

    ids = run(many())
    assert sorted(ids) == list(range(1, 21))
    assert len(written) == 20


def test_protobuf_imports_through_references():
    from spool.registry.formats import protobuf

    store = Store()
    core = Core(store, Log(store), {"AVRO": avro.FORMAT, "PROTOBUF": protobuf.FORMAT})
    base = 'syntax = "proto3";\npackage a;\nmessage Base { int32 n = 1; }\n'
    top = ('syntax = "proto3";\npackage b;\nimport "a/base.proto";\n'
           "message Top { a.Base b = 1; }\n")
    ref = Reference("a/base.proto", "base", 1)
    assert register(core, "base", base, "PROTOBUF") == 1
    assert error(core.register("top", top, "PROTOBUF", [])) == (422, 42201)
    assert register(core, "top", top, "PROTOBUF", (ref,)) == 2
    assert register(core, "top", top, "PROTOBUF", (ref,)) == 2  # the same: deduped
    assert register(core, "top", top.replace("b = 1;", "b = 1; string s = 2;"),
                    "PROTOBUF", (ref,)) == 3
    assert run(core.referenced_by("base", 1)) == [2, 3]
    assert run(core.version("top", 1)).schema_type == "PROTOBUF"
    assert error(core.delete_version("base", 1)) == (422, 42206)
