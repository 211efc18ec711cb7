"""``--command-config``: Java client properties read, checked and mapped to librdkafka."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from spool.cli import command_config as cc
from spool.cli.command_config import CommandConfigError
from spool.util.properties import parse_properties

PEM = serialization.Encoding.PEM


def _cert(subject: str, issuer_key=None, issuer: str | None = None, ca: bool = False):
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer or subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=1))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    return key, builder.sign(issuer_key or key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca = _cert("Test CA", ca=True)
    key, cert = _cert("alice", ca_key, "Test CA")
    files = {
        "ca.pem": ca.public_bytes(PEM),
        "ca.p12": pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca, b"ca")], serialization.BestAvailableEncryption(b"tpw")),
        "client.p12": pkcs12.serialize_key_and_certificates(
            b"alice", key, cert, [ca], serialization.BestAvailableEncryption(b"kpw")),
        "client.pem": key.private_bytes(PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.BestAvailableEncryption(b"keypw"))
        + cert.public_bytes(PEM),
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return {name: d / name for name in files}


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def test_properties_file_syntax() -> None:
    text = ("# comment\n! also a comment\n  security.protocol = SASL_SSL\n"
            "sasl.mechanism:PLAIN\nclient.id  spool\\u0021\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
            "    required username=\"alice\" \\\n    password=\"a=b\\\\c\";\n"
            "empty=\n")
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "client.id": "spool!",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="a=b\\c";',
        "empty": "",
    }


def test_sasl_ssl_scram_with_pem_truststore(tmp_path: Path, pki) -> None:
    path = write(tmp_path, f"""security.protocol=SASL_SSL
ssl.truststore.type=PEM
ssl.truststore.location={pki['ca.pem']}
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
  username="admin" password="s3cret";
""")
    assert cc.load(path).librdkafka() == {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(pki["ca.pem"]),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "s3cret",
    }


def test_pkcs12_truststore_becomes_a_pem_file_and_keystore_passes_through(
        tmp_path: Path, pki) -> None:
    path = write(tmp_path, f"""security.protocol=SSL
ssl.truststore.type=PKCS12
ssl.truststore.location={pki['ca.p12']}
ssl.truststore.password=tpw
ssl.keystore.type=PKCS12
ssl.keystore.location={pki['client.p12']}
ssl.keystore.password=kpw
ssl.endpoint.identification.algorithm=
""")
    conf = cc.load(path).librdkafka()
    ca_file = conf.pop("ssl.ca.location")
    assert Path(ca_file).read_bytes() == pki["ca.pem"].read_bytes()
    assert os.stat(ca_file).st_mode & 0o077 == 0
    assert conf == {
        "security.protocol": "ssl",
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.keystore.location": str(pki["client.p12"]),
        "ssl.keystore.password": "kpw",
    }


def test_pem_keystore_with_encrypted_key(tmp_path: Path, pki) -> None:
    base = (f"security.protocol=SSL\nssl.truststore.location={pki['ca.pem']}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={pki['client.pem']}\n")
    conf = cc.load(write(tmp_path, base + "ssl.key.password=keypw\n")).librdkafka()
    assert (conf["ssl.certificate.location"], conf["ssl.key.location"],
            conf["ssl.key.password"]) == (str(pki["client.pem"]),) * 2 + ("keypw",)
    with pytest.raises(CommandConfigError, match="encrypted and ssl.key.password is not set"):
        cc.load(write(tmp_path, base))
    with pytest.raises(CommandConfigError, match="wrong ssl.key.password"):
        cc.load(write(tmp_path, base + "ssl.key.password=nope\n"))


def test_store_types_are_read_from_the_files(tmp_path: Path, pki) -> None:
    conf = cc.load(write(tmp_path, f"""security.protocol=SSL
ssl.truststore.location={pki['ca.p12']}
ssl.truststore.password=tpw
ssl.keystore.location={pki['client.p12']}
ssl.keystore.password=kpw
"""))
    assert conf.keystore_type == "PKCS12"  # no type given: Kafka's JKS default is not assumed
    assert conf.ca_pem == pki["ca.pem"].read_text()
    # spool.net's reading of the same file (wire commands) has the types filled in
    assert (conf.security.truststore_type, conf.security.keystore_type) == ("PKCS12", "PKCS12")
    ctx = conf.security.ssl_context()
    assert ctx is not None
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "Test CA"),),)]


def test_oauthbearer_unsecured_maps_to_librdkafka(tmp_path: Path) -> None:
    conf = cc.load(write(tmp_path, """security.protocol=SASL_PLAINTEXT
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
  unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",read,write" \\
  unsecuredLoginLifetimeSeconds="600" unsecuredLoginExtension_traceId="42";
"""))
    assert conf.oauth is not None and conf.oauth.principal == "alice"
    assert conf.librdkafka() == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principalClaimName=sub principal=alice lifeSeconds=600 "
                                   "scopeClaimName=scope scope=read,write extension_traceId=42",
    }


@pytest.mark.parametrize("text, message", [
    ("bootstrap.servers=x:1\n", "unknown key 'bootstrap.servers'"),
    ("security.protocol=TLS\n", "security.protocol=TLS is not one of"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.jaas.config=x required;\n",
     "sasl.mechanism=GSSAPI is not supported"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "needs sasl.jaas.config"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=a password=b;\n",
     "ScramLoginModule does not log in with sasl.mechanism=PLAIN"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
     "org.apache.kafka.common.security.plain.PlainLoginModule required username=a password=b\n",
     "PlainLoginModule: missing ';' at the end"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
     "org.apache.kafka.common.security.plain.PlainLoginModule required username=a;\n",
     "password is not set"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
     "org.apache.kafka.common.security.plain.PlainLoginModule required a=b; X required;\n",
     "2 login modules"),
    ("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x\n",
     "cannot read ssl.truststore.location /x"),
    ("security.protocol=PLAINTEXT\nssl.truststore.location=/x\n",
     "'ssl.truststore.location' is set but security.protocol=PLAINTEXT uses no TLS"),
])
def test_refusals_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CommandConfigError, match=message) as info:
        cc.load(path)
    assert str(info.value).startswith(f"command config {path}: ")


def test_store_refusals(tmp_path: Path, pki) -> None:
    with pytest.raises(CommandConfigError, match="JKS is not supported"):
        cc.load(write(tmp_path, f"security.protocol=SSL\nssl.truststore.type=JKS\n"
                                f"ssl.truststore.location={pki['ca.p12']}\n"))
    with pytest.raises(CommandConfigError, match="wrong ssl.keystore.password"):
        cc.load(write(tmp_path, f"security.protocol=SSL\nssl.keystore.location="
                                f"{pki['client.p12']}\nssl.keystore.password=bad\n"))
    with pytest.raises(CommandConfigError, match="cannot read command config /nonexistent"):
        cc.load("/nonexistent/client.properties")


def test_cli_refuses_a_bad_command_config_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "sasl.mechanizm=PLAIN\n")
    proc = subprocess.run(
        [sys.executable, "-m", "spool.cli.main", "topics", "list", "--command-config", path,
         "--bootstrap-server", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"spool: command config {path}: unknown key 'sasl.mechanizm' (understood: "
        + ", ".join(sorted(cc.KNOWN_KEYS)) + ")"]


def test_every_command_that_talks_to_a_broker_takes_a_command_config() -> None:
    import typer.main

    from spool.cli.main import app

    def walk(cmd, path: str):
        if hasattr(cmd, "commands"):  # a group
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, {p.name for p in cmd.params}

    commands = dict(walk(typer.main.get_command(app), "spool"))
    talking = {path for path, params in commands.items() if "bootstrap" in params}
    assert {"spool acls add", "spool users scram set", "spool quotas describe",
            "spool topics list", "spool produce", "spool cluster status"} <= talking
    assert sorted(p for p in talking if "command_config" not in commands[p]) == []
