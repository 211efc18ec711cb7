"""A TLS listener's context from Kafka's ssl.* keys: what loads, and what is refused."""

from __future__ import annotations

import ssl

import pytest

from spool.security.tls import TlsConfigError, openssl_cipher, server_context, server_tls
from tests.helpers.certs import PASSWORD, Pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    pki.server = pki.issue("CN=localhost")
    pki.locked = pki.issue("CN=locked", key_password="secret")
    return pki


def pem(pki, **more) -> dict:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.keystore_pem),
            **more}


def error(config: dict) -> str:
    with pytest.raises(TlsConfigError) as e:
        server_context(config.get)
    return str(e.value)


def test_every_keystore_form_loads(pki):
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": pki.server.chain_text,
              "ssl.keystore.key": pki.server.key_text}
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.server.p12),
           "ssl.keystore.password": PASSWORD}
    locked = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.locked.keystore_pem),
              "ssl.key.password": "secret"}
    for config in (pem(pki), inline, p12, locked):
        assert server_context(config.get).verify_mode == ssl.CERT_NONE


def test_client_auth_and_truststores(pki):
    required = server_context(pem(pki, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(pki.truststore_p12),
        "ssl.truststore.password": PASSWORD}).get)
    assert required.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in required.get_ca_certs()] == [((("commonName",
                                                                  "Spool Test CA"),),)]
    requested = server_context(pem(pki, **{
        "ssl.client.auth": "requested", "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pki.ca_text}).get)
    assert requested.verify_mode == ssl.CERT_OPTIONAL
    assert len(requested.get_ca_certs()) == 1


def test_protocols_and_cipher_suites(pki):
    ctx = server_context(pem(pki, **{"ssl.enabled.protocols": "TLSv1.3"}).get)
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_3,) * 2
    ctx = server_context(pem(pki, **{
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}).get)
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed
    assert "ECDHE-ECDSA-AES128-GCM-SHA256" in [c["name"] for c in ctx.get_ciphers()]
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == (
        "ECDHE-RSA-CHACHA20-POLY1305")
    assert openssl_cipher("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"


def test_refused_with_the_key_named(pki):
    assert "ssl.keystore.type=JKS (Kafka's default)" in error(
        {"ssl.keystore.location": str(pki.server.p12)})
    assert error({}).startswith("no keystore: set ssl.keystore.location")
    assert "cannot be used (wrong ssl.key.password" in error(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.locked.keystore_pem),
         "ssl.key.password": "wrong"})
    assert error({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(
        pki.locked.keystore_pem)}) == "the private key is encrypted: set ssl.key.password"
    assert "cannot open the PKCS12 store (wrong password?)" in error(
        {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.server.p12),
         "ssl.keystore.password": "wrong"})
    assert "ssl.keystore.location=/nonexistent: cannot read it" in error(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent"})
    assert error(pem(pki, **{"ssl.enabled.protocols": "TLSv1.1"})) == (
        "ssl.enabled.protocols=TLSv1.1: Spool serves TLSv1.2 and TLSv1.3 only")
    assert error(pem(pki, **{"ssl.cipher.suites": "TLS_NOPE_WITH_NOTHING"})) == (
        "ssl.cipher.suites: TLS_NOPE_WITH_NOTHING is not a cipher suite OpenSSL has")
    assert "go together" in error({"ssl.keystore.type": "PEM",
                                   "ssl.keystore.key": pki.server.key_text})
    with pytest.raises(TlsConfigError, match="ssl.principal.mapping.rules=RULE:x: Invalid rule"):
        server_tls(pem(pki, **{"ssl.principal.mapping.rules": "RULE:x"}).get, "SSL")


def test_sasl_ssl_reads_only_the_listeners_own_client_auth(pki):
    config = pem(pki, **{"ssl.client.auth": "required"})
    assert server_tls(config.get, "SASL_SSL").context.verify_mode == ssl.CERT_NONE
    assert server_tls(config.get, "SASL_SSL").mapper is None
    assert server_tls(config.get, "SSL").context.verify_mode == ssl.CERT_REQUIRED
