"""``spool.registry.group_wire``: the registry's librdkafka config read back for Spool's
client, and the ``consumer`` protocol's assignment bytes as the coordinator returns them.

The registry gets its configuration as ``--command-config`` Kafka client properties turned
into librdkafka's keys (``spool.cli.command_config``); ``wire_security`` must give back
what ``ClientSecurity.from_properties`` reads from the same properties, whatever the
store forms (PEM files, inline PEM, PKCS12) and mechanisms.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from spool.cli import command_config as cc
from spool.protocol._generated.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from spool.registry.group_wire import assigned, bootstrap_addresses, wire_security
from spool.security.client_config import ClientConfigError, ClientSecurity
from spool.security.sasl.oauthbearer import unsecured_login
from spool.util.properties import parse_properties
from tests.helpers.certs import PASSWORD, Pki

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("group-wire-pki"))


def _both(text: str, tmp_path: Path) -> tuple[ClientSecurity, ClientSecurity]:
    """(what the registry's Spool client uses, what spool.net reads from the properties)."""
    path = tmp_path / "client.properties"
    path.write_text(text)
    conf = {"bootstrap.servers": "127.0.0.1:9092", **cc.load(str(path)).librdkafka()}
    return wire_security(conf), ClientSecurity.from_properties(parse_properties(text))


def _same_tls(ours: ClientSecurity, theirs: ClientSecurity) -> None:
    assert ours.protocol == theirs.protocol
    assert ours.endpoint_identification == theirs.endpoint_identification
    a, b = ours.ssl_context(), theirs.ssl_context()
    assert a is not None and b is not None
    assert a.get_ca_certs() == b.get_ca_certs() and a.get_ca_certs()
    assert a.check_hostname == b.check_hostname
    mine, reference = ours._keystore_pem(), theirs._keystore_pem()
    assert (mine is None) == (reference is None)
    if mine is not None and reference is not None:
        assert (x509.load_pem_x509_certificates(mine[0])
                == x509.load_pem_x509_certificates(reference[0]))
        assert ours.key_password == theirs.key_password


def test_sasl_ssl_scram_with_a_pem_truststore(tmp_path: Path, pki: Pki) -> None:
    ours, theirs = _both(
        f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config={SCRAM} required username="registry" password="s3 cret";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n", tmp_path)
    _same_tls(ours, theirs)
    assert (ours.sasl_mechanism, ours.username, ours.password) == (
        "SCRAM-SHA-512", "registry", "s3 cret")


def test_ssl_client_certificates_in_every_form(tmp_path: Path, pki: Pki) -> None:
    alice = pki.issue("CN=alice")
    bob = pki.issue("CN=bob", key_password="key-secret")
    forms = [
        # one PEM file, key and chain (librdkafka: the same file twice)
        f"ssl.keystore.type=PEM\nssl.keystore.location={alice.keystore_pem}\n",
        # ... its key encrypted
        f"ssl.keystore.type=PEM\nssl.keystore.location={bob.keystore_pem}\n"
        f"ssl.key.password=key-secret\n",
        # inline (librdkafka: the chain as a file, the key in memory)
        "ssl.keystore.type=PEM\nssl.keystore.certificate.chain="
        + alice.chain_text.replace("\n", "\\n\\\n") + "\nssl.keystore.key="
        + alice.key_text.replace("\n", "\\n\\\n") + "\n",
        # PKCS12 key store and trust store (librdkafka: the trust as a PEM file)
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={alice.p12}\n"
        f"ssl.keystore.password={PASSWORD}\n",
    ]
    for n, form in enumerate(forms):
        trust = (f"ssl.truststore.type=PKCS12\nssl.truststore.location={pki.truststore_p12}\n"
                 f"ssl.truststore.password={PASSWORD}\n" if n == 3 else
                 f"ssl.truststore.location={pki.ca_pem}\n")
        ours, theirs = _both(f"security.protocol=SSL\n{trust}{form}", tmp_path)
        _same_tls(ours, theirs)
        assert ours._keystore_pem() is not None, form


def test_hostname_check_off(tmp_path: Path, pki: Pki) -> None:
    ours, theirs = _both(f"security.protocol=SSL\nssl.truststore.location={pki.ca_pem}\n"
                         "ssl.endpoint.identification.algorithm=\n", tmp_path)
    _same_tls(ours, theirs)
    assert ours.endpoint_identification == ""


def test_oauthbearer_unsecured_tokens(tmp_path: Path) -> None:
    ours, theirs = _both(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f'sasl.jaas.config={OAUTH} required unsecuredLoginStringClaim_sub="registry" '
        'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginLifetimeSeconds="600" '
        'unsecuredLoginExtension_traceId="abc";\n', tmp_path)
    assert ours.sasl_mechanism == theirs.sasl_mechanism == "OAUTHBEARER"
    mine, reference = unsecured_login(ours.jaas_options), unsecured_login(theirs.jaas_options)
    assert (mine.principal, mine.claims, mine.lifetime_s, mine.extensions) == (
        reference.principal, reference.claims, reference.lifetime_s, reference.extensions)
    assert mine.claims == {"sub": "registry", "scope": ["read", "write"]}


def test_plaintext_and_librdkafkas_own_spellings() -> None:
    assert wire_security({"bootstrap.servers": "b:1"}) == ClientSecurity()
    sec = wire_security({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "plain",
                         "sasl.username": "u", "sasl.password": "p", "log_level": 0,
                         "ssl.ca.location": "/ignored/without/tls"})
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "PLAIN", "u", "p")
    assert bootstrap_addresses({"bootstrap.servers": " a:1,[::1]:2 , SASL_SSL://c:3"}) == [
        ("a", 1), ("::1", 2), ("c", 3)]


@pytest.mark.parametrize(("conf", "named"), [
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.keytab": "/k"}, "GSSAPI"),
    ({"security.protocol": "SSL", "enable.ssl.certificate.verification": False},
     "enable.ssl.certificate.verification"),
    ({"security.protocol": "SSL", "ssl.ca.location": "probe"}, "ssl.ca.location"),
    ({"security.protocol": "SSL", "ssl.crl.location": "/crl.pem"}, "ssl.crl.location"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
      "sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.method"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
     "enable.sasl.oauthbearer.unsecure.jwt"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "oauth_cb": print},
     "oauth_cb"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "username"),
    ({"security.protocol": "WHATEVER"}, "security.protocol"),
])
def test_what_cannot_be_mapped_is_named(conf: dict, named: str) -> None:
    with pytest.raises(ClientConfigError, match=named):
        wire_security({"bootstrap.servers": "b:1", **conf})


def test_no_bootstrap_address() -> None:
    for servers in ("", "host-without-port", "h:port"):
        with pytest.raises(ClientConfigError, match="bootstrap.servers"):
            bootstrap_addresses({"bootstrap.servers": servers})


def _assignment(version: int, parts: dict[str, list[int]], tail: bytes = b"") -> bytes:
    msg = ConsumerProtocolAssignment(
        assigned_partitions=[TopicPartition(topic=t, partitions=ps) for t, ps in parts.items()],
        user_data=b"sticky")
    body = msg.to_bytes(min(version, 3)) if version >= 0 else b""
    return version.to_bytes(2, "big", signed=True) + body + tail


def test_assignment_bytes_of_every_version() -> None:
    parts = {"_schemas": [0], "other": [1, 2]}
    for version in range(4):
        assert assigned(_assignment(version, parts)) == [("_schemas", [0]), ("other", [1, 2])]
    # a newer version is read as the newest known (its new fields come after)
    assert assigned(_assignment(7, parts, tail=b"\x00\x00\x00\x01")) == [
        ("_schemas", [0]), ("other", [1, 2])]
    # nothing assigned yet (a rebalance), a negative version, garbage: no partition
    for data in (b"", b"\x00", _assignment(-1, {}), b"\x00\x00\xff\xff\xff\x7f"):
        assert assigned(data) == []
