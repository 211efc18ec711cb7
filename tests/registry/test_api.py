"""Every route of the registry's REST API against a real ``spool registry`` process, with
the exact JSON Confluent's Schema Registry answers (status, body, media type).

The session registry is shared: each test makes its own subjects, and ids are read from
the registration's answer (ids are global). Global config and mode are changed only on
``own_registry``. Avro schemas are written as Avro's ``Schema.toString()`` writes them
(compact JSON), so the text registered is the text answered.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.helpers.registry_proc import SR_JSON, call, schemas_end_offset

pytestmark = pytest.mark.timeout(120)

def avro(name: str, *fields: str) -> str:
    """A record schema as Avro's ``Schema.toString()`` writes it."""
    return f'{{"type":"record","name":"{name}","fields":[{",".join(fields)}]}}'


A = '{"name":"a","type":"int"}'
B_DEFAULT = '{"name":"b","type":"string","default":"x"}'
C_REQUIRED = '{"name":"c","type":"string"}'  # no default: BACKWARD-incompatible when added


class Schemas:
    """Schemas of this test's own (a record name no other test uses: ids are global,
    and the same schema under another test's subject would share its id)."""

    def __init__(self, token: str):
        self.V1 = avro(f"R{token}", A)
        self.V2 = avro(f"R{token}", A, B_DEFAULT)
        self.V_BAD = avro(f"R{token}", A, C_REQUIRED)
        self.OTHER = avro(f"O{token}", '{"name":"x","type":"long"}')


@pytest.fixture
def s(subject) -> Schemas:
    return Schemas(subject.rsplit("-", 1)[1])


def register(sr, subject: str, schema: str, **extra) -> int:
    a = sr("POST", f"/subjects/{subject}/versions", {"schema": schema, **extra})
    assert a.status == 200, a.body
    assert set(a.body) == {"id"}
    return a.body["id"]


def test_root_answers_an_empty_object(sr):
    a = sr("GET", "/")
    assert (a.status, a.body, a.content_type) == (200, {}, SR_JSON)


def test_schema_types(sr):
    a = sr("GET", "/schemas/types")
    assert (a.status, a.body) == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_contexts_is_the_default_one(sr):
    assert sr("GET", "/contexts").body == ["."]


def test_list_schemas(s, sr, subject):
    first, second = subject + "-a", subject + "-b"
    id1 = register(sr, first, s.V1)
    id2 = register(sr, first, s.V2)
    idb = register(sr, second, s.OTHER)
    v1 = {"subject": first, "version": 1, "id": id1, "schema": s.V1}
    v2 = {"subject": first, "version": 2, "id": id2, "schema": s.V2}
    b1 = {"subject": second, "version": 1, "id": idb, "schema": s.OTHER}
    assert sr("GET", f"/schemas?subjectPrefix={subject}-").body == [v1, v2, b1]
    assert sr("GET", f"/schemas?subjectPrefix={subject}-&latestOnly=true").body == [v2, b1]
    assert sr("GET", f"/schemas?subjectPrefix={subject}-&offset=1&limit=1").body == [v2]
    sr("DELETE", f"/subjects/{first}/versions/2")
    assert sr("GET", f"/schemas?subjectPrefix={subject}-").body == [v1, b1]
    assert sr("GET", f"/schemas?subjectPrefix={subject}-&deleted=true").body == [v1, v2, b1]


def test_register_and_read_back_every_way(s, sr, subject):
    sid = register(sr, subject, s.V1)
    assert sr("GET", f"/subjects/{subject}/versions").body == [1]
    expected = {"subject": subject, "version": 1, "id": sid, "schema": s.V1}
    for v in ("1", "latest", "-1"):
        a = sr("GET", f"/subjects/{subject}/versions/{v}")
        assert (a.status, a.body, a.content_type) == (200, expected, SR_JSON)
    a = sr("GET", f"/subjects/{subject}/versions/1/schema")
    assert (a.status, a.text) == (200, s.V1)
    assert sr("GET", f"/schemas/ids/{sid}").body == {"schema": s.V1}
    a = sr("GET", f"/schemas/ids/{sid}/schema")
    assert (a.status, a.text) == (200, s.V1)
    assert sr("GET", f"/schemas/ids/{sid}/versions").body == [{"subject": subject, "version": 1}]
    assert sr("GET", f"/schemas/ids/{sid}/subjects").body == [subject]
    assert subject in sr("GET", "/subjects").body


def test_registering_the_same_schema_again_returns_its_id_and_writes_nothing(
        s, sr, subject, registry):
    sid = register(sr, subject, s.V1)
    before = schemas_end_offset(registry.bootstrap)
    assert register(sr, subject, s.V1) == sid
    # the same schema spelt differently (whitespace) is the same schema
    assert register(sr, subject, json.dumps(json.loads(s.V1), indent=2)) == sid
    assert schemas_end_offset(registry.bootstrap) == before
    assert sr("GET", f"/subjects/{subject}/versions").body == [1]


def test_a_new_version_and_a_new_id(s, sr, subject):
    id1 = register(sr, subject, s.V1)
    id2 = register(sr, subject, s.V2)
    assert id2 == id1 + 1
    assert sr("GET", f"/subjects/{subject}/versions").body == [1, 2]
    assert sr("GET", f"/subjects/{subject}/versions/latest").body == {
        "subject": subject, "version": 2, "id": id2, "schema": s.V2}


def test_ids_are_global_across_subjects(s, sr, subject):
    other = subject + "-other"
    sid = register(sr, subject, s.V1)
    assert register(sr, other, s.V1) == sid
    assert sr("GET", f"/schemas/ids/{sid}/versions").body == [
        {"subject": subject, "version": 1}, {"subject": other, "version": 1}]
    assert sr("GET", f"/schemas/ids/{sid}/subjects").body == [subject, other]


def test_subject_prefix_and_paging(s, sr, subject):
    names = [f"{subject}-{i}" for i in range(3)]
    for n in names:
        register(sr, n, s.OTHER)
    assert sr("GET", f"/subjects?subjectPrefix={subject}-").body == names
    assert sr("GET", f"/subjects?subjectPrefix={subject}-&offset=1&limit=1").body == names[1:2]


def test_lookup(s, sr, subject):
    sid = register(sr, subject, s.V1)
    register(sr, subject, s.V2)
    a = sr("POST", f"/subjects/{subject}", {"schema": s.V1})
    assert (a.status, a.body) == (200, {"subject": subject, "version": 1, "id": sid,
                                        "schema": s.V1})
    a = sr("POST", f"/subjects/{subject}", {"schema": s.OTHER})
    assert (a.status, a.body["error_code"]) == (404, 40403)
    a = sr("POST", f"/subjects/{subject}-none", {"schema": s.V1})
    assert (a.status, a.body) == (404, {"error_code": 40401,
                                        "message": f"Subject '{subject}-none' not found."})


def test_soft_then_permanent_delete_of_a_version(s, sr, subject, registry):
    register(sr, subject, s.V1)
    id2 = register(sr, subject, s.V2)
    a = sr("DELETE", f"/subjects/{subject}/versions/2/?permanent=true")
    assert (a.status, a.body["error_code"]) == (404, 40407)
    assert sr("DELETE", f"/subjects/{subject}/versions/2").body == 2
    assert sr("GET", f"/subjects/{subject}/versions").body == [1]
    assert sr("GET", f"/subjects/{subject}/versions?deleted=true").body == [1, 2]
    assert sr("GET", f"/subjects/{subject}/versions?deletedOnly=true").body == [2]
    assert sr("GET", f"/subjects/{subject}/versions/2").body["error_code"] == 40402
    assert sr("GET", f"/subjects/{subject}/versions/2?deleted=true").body == {
        "subject": subject, "version": 2, "id": id2, "schema": s.V2}
    assert sr("GET", f"/schemas/ids/{id2}").body == {"schema": s.V2}  # ids outlive versions
    assert sr("DELETE", f"/subjects/{subject}/versions/2").body["error_code"] == 40406
    assert sr("DELETE", f"/subjects/{subject}/versions/2?permanent=true").body == 2
    assert sr("GET", f"/subjects/{subject}/versions?deleted=true").body == [1]


def test_soft_then_permanent_delete_of_a_subject(s, sr, subject):
    register(sr, subject, s.V1)
    register(sr, subject, s.V2)
    a = sr("DELETE", f"/subjects/{subject}?permanent=true")
    assert (a.status, a.body["error_code"]) == (404, 40405)
    assert sr("DELETE", f"/subjects/{subject}").body == [1, 2]
    assert subject not in sr("GET", "/subjects").body
    assert subject in sr("GET", "/subjects?deleted=true").body
    assert sr("GET", f"/subjects?deletedOnly=true&subjectPrefix={subject}").body == [subject]
    a = sr("GET", f"/subjects/{subject}/versions")
    assert (a.status, a.body["error_code"]) == (404, 40401)
    assert sr("DELETE", f"/subjects/{subject}?permanent=true").body == [1, 2]
    assert subject not in sr("GET", "/subjects?deleted=true").body


def test_referencedby(sr, subject):
    base_subject, user_subject = subject + "-base", subject + "-user"
    base = '{"type":"record","name":"Base","namespace":"t","fields":[{"name":"a","type":"int"}]}'
    user = ('{"type":"record","name":"User","namespace":"t",'
            '"fields":[{"name":"base","type":"t.Base"}]}')
    register(sr, base_subject, base)
    ref = {"name": "t.Base", "subject": base_subject, "version": 1}
    uid = register(sr, user_subject, user, references=[ref])
    assert sr("GET", f"/subjects/{base_subject}/versions/1/referencedby").body == [uid]
    assert sr("GET", f"/subjects/{user_subject}/versions/1").body == {
        "subject": user_subject, "version": 1, "id": uid, "schema": user, "references": [ref]}
    assert sr("GET", f"/schemas/ids/{uid}").body == {"schema": user, "references": [ref]}
    a = sr("DELETE", f"/subjects/{base_subject}/versions/1")
    assert (a.status, a.body["error_code"]) == (422, 42206)


def test_json_and_protobuf_schemas_carry_their_type(sr, subject):
    js = '{"type":"object","properties":{"a":{"type":"integer"}}}'
    proto = 'syntax = "proto3";\npackage t;\n\nmessage M {\n  int32 a = 1;\n}\n'
    jid = register(sr, subject + "-json", js, schemaType="JSON")
    pid = register(sr, subject + "-proto", proto, schemaType="PROTOBUF")
    assert sr("GET", f"/schemas/ids/{jid}").body == {"schemaType": "JSON", "schema": js}
    got = sr("GET", f"/subjects/{subject}-proto/versions/1").body
    assert (got["id"], got["schemaType"], got["version"]) == (pid, "PROTOBUF", 1)
    assert sr("GET", f"/schemas/ids/{pid}/schema").text == got["schema"]


def test_compatibility_against_a_version_and_against_the_subject(s, sr, subject):
    register(sr, subject, s.V1)
    for path in (f"/compatibility/subjects/{subject}/versions/latest",
                 f"/compatibility/subjects/{subject}/versions/1",
                 f"/compatibility/subjects/{subject}/versions"):
        assert sr("POST", path, {"schema": s.V2}).body == {"is_compatible": True}
        assert sr("POST", path + "?verbose=true", {"schema": s.V2}).body == {
            "is_compatible": True}
        assert sr("POST", path, {"schema": s.V_BAD}).body == {"is_compatible": False}
        a = sr("POST", path + "?verbose=true", {"schema": s.V_BAD})
        assert a.status == 200 and a.body["is_compatible"] is False
        assert a.body["messages"] and all(isinstance(m, str) for m in a.body["messages"])
    a = sr("POST", f"/compatibility/subjects/{subject}/versions/7", {"schema": s.V2})
    assert (a.status, a.body["error_code"]) == (404, 40402)
    a = sr("POST", f"/compatibility/subjects/{subject}-none/versions/latest", {"schema": s.V2})
    assert (a.status, a.body["error_code"]) == (404, 40401)
    a = sr("POST", f"/compatibility/subjects/{subject}-none/versions", {"schema": s.V2})
    assert (a.status, a.body) == (200, {"is_compatible": True})


def test_incompatible_registration_is_refused(s, sr, subject):
    register(sr, subject, s.V1)
    a = sr("POST", f"/subjects/{subject}/versions", {"schema": s.V_BAD})
    assert (a.status, a.body["error_code"]) == (409, 409)
    assert sr("GET", f"/subjects/{subject}/versions").body == [1]


def test_subject_config(s, sr, subject):
    a = sr("GET", f"/config/{subject}")
    assert (a.status, a.body) == (404, {
        "error_code": 40408,
        "message": f"Subject '{subject}' does not have subject-level compatibility configured"})
    assert sr("GET", f"/config/{subject}?defaultToGlobal=true").body == {
        "compatibilityLevel": "BACKWARD"}
    a = sr("PUT", f"/config/{subject}", {"compatibility": "NONE"})
    assert (a.status, a.body) == (200, {"compatibility": "NONE"})
    assert sr("GET", f"/config/{subject}").body == {"compatibilityLevel": "NONE"}
    register(sr, subject, s.V1)
    register(sr, subject, s.V_BAD)  # NONE: anything goes
    assert sr("DELETE", f"/config/{subject}").body == {"compatibilityLevel": "NONE"}
    assert sr("GET", f"/config/{subject}").body["error_code"] == 40408


def test_subject_mode(s, sr, subject):
    assert sr("GET", "/mode").body == {"mode": "READWRITE"}
    a = sr("GET", f"/mode/{subject}")
    assert (a.status, a.body) == (404, {
        "error_code": 40409,
        "message": f"Subject '{subject}' does not have subject-level mode configured"})
    assert sr("GET", f"/mode/{subject}?defaultToGlobal=true").body == {"mode": "READWRITE"}
    assert sr("PUT", f"/mode/{subject}", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert sr("GET", f"/mode/{subject}").body == {"mode": "READONLY"}
    a = sr("POST", f"/subjects/{subject}/versions", {"schema": s.V1})
    assert (a.status, a.body["error_code"]) == (422, 42205)
    assert sr("DELETE", f"/mode/{subject}").body == {"mode": "READONLY"}
    register(sr, subject, s.V1)


def test_media_types_of_requests_and_answers(s, sr, subject):
    body = json.dumps({"schema": s.V1}).encode()
    for ctype in ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json", "application/octet-stream",
                  "application/json; charset=utf-8"):
        a = sr("POST", f"/subjects/{subject}/versions", data=body,
               headers={"Content-Type": ctype})
        assert a.status == 200, (ctype, a.body)
    for accept, answered in (("application/json", "application/json"),
                             ("application/vnd.schemaregistry+json", SR_JSON.replace(".v1", "")),
                             ("*/*", SR_JSON),
                             ("application/json;q=0.5, application/vnd.schemaregistry.v1+json",
                              SR_JSON)):
        a = sr("GET", "/subjects", headers={"Accept": accept})
        assert (a.status, a.content_type) == (200, answered)


def test_global_config(own_registry):
    url = own_registry.url
    assert call(url, "GET", "/config").body == {"compatibilityLevel": "BACKWARD"}
    a = call(url, "PUT", "/config", {"compatibility": "FULL_TRANSITIVE"})
    assert (a.status, a.body) == (200, {"compatibility": "FULL_TRANSITIVE"})
    assert call(url, "GET", "/config").body == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert call(url, "GET", "/config/unset?defaultToGlobal=true").body == {
        "compatibilityLevel": "FULL_TRANSITIVE"}
    assert call(url, "DELETE", "/config").body == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert call(url, "GET", "/config").body == {"compatibilityLevel": "BACKWARD"}


def test_global_mode_readonly_and_import(s, own_registry):
    url = own_registry.url
    assert call(url, "PUT", "/mode", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    a = call(url, "POST", "/subjects/ro/versions", {"schema": s.V1})
    assert (a.status, a.body["error_code"]) == (422, 42205)
    assert call(url, "GET", "/subjects/ro/versions").body["error_code"] == 40401  # reads work
    assert call(url, "PUT", "/mode", {"mode": "READWRITE"}).body == {"mode": "READWRITE"}
    assert call(url, "POST", "/subjects/ro/versions", {"schema": s.V1}).status == 200
    # IMPORT with schemas present needs force=true; then ids and versions are the caller's
    a = call(url, "PUT", "/mode", {"mode": "IMPORT"})
    assert (a.status, a.body["error_code"]) == (422, 42205)
    assert call(url, "PUT", "/mode?force=true", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    a = call(url, "POST", "/subjects/imported/versions",
             {"schema": s.OTHER, "id": 1000, "version": 7})
    assert (a.status, a.body) == (200, {"id": 1000})
    assert call(url, "GET", "/subjects/imported/versions/7").body == {
        "subject": "imported", "version": 7, "id": 1000, "schema": s.OTHER}
    assert call(url, "PUT", "/mode", {"mode": "READWRITE"}).body == {"mode": "READWRITE"}
    assert call(url, "GET", "/mode").body == {"mode": "READWRITE"}


def test_subject_names_are_percent_decoded_and_a_trailing_slash_is_the_same_route(s, sr, subject):
    name = subject + " ünïcode:value"
    quoted = urllib.parse.quote(name, safe="")
    sid = register(sr, quoted, s.V1)
    assert name in sr("GET", "/subjects/").body
    assert sr("GET", f"/subjects/{quoted}/versions/1/").body == {
        "subject": name, "version": 1, "id": sid, "schema": s.V1}


def test_non_ascii_schema_text_round_trips(sr, subject):
    schema = avro(f"U{subject.rsplit('-', 1)[1]}",
                  '{"name":"a","type":"string","doc":"grüße, 日本, 🙂"}')
    sid = register(sr, subject, schema)
    assert sr("GET", f"/subjects/{subject}/versions/1").body["schema"] == schema
    a = sr("GET", f"/schemas/ids/{sid}/schema")
    assert (a.text, a.headers["Content-Type"]) == (schema, SR_JSON + "; charset=utf-8")


def test_concurrent_registrations_get_distinct_ids_and_consecutive_versions(s, sr, subject):
    from concurrent.futures import ThreadPoolExecutor

    sr("PUT", f"/config/{subject}", {"compatibility": "NONE"})
    token = subject.rsplit("-", 1)[1]
    schemas = [avro(f"C{token}x{i}", A) for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(lambda sch: register(sr, subject, sch), schemas))
    assert len(set(ids)) == 12
    assert sr("GET", f"/subjects/{subject}/versions").body == list(range(1, 13))
    for sch, sid in zip(schemas, ids, strict=True):
        assert sr("GET", f"/schemas/ids/{sid}").body == {"schema": sch}
