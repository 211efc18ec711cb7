"""spool.security.client_config: Java client properties -> ClientSecurity, as Kafka reads them."""

from __future__ import annotations

import pytest

from spool.security.client_config import ClientConfigError, ClientSecurity, parse_jaas

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="al\\"ice-secret";')


def test_defaults_are_plaintext_with_kafkas_defaults():
    sec = ClientSecurity.from_properties({})
    assert (sec.protocol, sec.tls, sec.sasl, sec.sasl_mechanism) == (
        "PLAINTEXT", False, False, "GSSAPI")
    assert sec.endpoint_identification == "https"
    assert sec.ssl_context() is None


def test_sasl_ssl_scram_from_a_command_config():
    sec = ClientSecurity.from_properties({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM_JAAS, "ssl.truststore.type": "pem",
        "ssl.truststore.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "",
        "client.id": "tool", "request.timeout.ms": "5000"})
    assert (sec.protocol, sec.tls, sec.sasl) == ("SASL_SSL", True, True)
    assert (sec.sasl_mechanism, sec.username, sec.password) == (
        "SCRAM-SHA-512", "alice", 'al"ice-secret')
    assert (sec.truststore_type, sec.truststore_location) == ("PEM", "/etc/ca.pem")
    assert sec.endpoint_identification == ""
    assert sec.unknown == ("client.id", "request.timeout.ms")
    assert sec.describe() == "SASL_SSL/SCRAM-SHA-512 as alice"
    assert "secret" not in repr(sec)


def test_jaas_options_beyond_the_credentials_reach_the_mechanism():
    [entry] = parse_jaas('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                         'required unsecuredLoginStringClaim_sub="alice" '
                         'unsecuredLoginLifetimeSeconds=3600 ;')
    assert entry.control_flag == "required"
    assert dict(entry.options) == {"unsecuredLoginStringClaim_sub": "alice",
                                   "unsecuredLoginLifetimeSeconds": "3600"}
    sec = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": entry.login_module + ' required unsecuredLoginStringClaim_sub="a";'})
    assert sec.username is None and dict(sec.jaas_options) == {
        "unsecuredLoginStringClaim_sub": "a"}


@pytest.mark.parametrize(("props", "message"), [
    ({"security.protocol": "TLS"}, "security.protocol=TLS: expected one of PLAINTEXT"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI, Kafka's default, is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     'PLAIN needs username="..." and password="..."'),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
      "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                          "required;"},
     "sasl.jaas.config: OAUTHBEARER: unsecuredLoginStringClaim_sub is required"),
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS: expected PEM or PKCS12"),
    ({"ssl.endpoint.identification.algorithm": "ldaps"},
     "ssl.endpoint.identification.algorithm=ldaps"),
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols=TLSv1.1"),
    ({"sasl.jaas.config": "PlainLoginModule required username=\"a\""},
     "sasl.jaas.config: login module PlainLoginModule: missing ';' at the end"),
    ({"sasl.jaas.config": "PlainLoginModule always username=\"a\";"},
     "sasl.jaas.config: login module PlainLoginModule: control flag 'always' is not one of"),
    ({"sasl.jaas.config": "A required; B required;"},
     "JAAS config property contains 2 login modules, should be 1 module"),
    ({"ssl.keystore.certificate.chain": "-----BEGIN"}, "go together"),
])
def test_bad_properties_name_the_key(props, message):
    with pytest.raises(ClientConfigError, match=message.replace("(", r"\(")):
        ClientSecurity.from_properties(props)


def test_a_missing_truststore_file_names_the_key(tmp_path):
    sec = ClientSecurity.from_properties({"security.protocol": "SSL",
                                          "ssl.truststore.location": str(tmp_path / "nope.pem")})
    with pytest.raises(ClientConfigError, match="ssl.truststore.location=.*nope.pem: No such"):
        sec.ssl_context()
