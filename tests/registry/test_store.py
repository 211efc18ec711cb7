"""The store applies Confluent's ``_schemas`` records, and skips what it cannot read."""

from __future__ import annotations

import json
import logging

import pytest

from spool.registry import store as st
from spool.registry.model import Reference, SchemaVersion
from spool.registry.store import Store


def sv(subject: str, version: int, schema_id: int, schema: str = '"string"', **kw) -> SchemaVersion:
    return SchemaVersion(subject, version, schema_id, schema, **kw)


def applied(*records: st.Record) -> Store:
    s = Store()
    for key, value in records:
        s.apply(key, value)
    return s


def test_keys_are_confluents_bytes():
    # Confluent (Jackson) writes keys compact, in this field order: a tombstone must
    # carry the very same bytes to compact the record it deletes.
    assert st.schema_key("t-value", 3) == (
        b'{"keytype":"SCHEMA","subject":"t-value","version":3,"magic":1}')
    assert st.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert st.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert st.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    assert st.noop_key() == b'{"keytype":"NOOP","magic":0}'


def test_schema_value_matches_confluents():
    key, value = st.schema_record(sv("s", 1, 7, '{"type":"int"}'))
    assert json.loads(value) == {"subject": "s", "version": 1, "id": 7,
                                 "schema": '{"type":"int"}', "deleted": False}
    ref = Reference("a.proto", "a", 2)
    _, value = st.schema_record(sv("s", 2, 8, "x", schema_type="PROTOBUF", references=(ref,)))
    assert json.loads(value) == {
        "subject": "s", "version": 2, "id": 8, "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 2}],
        "schema": "x", "deleted": False}


def test_a_confluent_written_topic_replays():
    # Records as Confluent's registry writes them (schemaType absent for Avro).
    s = applied(
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
        (b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}',
         b'{"subject":"t-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'),
        (b'{"keytype":"SCHEMA","subject":"t-value","version":2,"magic":1}',
         b'{"subject":"t-value","version":2,"id":3,"schemaType":"JSON",'
         b'"schema":"{}","deleted":false}'),
        (b'{"keytype":"NOOP","magic":0}', None),
    )
    assert s.subjects() == ["t-value"]
    assert [v.version for v in s.versions("t-value")] == [1, 2]
    assert s.get("t-value", 2) == sv("t-value", 2, 3, "{}", schema_type="JSON")
    assert s.config(None) == "FULL" and s.config("t-value") is None
    assert s.max_id == 3
    assert s.applied == 4


def test_soft_then_permanent_delete_of_a_version():
    one, two = sv("s", 1, 1), sv("s", 2, 2, '"int"')
    s = applied(st.schema_record(one), st.schema_record(two),
                st.schema_record(SchemaVersion("s", 1, 1, '"string"', deleted=True)))
    assert [v.version for v in s.versions("s")] == [2]
    assert [v.version for v in s.versions("s", deleted=True)] == [1, 2]
    assert s.users_of_id(1)[0].deleted
    s.apply(*st.schema_tombstone("s", 1))
    assert s.get("s", 1) is None and s.users_of_id(1) == []
    assert s.ids() == [2]
    assert s.max_id == 2  # never goes back: ids are not reused


def test_delete_subject_flags_versions_up_to_its_version():
    s = applied(st.schema_record(sv("s", 1, 1)), st.schema_record(sv("s", 2, 2)),
                st.delete_subject_record("s", 1), st.schema_record(sv("s", 3, 3)))
    assert [v.version for v in s.versions("s")] == [2, 3]
    s.apply(*st.delete_subject_record("s", 3))
    assert s.subjects() == [] and s.subjects(deleted=True) == ["s"]
    for v in (1, 2, 3):
        s.apply(*st.schema_tombstone("s", v))
    assert s.subjects(deleted=True) == []


def test_same_id_under_two_subjects():
    s = applied(st.schema_record(sv("a", 1, 5)), st.schema_record(sv("b", 4, 5)))
    assert [(u.subject, u.version) for u in s.users_of_id(5)] == [("a", 1), ("b", 4)]
    s.apply(*st.schema_tombstone("a", 1))
    assert [(u.subject, u.version) for u in s.users_of_id(5)] == [("b", 4)]


def test_referrers_follow_the_referring_versions():
    ref = Reference("com.x.A", "a", 1)
    s = applied(st.schema_record(sv("a", 1, 1)),
                st.schema_record(sv("b", 1, 2, references=(ref,))),
                st.schema_record(sv("c", 1, 3, references=(ref,))))
    assert [r.subject for r in s.referrers("a", 1)] == ["b", "c"]
    s.apply(*st.schema_tombstone("b", 1))
    assert [r.subject for r in s.referrers("a", 1)] == ["c"]
    # Re-setting a version (a soft delete) replaces its references rather than doubling them.
    s.apply(*st.schema_record(sv("c", 1, 3, references=(ref,), deleted=True)))
    assert [r.deleted for r in s.referrers("a", 1)] == [True]


def test_config_and_mode_set_and_removed():
    s = applied(st.config_record("s", "NONE"), st.mode_record(None, "READONLY"),
                st.mode_record("s", "IMPORT"))
    assert (s.config("s"), s.config(None), s.mode(None), s.mode("s")) == (
        "NONE", None, "READONLY", "IMPORT")
    s.apply(*st.config_record("s", None))
    s.apply(*st.mode_record(None, None))
    assert (s.config("s"), s.mode(None), s.mode("s")) == (None, None, "IMPORT")


@pytest.mark.parametrize("key,value", [
    (b"not json", b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"not json"),
    (b'["a list"]', None),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":"1","id":1,"schema":"x"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":true,"schema":"x"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":1,"schema":"x","schemaType":"XML"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":1,"schema":"x","references":[1]}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":1,"schema":"x","references":[{"name":"n"}]}'),
    (b'{"keytype":"SCHEMA","subject":7,"version":1,"magic":1}', None),
    (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"SIDEWAYS"}'),
    (b'{"keytype":"MODE","subject":[],"magic":0}', b'{"mode":"READONLY"}'),
    (b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"WRITEONLY"}'),
    (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"version":1}'),
    (b'{"keytype":"CONFIG","subject":null,"magic":0}', b"[]"),
    (b"\xff\xfe", None),
])
def test_bad_records_are_skipped_and_the_rest_still_applies(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger="spool.registry.store"):
        s = applied((key, value), st.schema_record(sv("s", 1, 1)),
                    st.config_record(None, "FULL"))
    assert "skipping" in caplog.text
    assert s.versions("s") == [sv("s", 1, 1)] and s.config(None) == "FULL"


def test_unknown_keytypes_are_ignored():
    s = applied((b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}', b'{"subject":"s"}'),
                (b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}"))
    assert s.subjects(deleted=True) == [] and s.applied == 2


def test_tombstone_of_an_absent_version_is_harmless():
    s = applied(st.schema_tombstone("nope", 1), st.config_record("nope", None),
                st.mode_record("nope", None))
    assert s.subjects(deleted=True) == []
