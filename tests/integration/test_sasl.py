"""SASL on a real broker: the clients users run, and what a hostile client sees.

One broker for the module (``tests.helpers.secure_broker``): SASL_PLAINTEXT, PLAINTEXT
and SASL_SSL listeners; alice is a PLAIN user, has SCRAM-SHA-256/512 credentials, and
OAUTHBEARER takes unsecured JWS tokens (development mode) on SASL_PLAINTEXT and JWTs
signed by a key of a JWKS file on SASL_SSL.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import subprocess
import time
import uuid

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from cryptography.hazmat.primitives.asymmetric import rsa

from spool.protocol._generated import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from spool.protocol._generated import metadata_request as mr
from spool.protocol.errors import Errors
from spool.security.sasl.oauthbearer import unsecured_token
from spool.security.sasl.scram import ScramClient
from spool.security.scram import ScramMechanism
from tests.helpers.raw_client import RawClient
from tests.helpers.secure_broker import SecureBroker

ALICE = ("alice", "alice-secret")
# KIP-368 on SCRAM-SHA-512 over SASL_PLAINTEXT only (the other mechanisms' sessions last)
REAUTH_KEY = "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms"
REAUTH_MS = 1000
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# the client matrix: (listener, mechanism); OAUTHBEARER with unsecured JWS tokens
MATRIX = [("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
          ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "OAUTHBEARER")]


@pytest.fixture(scope="module")
def idp(tmp_path_factory):
    """An identity provider's signing key and its JWKS file (validated OAUTHBEARER)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = tmp_path_factory.mktemp("idp") / "jwks.json"
    path.write_text(json.dumps({"keys": [{**jwk, "kid": "idp-1", "alg": "RS256"}]}))
    return key, path


@pytest.fixture(scope="module")
def broker(tmp_path_factory, idp):
    validated = {  # the SASL_SSL listener's OAUTHBEARER takes signed JWTs only
        "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.sasl_ssl.sasl.oauthbearer.jwks.endpoint.url": f"file://{idp[1]}",
        "listener.name.sasl_ssl.sasl.oauthbearer.expected.audience": "spool",
        "listener.name.sasl_ssl.sasl.oauthbearer.expected.issuer": "https://idp.test"}
    b = SecureBroker(tmp_path_factory.mktemp("sasl") / "data",
                     listeners=("SASL_PLAINTEXT", "PLAINTEXT", "SASL_SSL"),
                     plain_users=dict([ALICE]), scram_users=dict([ALICE]),
                     mechanisms=MECHANISMS, log_level="INFO",
                     overrides={REAUTH_KEY: str(REAUTH_MS), **validated})
    b.start()
    yield b
    b.stop()


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _raw(broker: SecureBroker) -> RawClient:
    return RawClient(broker.bootstrap("SASL_PLAINTEXT"))


def _plain_token(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


# ---- clients


@pytest.mark.parametrize(("listener", "mechanism"), MATRIX)
def test_confluent_kafka_produces_and_consumes(broker, listener, mechanism):
    topic = _topic()
    conf = broker.confluent("alice", mechanism, listener)
    p = Producer(conf)
    p.produce(topic, b"hello")
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        msg = None
        for _ in range(50):
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"hello"
    finally:
        c.close()


@pytest.mark.parametrize(("listener", "mechanism"), MATRIX[:3])
def test_kcat_produces_and_consumes(broker, listener, mechanism):
    """Debian's kcat (librdkafka 2.0.2: SaslAuthenticate v0, and SCRAM's final nonce sent as
    <client nonce><server nonce> as Kafka's endsWith check allows). SCRAM-SHA-512 goes over
    SASL_SSL: on SASL_PLAINTEXT its sessions end after REAUTH_MS, and a v0 client, which
    cannot re-authenticate, is disconnected then, as Kafka does (kcat exits on that)."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: apt-get install kcat (.ci/run does)"
    topic = _topic()
    conf = broker.confluent("alice", mechanism, listener)
    auth = ["-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        auth += ["-X", f"{key}={value}"]
    produced = subprocess.run([kcat, *auth, "-t", topic, "-P"], input="one\ntwo\n",
                              capture_output=True, text=True, timeout=30, check=False)
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.stderr
    consumed = subprocess.run([kcat, *auth, "-t", topic, "-C", "-e", "-q"], capture_output=True,
                              text=True, timeout=30, check=False)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["one", "two"]


@pytest.mark.parametrize(("listener", "mechanism"), MATRIX)
def test_kafka_python_produces_and_consumes(broker, listener, mechanism):
    import kafka

    topic = _topic()
    kw = broker.kafka_python("alice", mechanism, listener)
    producer = kafka.KafkaProducer(**kw)
    try:
        producer.send(topic, b"hello").get(timeout=15)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest",
                                   consumer_timeout_ms=15000, **kw)
    try:
        assert next(iter(consumer)).value == b"hello"
    finally:
        consumer.close()


@pytest.mark.parametrize(("listener", "mechanism"), MATRIX)
def test_aiokafka_produces_and_consumes(broker, listener, mechanism):
    import aiokafka

    topic = _topic()
    kw = broker.aiokafka("alice", mechanism, listener)

    async def run() -> bytes:
        producer = aiokafka.AIOKafkaProducer(**kw)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"hello")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, auto_offset_reset="earliest", **kw)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 15)
        finally:
            await consumer.stop()
        return msg.value

    assert asyncio.run(run()) == b"hello"


def _signed(key, sub: str, lifetime_s: int = 60, **claims) -> tuple[str, float]:
    now = int(time.time())
    body = {"sub": sub, "aud": "spool", "iss": "https://idp.test", "iat": now,
            "exp": now + lifetime_s, **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "idp-1"}), now + lifetime_s


def _oauth_producer(broker, token_fn, errors: list) -> Producer:
    conf = broker.confluent(None, listener="SASL_SSL")
    conf.update({"sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _cfg: token_fn(),
                 "error_cb": errors.append})
    return Producer(conf)


def test_confluent_kafka_with_a_jwt_validated_against_the_jwks_file(broker, idp):
    errors: list[KafkaError] = []
    p = _oauth_producer(broker, lambda: _signed(idp[0], "alice"), errors)
    p.produce(_topic(), b"signed")
    assert p.flush(15) == 0 and errors == []


@pytest.mark.parametrize("case", ["another key", "wrong audience", "unsecured"])
def test_a_jwt_the_jwks_does_not_vouch_for_is_refused(broker, idp, case):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = {"another key": lambda: _signed(other, "alice"),
             "wrong audience": lambda: _signed(idp[0], "alice", aud="other"),
             "unsecured": lambda: (unsecured_token({"unsecuredLoginStringClaim_sub": "alice"}),
                                   time.time() + 60)}[case]
    errors: list[KafkaError] = []
    p = _oauth_producer(broker, token, errors)
    for _ in range(100):
        if errors:
            break
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert '{"status":"invalid_token"}' in errors[0].str()


def test_a_scram_user_created_at_run_time_logs_in_until_deleted(broker):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(broker.confluent("alice"))
    sha256 = ScramMechanism.SCRAM_SHA_256
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(sha256, 4096), b"dave-secret")]).values():
        f.result(15)
    p = Producer(broker.confluent("dave", "SCRAM-SHA-256", password="dave-secret"))
    p.produce(_topic(), b"from dave")
    assert p.flush(15) == 0
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", sha256)]).values():
        f.result(15)
    errors: list[KafkaError] = []
    p = Producer(broker.confluent("dave", "SCRAM-SHA-256", password="dave-secret",
                                  error_cb=errors.append))
    for _ in range(100):
        if errors:
            break
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION


def test_plain_users_change_at_run_time_per_listener(broker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    from tests.helpers.secure_broker import plain_jaas

    admin = AdminClient(broker.confluent("alice"))
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"

    def alter(value: str) -> None:
        res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)

    with pytest.raises(KafkaException) as e:
        alter("org.apache.kafka.common.security.plain.PlainLoginModule required user_x=1")
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "missing ';' at the end" in e.value.args[0].str()
    alter(plain_jaas({**broker.plain_users, "erin": "erin-secret"}))
    p = Producer(broker.confluent("erin", password="erin-secret"))
    p.produce(_topic(), b"from erin")
    assert p.flush(15) == 0


BAD = [("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
       ("PLAIN", "mallory", "x", "Authentication failed: Invalid username or password"),
       ("SCRAM-SHA-256", "alice", "wrong", "Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-256"),
       ("SCRAM-SHA-512", "mallory", "x", "Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512")]


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize(("mechanism", "user", "password", "message"), BAD)
def test_confluent_kafka_bad_credentials_fail_authentication(broker, listener, mechanism, user,
                                                             password, message):
    errors: list[KafkaError] = []
    p = Producer(broker.confluent(user, mechanism, listener, password=password,
                                  error_cb=errors.append))
    for _ in range(100):
        if errors:
            break
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert message in errors[0].str()


@pytest.mark.parametrize(("mechanism", "user", "password", "message"), BAD)
def test_aiokafka_bad_credentials_fail_authentication(broker, caplog, mechanism, user,
                                                      password, message):
    import aiokafka
    import aiokafka.errors

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            **broker.aiokafka(user, mechanism, password=password))
        try:
            await producer.start()
        finally:
            await producer.stop()

    # aiokafka logs the broker's refusal and fails its bootstrap
    with pytest.raises(aiokafka.errors.KafkaConnectionError):
        asyncio.run(run())
    assert f"[Error 58] SaslAuthenticationFailed: {message}" in caplog.text


@pytest.mark.parametrize(("mechanism", "user", "password", "message"), BAD)
def test_kafka_python_bad_credentials_fail_authentication(broker, caplog, mechanism, user,
                                                          password, message):
    import kafka
    import kafka.errors

    # kafka-python logs the broker's refusal and retries its bootstrap until the timeout
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaAdminClient(bootstrap_timeout_ms=2000,
                               **broker.kafka_python(user, mechanism, password=password))
    assert f"SaslAuthenticationFailedError: {message}" in caplog.text


# ---- the wire, byte by byte


def test_handshake_v1_and_authenticate_set_the_principal(broker):
    with _raw(broker) as c:
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert (hs.error_code, hs.mechanisms) == (Errors.NONE, list(MECHANISMS))
        auth = c.request(36, 2, SaslAuthenticateRequest(auth_bytes=_plain_token(*ALICE)))
        assert (auth.error_code, auth.auth_bytes, auth.session_lifetime_ms) == (0, b"", 0)
        md = c.request(3, 12, MetadataRequest(topics=[]))
        assert md.brokers  # served once authenticated
        again = c.request(36, 2, SaslAuthenticateRequest(auth_bytes=_plain_token(*ALICE)))
        assert again.error_code == Errors.ILLEGAL_SASL_STATE


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "x")])
def test_bad_credentials_answer_sasl_authentication_failed_then_close(broker, user, password):
    with _raw(broker) as c:
        c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        # a metadata request pipelined behind the failing authentication is never served
        cid = c.send(36, 1, SaslAuthenticateRequest(auth_bytes=_plain_token(user, password)))
        c.send(3, 12, MetadataRequest(topics=[]))
        got, auth = c.recv(36, 1)
        assert got == cid
        assert auth.error_code == Errors.SASL_AUTHENTICATION_FAILED
        assert auth.error_message == "Authentication failed: Invalid username or password"
        assert c.is_closed_by_peer()


def test_a_request_before_the_handshake_closes_the_connection_unanswered(broker):
    with _raw(broker) as c:
        c.send(3, 12, MetadataRequest(topics=[]))
        assert c.is_closed_by_peer()


def test_a_request_during_the_exchange_is_answered_illegal_sasl_state_then_closed(broker):
    """Kafka's SaslServerAuthenticator: the request's own error response, then the close."""
    with _raw(broker) as c:
        c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        md = c.request(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name="t1")]))
        assert [(t.name, t.error_code) for t in md.topics] == [("t1", Errors.ILLEGAL_SASL_STATE)]
        assert md.brokers == []
        assert c.is_closed_by_peer()


def test_api_versions_during_the_exchange_gets_illegal_sasl_state(broker):
    with _raw(broker) as c:
        c.request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        av = c.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"))
        assert (av.error_code, av.api_keys) == (Errors.ILLEGAL_SASL_STATE, [])
        assert c.is_closed_by_peer()


def test_api_versions_then_handshake_is_how_clients_start(broker):
    with _raw(broker) as c:
        av = c.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == 0


def test_an_unknown_mechanism_is_refused_with_the_enabled_list(broker):
    with _raw(broker) as c:
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert (hs.error_code, hs.mechanisms) == (Errors.UNSUPPORTED_SASL_MECHANISM,
                                                  list(MECHANISMS))
        assert c.is_closed_by_peer()


def test_handshake_v0_then_raw_tokens(broker):
    with _raw(broker) as c:
        hs = c.request(17, 0, SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == 0
        token = _plain_token(*ALICE)
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""  # PLAIN's empty answer, size-prefixed
        md = c.request(3, 12, MetadataRequest(topics=[]))
        assert md.brokers


def test_handshake_v0_then_raw_scram_rounds(broker):
    with _raw(broker) as c:
        assert c.request(17, 0, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, *ALICE)
        token = client.initial_response()
        while token is not None:
            c.send_raw(struct.pack(">i", len(token)) + token)
            token = client.evaluate(c.recv_frame())
        assert client.complete  # the server's signature checked out
        assert c.request(3, 12, MetadataRequest(topics=[])).brokers


def test_a_bad_raw_token_closes_unanswered(broker):
    with _raw(broker) as c:
        c.request(17, 0, SaslHandshakeRequest(mechanism="PLAIN"))
        token = _plain_token("alice", "nope")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()


@pytest.mark.parametrize(("token", "message"), [
    (b"no-nul-here", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0\0pw", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization "
                                  "id that is different from username"),
])
def test_malformed_plain_tokens_get_a_clear_error(broker, token, message):
    _malformed(broker, "PLAIN", token, message)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_malformed_scram_and_oauthbearer_tokens_tell_nothing_more(broker, mechanism):
    _malformed(broker, mechanism, b"\xff garbage", f"Authentication failed during "
               f"authentication due to invalid credentials with SASL mechanism {mechanism}")


def test_the_unsecured_oauthbearer_listener_is_warned_about(broker):
    assert ("listener SASL_PLAINTEXT accepts unsecured OAUTHBEARER tokens"
            in broker.log_tail(10**6))
    assert "listener SASL_SSL accepts unsecured" not in broker.log_tail(10**6)


def _malformed(broker, mechanism: str, token: bytes, message: str) -> None:
    with _raw(broker) as c:
        c.request(17, 1, SaslHandshakeRequest(mechanism=mechanism))
        auth = c.request(36, 1, SaslAuthenticateRequest(auth_bytes=token))
        assert (auth.error_code, auth.error_message) == (Errors.SASL_AUTHENTICATION_FAILED,
                                                         message)
        assert c.is_closed_by_peer()


def test_an_oversized_token_fails_authentication(broker):
    with _raw(broker) as c:
        c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        c.send(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0" + b"x" * 600_000))
        assert c.is_closed_by_peer()



def test_an_oversized_frame_is_refused_at_its_size_prefix(broker):
    with _raw(broker) as c:
        c.send_raw(struct.pack(">i", 600_000) + b"\0" * 100)  # the rest is never sent
        assert c.is_closed_by_peer()


def test_once_authenticated_requests_may_be_larger(broker):
    topic = _topic()
    p = Producer(broker.confluent("alice", **{"message.max.bytes": 2_000_000}))
    p.produce(topic, b"y" * 700_000)  # over sasl.server.max.receive.size (524288)
    assert p.flush(15) == 0


def test_the_plaintext_listener_beside_it_needs_no_authentication(broker):
    c = RawClient(broker.bootstrap("PLAINTEXT"))
    try:
        assert c.request(3, 12, MetadataRequest(topics=[])).brokers
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == Errors.ILLEGAL_SASL_STATE
    finally:
        c.close()


# ---- KIP-368 re-authentication


def _scram_login(c: RawClient, mechanism: str, version: int = 2):
    """SCRAM over SaslHandshake v1 + SaslAuthenticate with Spool's sans-I/O client."""
    client = ScramClient(ScramMechanism.from_name(mechanism), *ALICE)
    assert c.request(17, 1, SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
    token = client.initial_response()
    while True:
        resp = c.request(36, version, SaslAuthenticateRequest(auth_bytes=token))
        assert resp.error_code == 0, resp.error_message
        token = client.evaluate(resp.auth_bytes)
        if token is None:
            return resp


def test_a_session_past_connections_max_reauth_ms_is_closed_at_its_next_request(broker):
    with _raw(broker) as c:
        assert _scram_login(c, "SCRAM-SHA-512").session_lifetime_ms == REAUTH_MS
        assert c.request(3, 12, MetadataRequest(topics=[])).brokers
        time.sleep(REAUTH_MS / 1000 + 0.2)  # (the session's end is the event itself)
        c.send(3, 12, MetadataRequest(topics=[]))
        assert c.is_closed_by_peer()


def test_reauthentication_on_the_same_connection_renews_the_session(broker):
    with _raw(broker) as c:
        _scram_login(c, "SCRAM-SHA-512")
        time.sleep(REAUTH_MS / 2000)
        assert _scram_login(c, "SCRAM-SHA-512").session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 2000 + 0.2)  # past the first session's end, not the second's
        assert c.request(3, 12, MetadataRequest(topics=[])).brokers


def test_reauthentication_with_another_mechanism_fails_at_the_token(broker):
    """Kafka's REAUTH_BAD_MECHANISM: the handshake is answered NONE (the mechanism is
    enabled), the token that follows fails the re-authentication unanswered."""
    with _raw(broker) as c:
        _scram_login(c, "SCRAM-SHA-512")
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert (hs.error_code, hs.mechanisms) == (Errors.NONE, list(MECHANISMS))
        c.send(36, 2, SaslAuthenticateRequest(auth_bytes=_plain_token(*ALICE)))
        assert c.is_closed_by_peer()
    reason = ("SASL mechanism 'PLAIN' requested by client is not supported for "
              "re-authentication of mechanism 'SCRAM-SHA-512'")
    deadline = time.monotonic() + 10  # the close is logged once the socket is shut
    while reason not in broker.log_tail(10**6) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reason in broker.log_tail(10**6)


def test_reauthentication_with_a_mechanism_not_enabled_is_unsupported(broker):
    with _raw(broker) as c:
        _scram_login(c, "SCRAM-SHA-512")
        hs = c.request(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert (hs.error_code, hs.mechanisms) == (Errors.UNSUPPORTED_SASL_MECHANISM,
                                                  list(MECHANISMS))
        assert c.is_closed_by_peer()


def test_librdkafka_reauthenticates_and_keeps_producing(broker):
    topic = _topic()
    errors: list[KafkaError] = []
    p = Producer(broker.confluent("alice", "SCRAM-SHA-512", "SASL_PLAINTEXT",
                                  error_cb=errors.append))
    deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000  # three sessions and a half
    sent = 0
    while time.monotonic() < deadline:
        p.produce(topic, b"x")
        sent += 1
        p.poll(0.05)
    assert p.flush(15) == 0
    assert errors == []  # no disconnection, no authentication failure
    lo, hi = Consumer(broker.confluent("alice", **{"group.id": "r"})).get_watermark_offsets(
        TopicPartition(topic, 0), timeout=10)
    assert hi - lo == sent
