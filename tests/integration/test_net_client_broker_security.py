"""spool.net.client against a real SASL/TLS broker (tests/helpers/secure_broker.py): what a node
and the CLI rely on when they talk to a secured listener.

One broker for the module, listeners SASL_PLAINTEXT and SASL_SSL (its certificate from a test
CA, for 127.0.0.1), PLAIN users and SCRAM credentials (formatted in), and
``connections.max.reauth.ms`` short enough to live through: PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512 and OAUTHBEARER (an unsecured JWS made from the JAAS options, as Kafka's
unsecured login handler) authenticate before the first request; a wrong password and an
unknown user get the broker's SASL_AUTHENTICATION_FAILED as an AuthenticationError and no
request of theirs is answered; a client that outlives its session re-authenticates on the same
connection (KIP-368: the broker would close an expired one).
"""

from __future__ import annotations

import asyncio

import pytest

from spool.net.client import AuthenticationError, NodeClient
from spool.protocol._generated import MetadataRequest
from spool.security.client_config import ClientSecurity
from tests.helpers.certs import Pki
from tests.helpers.secure_broker import SecureBroker

pytestmark = pytest.mark.timeout(120)

REAUTH_MS = 1500
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    server = pki.issue("CN=broker", hosts=("127.0.0.1",))
    b = SecureBroker(tmp_path_factory.mktemp("secure") / "data",
                     listeners=("SASL_PLAINTEXT", "SASL_SSL"),
                     plain_users={"alice": "alice-secret"},
                     scram_users={"bob": "bob-secret"},
                     mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
                     overrides={"ssl.keystore.type": "PEM",
                                "ssl.keystore.location": str(server.keystore_pem),
                                "connections.max.reauth.ms": str(REAUTH_MS)})
    b.start()
    yield b
    b.stop()


def security(broker, pki, listener: str, mechanism: str, user: str, password: str | None
             ) -> ClientSecurity:
    login = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    jaas = (f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{user}";'
            if mechanism == "OAUTHBEARER" else
            f'{login} required username="{user}" password="{password}";')
    props = {"security.protocol": listener, "sasl.mechanism": mechanism,
             "sasl.jaas.config": jaas}
    if listener == "SASL_SSL":
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem)}
    return ClientSecurity.from_properties(props)


def metadata(broker, listener: str, sec: ClientSecurity, *, after_s: float = 0.0):
    """Metadata v12 through a NodeClient; (answer or AuthenticationError, connections made).
    With ``after_s``, a second Metadata that long after the first (same client)."""
    host, port = broker.bootstrap(listener).rsplit(":", 1)

    async def go():
        c = NodeClient(host, int(port), security=sec)
        try:
            md = await c.request(MetadataRequest(topics=[]), 12)
            if after_s:
                await asyncio.sleep(after_s)
                md = await c.request(MetadataRequest(topics=[]), 12)
            return md, c.connects
        except AuthenticationError as e:
            return e, c.connects
        finally:
            await c.close()

    return asyncio.run(go())


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
    ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
    ("SASL_PLAINTEXT", "OAUTHBEARER", "carol", None),  # an unsecured JWS (development)
])
def test_each_mechanism_authenticates_before_the_first_request(broker, pki, listener,
                                                               mechanism, user, password):
    md, connects = metadata(broker, listener,
                            security(broker, pki, listener, mechanism, user, password))
    assert not isinstance(md, Exception), md
    assert [(b.host, b.port) for b in md.brokers] == [
        ("127.0.0.1", int(broker.bootstrap(listener).rsplit(":", 1)[1]))]
    assert connects == 1


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "wrong"), ("PLAIN", "mallory", "x"),
    ("SCRAM-SHA-256", "bob", "wrong"), ("SCRAM-SHA-512", "mallory", "x"),
])
def test_a_wrong_password_or_unknown_user_is_the_brokers_refusal(broker, pki, mechanism, user,
                                                                 password):
    got, _ = metadata(broker, "SASL_PLAINTEXT",
                      security(broker, pki, "SASL_PLAINTEXT", mechanism, user, password))
    assert isinstance(got, AuthenticationError), got
    assert f"(SASL_PLAINTEXT/{mechanism} as {user}): SASL_AUTHENTICATION_FAILED: " in str(got)
    assert "Authentication failed" in str(got)


def test_a_session_is_renewed_on_the_same_connection(broker, pki):
    """The broker gives a 1.5 s session; a request 2 s later still works on the first
    connection: the client re-authenticated before it (without, the broker closes the
    expired connection at that request: DisconnectedError)."""
    md, connects = metadata(broker, "SASL_SSL",
                            security(broker, pki, "SASL_SSL", "SCRAM-SHA-512", "bob",
                                     "bob-secret"), after_s=REAUTH_MS / 1000 + 0.5)
    assert not isinstance(md, Exception), md
    assert connects == 1
