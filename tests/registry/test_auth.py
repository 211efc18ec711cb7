"""``spool registry --authentication basic``: HTTP basic credentials of the cluster's users.

A broker with SASL/SCRAM users (``registry``, ``alice``, ``bob``) and registry processes
reaching it as ``registry`` over SCRAM-SHA-256 (``--command-config``): a request is
answered when its Basic credentials authenticate to the broker, else 401 with
``WWW-Authenticate: Basic`` and Confluent's body, whatever the route. confluent-kafka's
``SchemaRegistryClient`` with ``basic.auth.user.info`` works, and so does a write made
through a second instance (forwarded to the primary with the client's credentials), and
``spool schemas --url http://user:password@host:port``. With ``--permissions``, READ and
WRITE per subject (name or prefix): lists and ids show only readable subjects, the rest
is 403/40301.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from tests.helpers.cli import spool_cli
from tests.helpers.registry_proc import RegistryProcess, call
from tests.helpers.secure_broker import SCRAM_LOGIN, SecureBroker

pytestmark = pytest.mark.timeout(120)

USERS = {"registry": "registry-secret", "alice": "alice-secret", "bob": "b:ob s3cret",
         "carol": "carol-secret"}
SCHEMA = '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}'


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The SCRAM broker, the registry's command config, and the first registry."""
    base = tmp_path_factory.mktemp("registry-auth")
    broker = SecureBroker(base / "data", scram_users=USERS)
    broker.start()
    config = base / "registry.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      f'sasl.jaas.config={SCRAM_LOGIN} required username="registry" '
                      'password="registry-secret";\n')
    reg = RegistryProcess(broker.bootstrap(), base / "registry.log", "--command-config",
                          str(config), "--authentication", "basic")
    try:
        reg.start()
        yield broker, config, reg, base
    finally:
        reg.stop()
        broker.stop()


def test_no_or_bad_credentials_are_401(cluster):
    _, _, reg, _ = cluster
    bad = [
        {},
        basic("alice", "wrong"),
        basic("mallory", "alice-secret"),
        basic("registry", ""),
        {"Authorization": "Basic not-base64!"},
        {"Authorization": "Bearer abc"},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
    ]
    for headers in bad:
        for method, path, body in (("GET", "/subjects", None), ("GET", "/", None),
                                   ("POST", "/subjects/s/versions", {"schema": SCHEMA}),
                                   ("GET", "/no/such/route", None)):
            a = call(reg.url, method, path, body, headers=headers)
            assert a.status == 401, (headers, path, a.status, a.body)
            assert a.body == {"error_code": 401, "message": "Unauthorized"}
            assert a.headers["WWW-Authenticate"] == 'Basic realm="spool-registry"'
    # nothing was registered
    a = call(reg.url, "GET", "/subjects", headers=basic("alice", "alice-secret"))
    assert a.status == 200 and "s" not in a.body


def test_the_cluster_users_are_accepted(cluster):
    _, _, reg, _ = cluster
    subject = f"auth-{uuid.uuid4().hex[:8]}"
    a = call(reg.url, "POST", f"/subjects/{subject}/versions", {"schema": SCHEMA},
             headers=basic("alice", "alice-secret"))
    assert a.status == 200, a.body
    for user in ("alice", "bob", "registry"):
        got = call(reg.url, "GET", f"/subjects/{subject}/versions/1",
                   headers=basic(user, USERS[user]))
        assert got.status == 200 and got.body["id"] == a.body["id"], (user, got.body)
    assert call(reg.url, "GET", "/no/such/route",
                headers=basic("bob", USERS["bob"])).status == 404


def test_confluent_client_with_basic_auth_user_info(cluster):
    _, _, reg, _ = cluster
    subject = f"auth-client-{uuid.uuid4().hex[:8]}"
    good = SchemaRegistryClient({"url": reg.url,
                                 "basic.auth.user.info": "bob:" + USERS["bob"]})
    schema_id = good.register_schema(subject, Schema(SCHEMA, "AVRO"))
    assert good.get_latest_version(subject).schema_id == schema_id
    for conf in ({"url": reg.url}, {"url": reg.url, "basic.auth.user.info": "bob:nope"}):
        with pytest.raises(SchemaRegistryError) as e:
            SchemaRegistryClient(conf).get_subjects()
        assert (e.value.http_status_code, e.value.error_code) == (401, 401)


def test_spool_schemas_with_credentials_in_the_url(cluster):
    _, _, reg, _ = cluster
    subject = f"auth-cli-{uuid.uuid4().hex[:8]}"
    with_alice = reg.url.replace("http://", "http://alice:alice-secret@")
    done = spool_cli("schemas", "register", subject, "--schema", SCHEMA, "--url", with_alice)
    assert done.returncode == 0, done.stderr
    assert subject in spool_cli("schemas", "list", "--url", with_alice).stdout
    refused = spool_cli("schemas", "list", "--url", reg.url)
    assert refused.returncode != 0 and refused.stdout == ""
    assert "Unauthorized" in refused.stderr and "401" in refused.stderr


def test_a_forwarded_write_carries_the_credentials(cluster):
    """A second instance (not the primary) forwards alice's write with her credentials."""
    broker, config, first, base = cluster
    second = RegistryProcess(broker.bootstrap(), base / "second.log", "--command-config",
                             str(config), "--authentication", "basic")
    try:
        second.start()
        subject = f"auth-fwd-{uuid.uuid4().hex[:8]}"
        alice = basic("alice", "alice-secret")
        assert call(second.url, "POST", f"/subjects/{subject}/versions",
                    {"schema": SCHEMA}).status == 401
        a = call(second.url, "POST", f"/subjects/{subject}/versions", {"schema": SCHEMA},
                 headers=alice)
        assert a.status == 200, (a.body, second.log_tail())
        got = call(first.url, "GET", f"/subjects/{subject}/versions", headers=alice)
        assert got.body == [1]
        # the primary itself
        b = call(first.url, "PUT", f"/config/{subject}", {"compatibility": "NONE"},
                 headers=alice)
        assert b.status == 200, b.body
        assert call(second.url, "GET", f"/config/{subject}",
                    headers=alice).body == {"compatibilityLevel": "NONE"}
    finally:
        assert second.stop() == 0


def test_basic_needs_a_sasl_command_config(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "spool.cli.main", "registry", "--bootstrap-server",
         "127.0.0.1:1", "--listen", "http://127.0.0.1:0", "--authentication", "basic"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--authentication basic" in done.stderr and "SASL_PLAINTEXT" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "spool.cli.main", "registry", "--bootstrap-server",
         "127.0.0.1:1", "--listen", "http://127.0.0.1:0", "--authentication", "digest"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "none or basic" in done.stderr


PERMISSIONS = """# who may do what
User:alice   WRITE  orders-*
User:bob     READ   orders-value   # one subject
User:registry ALL   *
"""


def test_permissions_per_subject(cluster):
    """A second instance with --permissions: READ/WRITE by subject name or prefix; lists
    and ids show only what the user may read; 403/40301 for the rest."""
    broker, config, _, base = cluster
    rules = base / "permissions.txt"
    rules.write_text(PERMISSIONS)
    reg = RegistryProcess(broker.bootstrap(), base / "perm.log", "--command-config",
                          str(config), "--authentication", "basic", "--permissions",
                          str(rules))
    alice, bob = basic("alice", USERS["alice"]), basic("bob", USERS["bob"])
    carol, admin = basic("carol", USERS["carol"]), basic("registry", USERS["registry"])
    tag = uuid.uuid4().hex[:6]
    orders, okey, pay = "orders-value", "orders-key", f"payments-{tag}"

    def schema(name: str) -> dict:
        return {"schema": SCHEMA.replace('"A"', f'"R{name.replace("-", "_")}{tag}"')}

    def status(method: str, path: str, headers: dict, body: dict | None = None) -> tuple:
        a = call(reg.url, method, path, body, headers=headers)
        return a.status, (a.body.get("error_code") if isinstance(a.body, dict) else None)

    try:
        reg.start()
        ids = {}
        for subject, who in ((orders, alice), (okey, alice), (pay, admin)):
            a = call(reg.url, "POST", f"/subjects/{subject}/versions", schema(subject),
                     headers=who)
            assert a.status == 200, (subject, a.body)
            ids[subject] = a.body["id"]
        denied = call(reg.url, "POST", f"/subjects/{pay}/versions", schema("x"),
                      headers=alice)
        assert (denied.status, denied.body) == (403, {
            "error_code": 40301,
            "message": f"User is denied operation Write on Subject: {pay}"})
        assert status("POST", f"/subjects/{orders}/versions", bob, schema("y")) == (403, 40301)
        assert status("DELETE", f"/subjects/{orders}", bob) == (403, 40301)
        assert status("PUT", f"/config/{orders}", bob, {"compatibility": "NONE"}) == \
            (403, 40301)
        assert status("GET", f"/subjects/{orders}/versions/latest", bob)[0] == 200
        assert status("POST", f"/subjects/{orders}", bob, schema(orders))[0] == 200  # lookup
        assert status("POST", f"/compatibility/subjects/{orders}/versions/latest", bob,
                      schema(orders))[0] == 200
        assert status("GET", f"/subjects/{okey}/versions", bob) == (403, 40301)
        assert status("GET", f"/schemas/ids/{ids[orders]}", bob)[0] == 200
        assert status("GET", f"/schemas/ids/{ids[okey]}/schema", bob) == (403, 40301)
        assert call(reg.url, "GET", f"/schemas/ids/{ids[orders]}/subjects",
                    headers=bob).body == [orders]
        # lists: only what each may read
        for who, expected in ((alice, {orders, okey}), (bob, {orders}), (carol, set()),
                              (admin, {orders, okey, pay})):
            listed = set(call(reg.url, "GET", "/subjects", headers=who).body)
            schemas = {s["subject"] for s in call(reg.url, "GET", "/schemas",
                                                  headers=who).body}
            if who is admin:  # (and the other tests' subjects)
                assert expected <= listed and expected <= schemas
            else:
                assert listed == schemas == expected
        # subject config: WRITE; global config: reading is open, changing needs WRITE on *
        assert status("PUT", f"/config/{okey}", alice, {"compatibility": "NONE"})[0] == 200
        assert status("GET", "/config", carol)[0] == 200
        assert status("PUT", "/config", alice, {"compatibility": "NONE"}) == (403, 40301)
        assert status("PUT", "/mode", alice, {"mode": "READONLY"}) == (403, 40301)
        assert status("GET", "/schemas/types", carol)[0] == 200
        assert status("GET", "/subjects", basic("carol", "wrong")) == (401, 401)
    finally:
        assert reg.stop() == 0


def test_permissions_options_are_checked(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("User:alice READ orders\nalice WRITE x\n")
    base = [sys.executable, "-m", "spool.cli.main", "registry", "--bootstrap-server",
            "127.0.0.1:1", "--listen", "http://127.0.0.1:0"]
    done = subprocess.run([*base, "--permissions", str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--permissions needs --authentication basic" in \
        done.stderr
    config = tmp_path / "c.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                      f'sasl.jaas.config={SCRAM_LOGIN} required username="r" password="p";\n')
    done = subprocess.run([*base, "--command-config", str(config), "--authentication",
                           "basic", "--permissions", str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and f"{bad}:2: the principal must be User:NAME" in \
        done.stderr


def test_basic_auth_checks_once_per_pair_and_forgets(cluster):
    """``BasicAuth`` in this process against the SCRAM broker: 20 concurrent requests with
    one pair make one broker check; a wrong password is checked (and refused) each time;
    a success is asked again once ``cache_s`` has passed."""
    import asyncio
    import time

    from spool.registry.auth import BasicAuth, Unauthorized
    from spool.security.client_config import ClientSecurity

    broker = cluster[0]
    security = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512")
    good = basic("alice", USERS["alice"])["Authorization"]
    wrong = basic("alice", "nope")["Authorization"]

    async def run() -> None:
        auth = BasicAuth(broker.bootstrap(), security, cache_s=1.0)
        started = time.monotonic()
        assert await asyncio.gather(*[auth(good) for _ in range(20)]) == ["alice"] * 20
        first = time.monotonic() - started
        assert auth.checks == 1
        started = time.monotonic()
        assert await auth(good) == "alice"
        assert auth.checks == 1 and time.monotonic() - started < first
        for n in (2, 3):
            with pytest.raises(Unauthorized):
                await auth(wrong)
            assert auth.checks == n
        deadline = time.monotonic() + 10
        while auth.checks == 3 and time.monotonic() < deadline:
            assert await auth(good) == "alice"
            await asyncio.sleep(0.1)
        assert auth.checks == 4

    asyncio.run(asyncio.wait_for(run(), 60))


def test_basic_auth_tries_each_bootstrap_broker(cluster):
    """An unreachable first bootstrap address is skipped; none reachable is 500/50001."""
    import asyncio

    from spool.registry.auth import BasicAuth
    from spool.registry.model import RegistryError
    from spool.security.client_config import ClientSecurity

    security = ClientSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256")
    good = basic("bob", USERS["bob"])["Authorization"]

    async def run() -> None:
        auth = BasicAuth(f"127.0.0.1:1, {cluster[0].bootstrap()}", security, timeout_s=5)
        assert await auth(good) == "bob"
        with pytest.raises(RegistryError) as e:
            await BasicAuth("127.0.0.1:1", security, timeout_s=5)(good)
        assert (e.value.status, e.value.error_code) == (500, 50001)
        assert "cannot check credentials" in e.value.message

    asyncio.run(asyncio.wait_for(run(), 60))
