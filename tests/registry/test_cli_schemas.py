"""``spool schemas`` against a real registry process: what a user types and reads.

Each command runs in-process (tests.helpers.cli) against the session registry
(tests/registry/conftest.py's ``registry``; ``subject`` is a subject no other test uses);
the assertions are the user's: stdout (ids, subjects, versions, schema text, JSON),
the one stderr line of an error (the registry's message and error_code), exit codes.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.helpers.cli import spool_cli

pytestmark = pytest.mark.timeout(120)

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
V2_OK = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int", "default": 0}]}
V2_BAD = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int"}]}


@pytest.fixture
def cli(registry):
    def run(*args: str, stdin: str | None = None):
        return spool_cli("schemas", *args, "--url", registry.url, stdin=stdin)
    return run


def _ok(res) -> str:
    assert (res.returncode, res.stderr) == (0, ""), (res.returncode, res.stderr)
    return res.stdout


def _failed(res, code: int = 1) -> str:
    """The single stderr line of a failed command."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_register_list_get(cli, subject, tmp_path):
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(V1))
    schema_id = int(_ok(cli("register", subject, str(path))))
    assert int(_ok(cli("register", subject, str(path)))) == schema_id  # the same: its id
    assert subject in _ok(cli("list")).splitlines()
    assert _ok(cli("list", "--prefix", subject)).splitlines() == [subject]
    assert json.loads(_ok(cli("list", "--prefix", subject, "--json"))) == [subject]
    assert _ok(cli("list", subject)).splitlines() == ["1"]
    assert json.loads(_ok(cli("get", subject))) == V1
    assert json.loads(_ok(cli("get", subject, "1"))) == V1
    doc = json.loads(_ok(cli("get", subject, "--json")))
    assert (doc["subject"], doc["version"], doc["id"], doc["schemaType"]) == (
        subject, 1, schema_id, "AVRO")
    assert json.loads(doc["schema"]) == V1
    assert json.loads(_ok(cli("get", "--id", str(schema_id)))) == V1
    doc = json.loads(_ok(cli("register", subject, "--schema", json.dumps(V2_OK), "--json")))
    assert doc["subject"] == subject and doc["id"] > schema_id
    assert _ok(cli("list", subject)).splitlines() == ["1", "2"]


def test_register_from_stdin_and_proto_file(cli, subject, tmp_path):
    schema_id = int(_ok(cli("register", subject, "-", stdin=json.dumps(V1))))
    assert schema_id > 0
    proto = tmp_path / "thing.proto"
    proto.write_text('syntax = "proto3";\nmessage Thing {\n  string name = 1;\n}\n')
    other = subject + "-proto"
    _ok(cli("register", other, str(proto)))
    assert json.loads(_ok(cli("get", other, "--json")))["schemaType"] == "PROTOBUF"
    jschema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    _ok(cli("register", subject + "-json", "--schema", json.dumps(jschema), "--type", "json"))
    assert json.loads(_ok(cli("get", subject + "-json", "--json")))["schemaType"] == "JSON"


def test_check_compatible_and_not(cli, subject):
    _ok(cli("register", subject, "--schema", json.dumps(V1)))
    _ok(cli("config", subject, "--set", "backward"))
    assert _ok(cli("check", subject, "--schema", json.dumps(V2_OK))) == "compatible\n"
    res = cli("check", subject, "--schema", json.dumps(V2_BAD))
    assert res.returncode == 3 and res.stderr == ""
    lines = res.stdout.splitlines()
    assert lines[0] == "incompatible" and len(lines) >= 2  # the registry's reasons follow
    res = cli("check", subject, "--schema", json.dumps(V2_BAD), "--json", "--all")
    assert res.returncode == 3
    doc = json.loads(res.stdout)
    assert (doc["subject"], doc["is_compatible"]) == (subject, False) and doc["messages"]
    # registering it is refused: the registry's 409, one line
    line = _failed(cli("register", subject, "--schema", json.dumps(V2_BAD)))
    assert line.startswith("spool: Schema being registered is incompatible with an earlier "
                           "schema") and line.endswith("(error_code 409)")
    _ok(cli("config", subject, "--set", "NONE"))
    _ok(cli("register", subject, "--schema", json.dumps(V2_BAD)))


def test_config_global_and_per_subject(cli, subject):
    _ok(cli("register", subject, "--schema", json.dumps(V1)))
    level = _ok(cli("config")).strip()
    assert level in ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                     "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
    assert _ok(cli("config", subject)).strip() == level  # falls back to the global one
    assert _ok(cli("config", subject, "--set", "full_transitive")) == "FULL_TRANSITIVE\n"
    assert json.loads(_ok(cli("config", subject, "--json"))) == {
        "subject": subject, "compatibility": "FULL_TRANSITIVE"}
    assert _ok(cli("config", subject, "--delete")).strip() == level
    line = _failed(cli("config", subject, "--set", "SIDEWAYS"))
    assert line.startswith("spool: Invalid compatibility level") and line.endswith(
        "(error_code 42203)")


def test_mode_per_subject(cli, subject):
    _ok(cli("register", subject, "--schema", json.dumps(V1)))
    assert _ok(cli("mode")) == "READWRITE\n"  # the global mode (no test changes it)
    assert _ok(cli("mode", subject, "--set", "readonly")) == "READONLY\n"
    assert json.loads(_ok(cli("mode", subject, "--json"))) == {
        "subject": subject, "mode": "READONLY"}
    line = _failed(cli("register", subject, "--schema", json.dumps(V2_OK)))
    assert line.endswith("(error_code 42205)")
    line = _failed(cli("mode", subject, "--set", "IMPORT"))  # schemas exist: needs --force
    assert line.endswith("(error_code 42205)")
    assert _ok(cli("mode", subject, "--set", "IMPORT", "--force")) == "IMPORT\n"
    assert _ok(cli("mode", subject, "--delete")) == "READWRITE\n"
    _ok(cli("register", subject, "--schema", json.dumps(V2_OK)))
    assert _failed(cli("mode", subject, "--set", "SIDEWAYS")).endswith("(error_code 42204)")


def test_register_with_a_reference(cli, subject):
    address = {"type": "record", "name": "Address", "namespace": "com.acme",
               "fields": [{"name": "city", "type": "string"}]}
    _ok(cli("register", subject + "-address", "--schema", json.dumps(address)))
    order = {"type": "record", "name": "Order", "namespace": "com.acme",
             "fields": [{"name": "ship", "type": "com.acme.Address"}]}
    line = _failed(cli("register", subject, "--schema", json.dumps(order)))
    assert line.endswith("(error_code 42201)")  # Address unknown without the reference
    _ok(cli("register", subject, "--schema", json.dumps(order),
            "--reference", f"com.acme.Address={subject}-address:1"))
    doc = json.loads(_ok(cli("get", subject, "--json")))
    assert doc["references"] == [
        {"name": "com.acme.Address", "subject": f"{subject}-address", "version": 1}]


def test_delete_soft_then_permanent(cli, subject):
    _ok(cli("register", subject, "--schema", json.dumps(V1)))
    _ok(cli("config", subject, "--set", "NONE"))
    _ok(cli("register", subject, "--schema", json.dumps(V2_BAD)))
    assert _ok(cli("delete", subject, "1")) == "1\n"
    assert _ok(cli("list", subject)).splitlines() == ["2"]
    assert _ok(cli("list", subject, "--deleted")).splitlines() == ["1", "2"]
    line = _failed(cli("delete", subject, "--permanent"))
    assert line.endswith("(error_code 40405)")  # not soft-deleted first
    assert json.loads(_ok(cli("delete", subject, "--json"))) == {
        "subject": subject, "deleted": [2], "permanent": False}
    assert subject not in _ok(cli("list")).splitlines()
    assert subject in _ok(cli("list", "--deleted")).splitlines()
    assert _ok(cli("delete", subject, "--permanent")).splitlines() == ["1", "2"]
    assert subject not in _ok(cli("list", "--deleted")).splitlines()


def test_errors_are_the_registrys_message_and_code(cli, subject):
    assert _failed(cli("get", subject)) == (
        f"spool: Subject '{subject}' not found. (error_code 40401)")
    _ok(cli("register", subject, "--schema", json.dumps(V1)))
    assert _failed(cli("get", subject, "7")) == "spool: Version 7 not found. (error_code 40402)"
    assert _failed(cli("get", "--id", "999999")).endswith("(error_code 40403)")
    line = _failed(cli("register", subject, "--schema", '{"type": "record"}'))
    assert line.startswith("spool: Invalid schema") and line.endswith("(error_code 42201)")


def test_usage_errors_exit_2(cli, subject, tmp_path):
    assert _failed(cli("register", subject), 2) == (
        "spool: give the schema as a FILE argument ('-': stdin) or --schema TEXT, one of them")
    assert _failed(cli("register", subject, str(tmp_path / "none.avsc")), 2).startswith(
        "spool: cannot read ")
    assert _failed(cli("register", subject, "--schema", "{}", "--type", "xml"), 2) == (
        "spool: --type must be one of AVRO, JSON, PROTOBUF, not 'XML'")
    assert _failed(cli("register", subject, "--schema", "{}", "-r", "nope"), 2) == (
        "spool: bad --reference 'nope': expected NAME=SUBJECT:VERSION")
    assert _failed(cli("get"), 2) == "spool: give a SUBJECT [VERSION] or --id N, one of them"


def test_unreachable_registry_is_one_line(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("SPOOL_REGISTRY_URL", url)
    res = spool_cli("schemas", "list")
    assert _failed(res) == f"spool: cannot reach the schema registry at {url}: Connection refused"
    assert _failed(spool_cli("schemas", "list", "--url", "ftp://x"), 2).startswith(
        "spool: not a registry URL")
