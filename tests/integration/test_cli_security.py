"""The ``spool`` CLI against a secured broker, through ``--command-config``.

One broker for the module: an SSL listener requiring client certificates (mTLS), the
principal mapped from the certificate's subject (``CN=admin,OU=eng,...`` -> ``admin``),
and a SASL_PLAINTEXT listener (PLAIN users from the JAAS config, SCRAM users made with
``spool users scram set``); the StandardAuthorizer on with ``User:admin`` a super user.
Each command runs as a user runs it: ``spool ... --command-config FILE`` with Java client
properties (PKCS12 and PEM stores, PLAIN and SCRAM logins); what the authorizer refuses
shows Kafka's error name in one stderr line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.certs import PASSWORD, Pki
from tests.helpers.cli import spool_cli
from tests.helpers.secure_broker import PLAIN_LOGIN, SCRAM_LOGIN, SecureBroker

OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class Secured:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pki = Pki(tmp / "pki")
        server = self.pki.issue("CN=localhost", hosts=("127.0.0.1", "localhost"))
        self.broker = SecureBroker(
            tmp / "data", listeners=("SSL", "SASL_PLAINTEXT", "SASL_SSL"),
            plain_users={"alice": "alice-secret"},
            mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"), overrides={
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(server.keystore_pem),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.pki.ca_pem),
                "listener.name.ssl.ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT",
                "authorizer.class.name":
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
            })
        # admin: PKCS12 stores, types read from the files (Kafka's default type is JKS)
        admin = self.pki.issue("CN=admin,OU=eng,O=Acme")
        self.admin = self.write("admin", f"""security.protocol=SSL
ssl.truststore.location={self.pki.truststore_p12}
ssl.truststore.password={PASSWORD}
ssl.keystore.location={admin.p12}
ssl.keystore.password={PASSWORD}
""")
        # alice: PEM stores, her key encrypted
        alice = self.pki.issue("CN=Alice,OU=eng,O=Acme", key_password="alice-pw")
        self.alice = self.write("alice", f"""security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location={self.pki.ca_pem}
ssl.keystore.type=PEM
ssl.keystore.location={alice.keystore_pem}
ssl.key.password=alice-pw
""")
        # admin again, with Kafka's inline PEM keys (a value over several lines: \ escapes)
        def inline(text: str) -> str:
            return text.strip().replace("\n", "\\n\\\n")

        self.admin_inline = self.write("admin-inline", f"""security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.certificates={inline(self.pki.ca_text)}
ssl.keystore.type=PEM
ssl.keystore.certificate.chain={inline(admin.chain_text)}
ssl.keystore.key={inline(admin.key_text)}
""")
        other = Pki(tmp / "other-pki", "CN=Other CA")
        self.wrong_ca = self.write("wrong-ca", f"""security.protocol=SSL
ssl.truststore.location={other.ca_pem}
ssl.keystore.location={admin.p12}
ssl.keystore.password={PASSWORD}
""")

        sasl = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism={}\nsasl.jaas.config={} required " \
            'username="{}" password="{}";\n'
        self.alice_plain = self.write("alice-plain", sasl.format(
            "PLAIN", PLAIN_LOGIN, "alice", "alice-secret"))
        # carol: SCRAM-SHA-512 over SASL_SSL, the broker checked against a PKCS12 truststore
        sasl_ssl = (f"security.protocol=SASL_SSL\nssl.truststore.type=PKCS12\n"
                    f"ssl.truststore.location={self.pki.truststore_p12}\n"
                    f"ssl.truststore.password={PASSWORD}\n" + sasl.split("\n", 1)[1])
        self.carol = self.write("carol", sasl_ssl.format(
            "SCRAM-SHA-512", SCRAM_LOGIN, "carol", "carol-secret"))
        self.carol_wrong = self.write("carol-wrong", sasl_ssl.format(
            "SCRAM-SHA-512", SCRAM_LOGIN, "carol", "not-her-password"))
        self.dave_oauth = self.write("dave-oauth", f"""security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.jaas.config={OAUTH_LOGIN} required \\
  unsecuredLoginStringClaim_sub="dave" unsecuredLoginLifetimeSeconds="600";
""")

    def write(self, name: str, text: str) -> str:
        path = self.tmp / f"{name}.properties"
        path.write_text(text)
        return str(path)

    def spool(self, config: str, *args: str, stdin: str | None = None, check: bool = True,
              listener: str = "SSL") -> subprocess.CompletedProcess:
        """The command as a child process when it reads stdin or consumes (its SIGTERM
        handler), else in-process (``tests.helpers.cli``: no ~1 s start per call)."""
        tail = ["--bootstrap-server", self.broker.bootstrap(listener), "--command-config", config]
        if stdin is None and args[0] != "consume":
            proc = spool_cli(*args, *tail)
        else:
            proc = subprocess.run([sys.executable, "-m", "spool.cli.main", *args, *tail],
                                  capture_output=True, text=True, input=stdin, timeout=120)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc


@pytest.fixture(scope="module")
def sec(tmp_path_factory):
    s = Secured(tmp_path_factory.mktemp("cli-security"))
    s.broker.start()
    yield s
    s.broker.stop()


def one_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spool: "), proc.stderr
    return lines[0]


def test_a_broker_certificate_from_another_ca_is_one_line(sec) -> None:
    for args in (["topics", "list"], ["features", "describe"]):  # librdkafka, spool.net
        line = one_error(sec.spool(sec.wrong_ca, *args, "--timeout", "10", check=False))
        assert re.search("certificate.verify.failed", line, re.I), line
        assert line.endswith("(_SSL)"), line


def test_wire_commands_take_the_command_config(sec) -> None:
    for config in (sec.admin, sec.admin_inline):
        out = sec.spool(config, "features", "describe").stdout
        assert out.startswith("Feature: metadata.version\t")
        listed = sec.spool(config, "transactions", "list")
        assert listed.stdout.split() == ["TransactionalId", "Coordinator", "ProducerId", "State"]


def test_inline_pem_stores_work_for_librdkafka(sec) -> None:
    sec.spool(sec.admin_inline, "topics", "create", "inline-made")
    assert "inline-made" in sec.spool(sec.admin_inline, "topics", "list").stdout.split()


def test_acls_add_list_remove_and_what_they_allow(sec) -> None:
    sec.spool(sec.admin, "topics", "create", "orders", "--partitions", "1")
    sec.spool(sec.admin, "produce", "orders", stdin="o-1\n")
    refused = one_error(sec.spool(sec.alice, "consume", "orders", "--from-beginning",
                                  "--max-messages", "1", "--timeout", "10", check=False))
    assert refused.endswith("(TOPIC_AUTHORIZATION_FAILED)"), refused

    added = sec.spool(sec.admin, "acls", "add", "--allow-principal", "User:alice",
                      "--operation", "Read", "--operation", "Describe", "--topic", "orders",
                      "--group", "readers")
    topic = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    group = "ResourcePattern(resourceType=GROUP, name=readers, patternType=LITERAL)"
    entries = ("\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
               "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)")
    assert added.stdout == (f"Adding ACLs for resource `{topic}`: \n {entries} \n\n"
                            f"Adding ACLs for resource `{group}`: \n {entries} \n\n")
    listed = sec.spool(sec.admin, "acls", "list", "--topic", "orders")
    assert listed.stdout == f"Current ACLs for resource `{topic}`: \n {entries} \n\n"
    doc = json.loads(sec.spool(sec.admin, "acls", "list", "--group", "readers", "--json").stdout)
    assert doc == [{"resource_type": "GROUP", "resource_name": "readers",
                    "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
                    "operation": op, "permission_type": "ALLOW"} for op in ("READ", "DESCRIBE")]

    got = sec.spool(sec.alice, "consume", "orders", "--group", "readers", "--from-beginning",
                    "--max-messages", "1", "--timeout", "20")
    assert got.stdout == "o-1\n"
    refused = sec.spool(sec.alice, "produce", "orders", stdin="x\n", check=False)
    assert refused.returncode == 1 and refused.stderr.splitlines() == [
        "spool: line 1: not delivered: 'orders': Topic authorization failed "
        "(TOPIC_AUTHORIZATION_FAILED)", "spool: 0 records sent to 'orders', 1 failed (line 1)"]

    bob = sec.spool(sec.admin, "acls", "add", "--allow-principal", "User:bob", "--operation",
                    "Write", "--topic", "orders", "--json")
    assert json.loads(bob.stdout) == [{"resource_type": "TOPIC", "resource_name": "orders",
                                       "pattern_type": "LITERAL", "principal": "User:bob",
                                       "host": "*", "operation": "WRITE",
                                       "permission_type": "ALLOW"}]
    removed = sec.spool(sec.admin, "acls", "remove", "--allow-principal", "User:alice",
                        "--operation", "Describe", "--topic", "orders", "--force", "--json")
    assert json.loads(removed.stdout) == [{"resource_type": "TOPIC", "resource_name": "orders",
                                           "pattern_type": "LITERAL", "principal": "User:alice",
                                           "host": "*", "operation": "DESCRIBE",
                                           "permission_type": "ALLOW"}]
    left = sec.spool(sec.admin, "acls", "list", "--topic", "orders").stdout
    assert "operation=DESCRIBE" not in left and "operation=READ" in left
    sec.spool(sec.admin, "acls", "remove", "--topic", "orders", "--group", "readers", "--force")
    assert sec.spool(sec.admin, "acls", "list", "--topic", "orders", "--group",
                     "readers").stdout == ""


def test_security_commands_refused_without_cluster_acls(sec) -> None:
    for args in (["acls", "list"],
                 ["acls", "add", "--allow-principal", "User:alice", "--cluster"],
                 ["users", "scram", "describe"],
                 ["quotas", "describe"],
                 ["quotas", "set", "--user", "alice", "--add-config", "producer_byte_rate=1"]):
        line = one_error(sec.spool(sec.alice, *args, check=False))
        assert line.endswith("(CLUSTER_AUTHORIZATION_FAILED)"), (args, line)


def test_scram_users_set_describe_delete(sec) -> None:
    done = sec.spool(sec.admin, "users", "scram", "set", "--user", "bob", "--add-config",
                     "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
                     "SCRAM-SHA-512=[password=bob-secret]")
    assert done.stdout == "Completed updating config for user bob.\n"
    described = sec.spool(sec.admin, "users", "scram", "describe", "--user", "bob")
    assert described.stdout == ("SCRAM credential configs for user-principal 'bob' are "
                                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    deleted = sec.spool(sec.admin, "users", "scram", "delete", "--user", "bob",
                        "--delete-config", "SCRAM-SHA-512", "--json")
    assert json.loads(deleted.stdout) == {"user": "bob", "deleted": ["SCRAM-SHA-512"]}
    doc = json.loads(sec.spool(sec.admin, "users", "scram", "describe", "--json").stdout)
    assert {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-256",
                                            "iterations": 8192}]} in doc
    sec.spool(sec.admin, "users", "scram", "delete", "--user", "bob", "--delete-config",
              "SCRAM-SHA-256")
    line = one_error(sec.spool(sec.admin, "users", "scram", "describe", "--user", "bob",
                               check=False))
    assert line.endswith("(RESOURCE_NOT_FOUND)"), line
    made = sec.spool(sec.admin, "users", "scram", "set", "--user", "dave", "--add-config",
                     "SCRAM-SHA-256=[iterations=8192,password=d]", "--json")
    assert json.loads(made.stdout) == {"user": "dave", "set": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}


def test_quotas_set_describe_delete(sec) -> None:
    done = sec.spool(sec.admin, "quotas", "set", "--user", "alice", "--add-config",
                     "producer_byte_rate=1048576,consumer_byte_rate=20000000")
    assert done.stdout == "Completed updating config for user alice.\n"
    sec.spool(sec.admin, "quotas", "set", "--client-defaults", "--add-config",
              "request_percentage=50")
    described = sec.spool(sec.admin, "quotas", "describe", "--user", "alice")
    assert described.stdout == ("Quota configs for user-principal 'alice' are "
                                "consumer_byte_rate=2.0E7, producer_byte_rate=1048576.0\n")
    assert json.loads(sec.spool(sec.admin, "quotas", "describe", "--user", "alice",
                                "--json").stdout) == [
        {"entity": {"user": "alice"},
         "quotas": {"consumer_byte_rate": 20000000.0, "producer_byte_rate": 1048576.0}}]
    every = sec.spool(sec.admin, "quotas", "describe").stdout.splitlines()
    assert "Quota configs for the default client-id are request_percentage=50.0" in every
    line = one_error(sec.spool(sec.admin, "quotas", "set", "--user", "alice",
                               "--delete-config", "request_percentage", check=False))
    assert line.endswith("Invalid config(s): request_percentage (INVALID_CONFIG)"), line
    done = sec.spool(sec.admin, "quotas", "set", "--user", "alice", "--delete-config",
                     "producer_byte_rate,consumer_byte_rate", "--json")
    assert json.loads(done.stdout) == {"entity": {"user": "alice"}, "set": {},
                                       "removed": ["consumer_byte_rate", "producer_byte_rate"]}
    done = sec.spool(sec.admin, "quotas", "set", "--user", "erin", "--client-id", "app",
                     "--add-config", "producer_byte_rate=1024", "--json")
    assert json.loads(done.stdout) == {"entity": {"user": "erin", "client-id": "app"},
                                       "set": {"producer_byte_rate": 1024.0}, "removed": []}
    assert sec.spool(sec.admin, "quotas", "describe", "--user", "alice").stdout == ""


def test_a_scram_user_made_with_the_cli_logs_in_over_sasl_ssl(sec) -> None:
    sec.spool(sec.admin, "users", "scram", "set", "--user", "carol", "--add-config",
              "SCRAM-SHA-512=[password=carol-secret]")
    sec.spool(sec.admin, "acls", "add", "--allow-principal", "User:carol", "--operation",
              "Describe", "--cluster")
    for args in (["topics", "list"], ["features", "describe"]):  # librdkafka, spool.net
        sec.spool(sec.carol, *args, listener="SASL_SSL")
        line = one_error(sec.spool(sec.carol_wrong, *args, "--timeout", "10",
                                   listener="SASL_SSL", check=False))
        assert line.endswith("(SASL_AUTHENTICATION_FAILED)"), line
    # acls list asks DESCRIBE on the cluster: carol has it, alice (PLAIN) has not
    sec.spool(sec.carol, "acls", "list", "--cluster", listener="SASL_SSL")
    line = one_error(sec.spool(sec.alice_plain, "acls", "list", listener="SASL_PLAINTEXT",
                               check=False))
    assert line.endswith("(CLUSTER_AUTHORIZATION_FAILED)"), line


def test_an_unsecured_oauthbearer_token_names_its_subject(sec) -> None:
    sec.spool(sec.admin, "topics", "create", "dave-only")
    sec.spool(sec.admin, "acls", "add", "--allow-principal", "User:dave", "--operation",
              "Describe", "--topic", "dave-only")
    for args in (["topics", "list"], ["acls", "list"]):  # librdkafka, spool.net
        proc = sec.spool(sec.dave_oauth, *args, listener="SASL_PLAINTEXT", check=False)
        if args[0] == "topics":
            assert proc.returncode == 0 and proc.stdout.split() == ["dave-only"], proc.stderr
        else:  # the token's sub is the principal: User:dave, without cluster ACLs
            assert one_error(proc).endswith("(CLUSTER_AUTHORIZATION_FAILED)"), proc.stderr
