"""spool.net.client's TLS, as Kafka's client does it (certificates from tests/helpers/certs.py,
the scripted peer of tests/helpers/scripted_peer.py behind an ssl server context): the server
certificate is verified against the truststore (PEM file, PKCS12, inline) and its name against
the host unless ``ssl.endpoint.identification.algorithm`` is empty; a client certificate (mTLS)
is presented from the keystore (PKCS12, PEM file, inline); SASL runs inside TLS.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from spool.net.client import AuthenticationError, NodeClient
from spool.protocol._generated import ApiVersionsRequest
from spool.security.client_config import ClientSecurity
from tests.helpers.certs import PASSWORD, Pki
from tests.helpers.scripted_peer import ScriptedSaslPeer

pytestmark = pytest.mark.timeout(60)


def versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="t", client_software_version="1")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    pki.server = pki.issue("CN=broker", hosts=("127.0.0.1",))
    pki.localhost_only = pki.issue("CN=elsewhere", hosts=("localhost",))
    pki.alice = pki.issue("CN=alice,O=Acme")
    return pki


def server_context(ident, pki, require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ident.keystore_pem)
    if require_client_cert:
        ctx.load_verify_locations(pki.ca_pem)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def tls_exchange(props: dict, server: ssl.SSLContext) -> tuple[object, ScriptedSaslPeer]:
    """One ApiVersions through a NodeClient with ``props``: the answer (or the
    AuthenticationError) and the peer."""
    sec = ClientSecurity.from_properties(props)

    async def go():
        peer = ScriptedSaslPeer()
        client = NodeClient("127.0.0.1", await peer.start(server), security=sec)
        try:
            return await client.request(versions(), 3), peer
        except AuthenticationError as e:
            return e, peer
        finally:
            await client.close()
            peer.close()

    return asyncio.run(go())


def test_sasl_ssl_verifies_the_server_and_authenticates_inside_tls(pki):
    got, peer = tls_exchange({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                            'required username="alice" password="alice-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem)},
        server_context(pki.server, pki))
    assert getattr(got, "error_code", got) == 0
    assert [k for _, k in peer.seen] == [18, 17, 36, 18]


@pytest.mark.parametrize("trust", ["pkcs12", "inline"])
def test_the_truststore_as_pkcs12_or_inline_pem(pki, trust):
    props = {"security.protocol": "SSL"} | (
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki.truststore_p12),
         "ssl.truststore.password": PASSWORD} if trust == "pkcs12" else
        {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_text})
    got, peer = tls_exchange(props, server_context(pki.server, pki))
    assert getattr(got, "error_code", got) == 0
    assert [k for _, k in peer.seen] == [18]  # SSL: no SASL exchange


def test_a_server_certificate_of_another_ca_is_refused(pki, tmp_path):
    other = Pki(tmp_path / "other")
    got, peer = tls_exchange({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                              "ssl.truststore.location": str(other.ca_pem)},
                             server_context(pki.server, pki))
    assert isinstance(got, AuthenticationError), got
    assert "TLS handshake failed: CERTIFICATE_VERIFY_FAILED" in str(got), str(got)
    assert peer.seen == []


def test_the_host_name_is_checked_unless_endpoint_identification_is_empty(pki):
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki.ca_pem)}
    got, _ = tls_exchange(props, server_context(pki.localhost_only, pki))
    assert isinstance(got, AuthenticationError), got
    assert "CERTIFICATE_VERIFY_FAILED (IP address mismatch" in str(got), str(got)
    got, _ = tls_exchange(props | {"ssl.endpoint.identification.algorithm": ""},
                          server_context(pki.localhost_only, pki))
    assert getattr(got, "error_code", got) == 0


@pytest.mark.parametrize("keystore", ["PKCS12", "PEM", "inline"])
def test_the_client_certificate_from_the_keystore(pki, keystore):
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(pki.ca_pem)} | {
        "PKCS12": {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.alice.p12),
                   "ssl.keystore.password": PASSWORD},
        "PEM": {"ssl.keystore.type": "PEM", "ssl.keystore.location":
                str(pki.alice.keystore_pem)},
        "inline": {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain":
                   pki.alice.chain_text, "ssl.keystore.key": pki.alice.key_text},
    }[keystore]
    got, peer = tls_exchange(props, server_context(pki.server, pki, require_client_cert=True))
    assert getattr(got, "error_code", got) == 0
    assert peer.client_subjects == [{"commonName": "alice", "organizationName": "Acme"}]


def test_a_server_that_requires_a_client_certificate_refuses_one_without(pki):
    """TLS 1.3 finishes the client's handshake before the server checks for a certificate:
    the refusal arrives as the connection closing before any answer, reported as an
    authentication failure that names the missing keystore."""
    got, peer = tls_exchange({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                              "ssl.truststore.location": str(pki.ca_pem)},
                             server_context(pki.server, pki, require_client_cert=True))
    assert isinstance(got, AuthenticationError), got
    assert ("authentication failed (SSL): TLS: the peer closed the connection before answering "
            "(does it require a client certificate? ssl.keystore.* is not set)") in str(got)
    assert peer.seen == []


def test_stores_renewed_in_place_are_read_again_at_the_next_connection(pki, tmp_path):
    """The server moves to a certificate of a new CA and the client's truststore file is
    replaced in place: the same NodeClient's next connection trusts it (Kafka reloads changed
    store files too)."""
    trust = tmp_path / "trust.pem"
    trust.write_bytes(pki.ca_pem.read_bytes())
    renewed = Pki(tmp_path / "renewed")
    sec = ClientSecurity.from_properties({"security.protocol": "SSL",
                                          "ssl.truststore.type": "PEM",
                                          "ssl.truststore.location": str(trust)})

    async def go():
        first, second = ScriptedSaslPeer(), ScriptedSaslPeer()
        port = await first.start(server_context(pki.server, pki))
        c = NodeClient("127.0.0.1", port, security=sec, reconnect_backoff_ms=0)
        try:
            a = await c.request(versions(), 3)
            await c.close()
            first.close()
            c.port = await second.start(server_context(
                renewed.issue("CN=broker", hosts=("127.0.0.1",)), renewed))
            trust.write_bytes(renewed.ca_pem.read_bytes())
            b = await c.request(versions(), 3)
            return a.error_code, b.error_code, c.connects
        finally:
            await c.close()
            second.close()

    assert asyncio.run(go()) == (0, 0, 2)
