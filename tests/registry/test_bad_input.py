"""Bad requests to a real ``spool registry``: each gets Confluent's status and error code,
and none writes to ``_schemas`` (its end offset is the same before and after).

Malformed JSON and JSON of the wrong shape are 400/400 (Confluent 7's rest-utils map
Jackson's parse and mapping errors so), an empty body 422/422; a body over the limit (1,000,000 bytes by
default) is 413/413 whether it says its length or comes chunked.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest

from tests.helpers.registry_proc import schemas_end_offset

pytestmark = pytest.mark.timeout(120)

V1 = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
V_BAD = ('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
         '{"name":"c","type":"string"}]}')


@pytest.fixture
def unwritten(registry):
    """Fails the test if ``_schemas`` grew while it ran."""
    before = schemas_end_offset(registry.bootstrap)
    yield
    assert schemas_end_offset(registry.bootstrap) == before, "a refused request wrote"


def refused(sr, method, path, body=None, *, status, code, **kw):
    a = sr(method, path, body, **kw)
    assert (a.status, a.body.get("error_code") if isinstance(a.body, dict) else a.body) \
        == (status, code), a.text
    assert set(a.body) == {"error_code", "message"} and a.body["message"], a.body
    assert a.content_type == "application/vnd.schemaregistry.v1+json"
    return a.body["message"]


@pytest.mark.parametrize("schema", [
    "not json at all",
    '{"type":"record","name":"R"}',  # no fields
    '{"type":"no-such-type"}',
    '{"type":"record","name":"R","fields":[{"name":"a","type":"Missing"}]}',
    '{"type":"enum","name":"E","symbols":["A","A"]}',
    "",
], ids=["not-json", "no-fields", "unknown-type", "unknown-name", "duplicate-symbol", "empty"])
def test_invalid_avro_schema(sr, subject, unwritten, schema):
    refused(sr, "POST", f"/subjects/{subject}/versions", {"schema": schema},
            status=422, code=42201)
    refused(sr, "POST", f"/compatibility/subjects/{subject}/versions", {"schema": schema},
            status=422, code=42201)
    refused(sr, "GET", f"/subjects/{subject}/versions", status=404, code=40401)


@pytest.mark.parametrize("schema_type, schema", [
    ("JSON", '{"type": 12}'),
    ("JSON", "[not json"),
    ("PROTOBUF", "syntax = \"proto3\"; message M { int32 a = ; }"),
    ("PROTOBUF", "not a proto"),
])
def test_invalid_json_and_protobuf_schemas(sr, subject, unwritten, schema_type, schema):
    refused(sr, "POST", f"/subjects/{subject}/versions",
            {"schema": schema, "schemaType": schema_type}, status=422, code=42201)


def test_a_subject_with_control_characters_is_not_valid(sr, subject, unwritten):
    msg = refused(sr, "POST", f"/subjects/{subject}%07bell/versions", {"schema": V1},
                  status=422, code=42208)
    assert msg == "The specified subject is not valid."


def test_unknown_schema_type_and_missing_schema(sr, subject, unwritten):
    refused(sr, "POST", f"/subjects/{subject}/versions", {"schema": V1, "schemaType": "XML"},
            status=422, code=42201)
    refused(sr, "POST", f"/subjects/{subject}/versions", {"schemaType": "AVRO"},
            status=422, code=42201)


@pytest.mark.parametrize("body", [
    b'{"schema": ', b"{'schema': 1}", b"\xff\xfe", b'{"schema": "x"} trailing',
], ids=["truncated", "single-quotes", "not-utf8", "trailing"])
def test_malformed_json_is_400(sr, subject, unwritten, body):
    refused(sr, "POST", f"/subjects/{subject}/versions", data=body,
            headers={"Content-Type": "application/json"}, status=400, code=400)


@pytest.mark.parametrize("body", [
    b"[1, 2]", b'"schema"', b'{"schema": 5}', b'{"schema": {"type": "string"}}',
    b'{"schema": "\\"int\\"", "references": 3}',
    b'{"schema": "\\"int\\"", "references": [{"name": "x"}]}',
    b'{"schema": "\\"int\\"", "schemaType": ["AVRO"]}',
], ids=["array", "string", "schema-a-number", "schema-an-object", "references-not-list",
        "reference-incomplete", "type-a-list"])
def test_wrong_shape_is_400(sr, subject, unwritten, body):
    refused(sr, "POST", f"/subjects/{subject}/versions", data=body,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            status=400, code=400)


def test_empty_body_is_422(sr, subject, unwritten):
    for path in (f"/subjects/{subject}/versions", f"/subjects/{subject}",
                 f"/compatibility/subjects/{subject}/versions"):
        refused(sr, "POST", path, data=b"", headers={"Content-Type": "application/json"},
                status=422, code=422)
    refused(sr, "PUT", f"/config/{subject}", data=b"",
            headers={"Content-Type": "application/json"}, status=422, code=422)


@pytest.mark.parametrize("ctype", ["text/plain", "application/xml",
                                   "application/x-www-form-urlencoded"])
def test_wrong_content_type_is_415(sr, subject, unwritten, ctype):
    body = json.dumps({"schema": V1}).encode()
    msg = refused(sr, "POST", f"/subjects/{subject}/versions", data=body,
                  headers={"Content-Type": ctype}, status=415, code=415)
    assert msg == "HTTP 415 Unsupported Media Type"
    refused(sr, "PUT", f"/config/{subject}", data=b'{"compatibility": "NONE"}',
            headers={"Content-Type": ctype}, status=415, code=415)


def test_unacceptable_accept_is_406(sr, unwritten):
    refused(sr, "GET", "/subjects", headers={"Accept": "text/html"}, status=406, code=406)


def test_huge_schema_is_413_before_it_is_read(sr, subject, registry, unwritten):
    fields = ",".join(f'{{"name":"f{i}","type":"string"}}' for i in range(60_000))
    huge = f'{{"type":"record","name":"Huge","fields":[{fields}]}}'
    assert len(huge) > 1_000_000
    msg = refused(sr, "POST", f"/subjects/{subject}/versions", {"schema": huge},
                  status=413, code=413)
    assert "1000000" in msg
    # the same body chunked, with no Content-Length: refused once it passes the limit
    u = urllib.parse.urlsplit(registry.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        payload = json.dumps({"schema": huge}).encode()
        chunks = (payload[i:i + 65536] for i in range(0, len(payload), 65536))
        conn.request("POST", f"/subjects/{subject}/versions", body=chunks,
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        r = conn.getresponse()
        assert (r.status, json.loads(r.read())["error_code"]) == (413, 413)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close before the whole body is sent: refused all the same
    finally:
        conn.close()
    refused(sr, "GET", f"/subjects/{subject}/versions", status=404, code=40401)


def test_unknown_subjects_versions_and_ids(sr, subject, unwritten):
    refused(sr, "GET", f"/subjects/{subject}/versions", status=404, code=40401)
    refused(sr, "GET", f"/subjects/{subject}/versions/1", status=404, code=40401)
    refused(sr, "GET", f"/subjects/{subject}/versions/latest/schema", status=404, code=40401)
    refused(sr, "GET", f"/subjects/{subject}/versions/1/referencedby", status=404, code=40401)
    refused(sr, "DELETE", f"/subjects/{subject}", status=404, code=40401)
    refused(sr, "DELETE", f"/subjects/{subject}/versions/1", status=404, code=40401)
    refused(sr, "POST", f"/subjects/{subject}", {"schema": V1}, status=404, code=40401)
    refused(sr, "GET", "/schemas/ids/2000000000", status=404, code=40403)
    refused(sr, "GET", "/schemas/ids/2000000000/schema", status=404, code=40403)
    refused(sr, "GET", "/schemas/ids/2000000000/versions", status=404, code=40403)
    refused(sr, "GET", "/schemas/ids/2000000000/subjects", status=404, code=40403)
    refused(sr, "GET", "/schemas/ids/-1", status=404, code=40403)
    refused(sr, "GET", "/schemas/ids/abc", status=404, code=404)


def test_unknown_and_invalid_versions(sr, subject):
    sr("POST", f"/subjects/{subject}/versions", {"schema": V1})
    refused(sr, "GET", f"/subjects/{subject}/versions/2", status=404, code=40402)
    for bad in ("0", "-2", "abc", "2147483648", "1.5"):
        msg = refused(sr, "GET", f"/subjects/{subject}/versions/{bad}", status=422, code=42202)
        assert f"'{bad}'" in msg
        refused(sr, "DELETE", f"/subjects/{subject}/versions/{bad}", status=422, code=42202)
        refused(sr, "POST", f"/compatibility/subjects/{subject}/versions/{bad}",
                {"schema": V1}, status=422, code=42202)


def test_refused_writes_write_nothing(sr, subject, registry):
    sr("POST", f"/subjects/{subject}/versions", {"schema": V1})
    before = schemas_end_offset(registry.bootstrap)
    refused(sr, "POST", f"/subjects/{subject}/versions", {"schema": V_BAD}, status=409, code=409)
    refused(sr, "DELETE", f"/subjects/{subject}?permanent=true", status=404, code=40405)
    refused(sr, "DELETE", f"/subjects/{subject}/versions/1?permanent=true",
            status=404, code=40407)
    refused(sr, "PUT", f"/config/{subject}", {"compatibility": "SOMETIMES"},
            status=422, code=42203)
    refused(sr, "PUT", f"/config/{subject}", {}, status=422, code=42203)
    refused(sr, "PUT", f"/mode/{subject}", {"mode": "WRITEONLY"}, status=422, code=42204)
    refused(sr, "POST", f"/subjects/{subject}-ref/versions",
            {"schema": V1, "references": [{"name": "x", "subject": subject + "-none",
                                           "version": 1}]}, status=422, code=42201)
    assert schemas_end_offset(registry.bootstrap) == before


def test_unknown_routes_and_methods(sr, unwritten):
    assert refused(sr, "GET", "/nothing/here", status=404, code=404) == "HTTP 404 Not Found"
    refused(sr, "GET", "/schemas/ids", status=404, code=404)
    assert refused(sr, "PATCH", "/subjects", status=405, code=405) \
        == "HTTP 405 Method Not Allowed"
    refused(sr, "POST", "/schemas/types", {}, status=405, code=405)
    refused(sr, "GET", "/subjects?limit=ten", status=404, code=404)  # Jersey's answer


def test_a_schema_just_under_the_limit_is_registered_and_read_back(sr, subject):
    """The limit's other side: the largest bodies fit in a _schemas record."""
    n = 24_000
    while True:
        fields = ",".join(f'{{"name":"f{i}","type":"string"}}' for i in range(n))
        big = f'{{"type":"record","name":"Big{subject[-8:]}","fields":[{fields}]}}'
        size = len(json.dumps({"schema": big}).encode())
        if size <= 1_000_000:
            break
        n -= 10
    assert size > 990_000
    a = sr("POST", f"/subjects/{subject}/versions", {"schema": big})
    assert a.status == 200, a.text[:500]
    assert sr("GET", f"/schemas/ids/{a.body['id']}/schema").text == big
