"""SaslAuthenticator, frame by frame: states, Kafka's messages, KIP-368 sessions."""

from __future__ import annotations

import struct

import pytest

from spool.broker.sasl_authenticator import PROCEED, SaslAuthenticator
from spool.broker.sasl_listener import SaslListener
from spool.broker.server import CloseConnection
from spool.protocol._generated import (
    API_BY_KEY,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from spool.protocol.errors import Errors
from spool.protocol.headers import encode_request_header
from spool.security.principal import ANONYMOUS, user
from spool.security.sasl.plain import PlainServer

USERS = {"alice": "a-pw", "bob": "b-pw"}


class FakeConn:
    def __init__(self) -> None:
        self.principal = ANONYMOUS
        self.condemned: str | None = None

    def _condemn(self, reason: str) -> None:
        self.condemned = reason


class Clock:
    def __init__(self) -> None:
        self.ns = 10**12

    def __call__(self) -> int:
        return self.ns


def make(reauth_ms: int = 0, max_receive: int = 524288):
    listener = SaslListener("SASL_PLAINTEXT", ("PLAIN",), max_receive, {"PLAIN": reauth_ms},
                            {"PLAIN": lambda: PlainServer(USERS)}, failed_delay_ms=0)
    conn = FakeConn()
    clock = Clock()
    versions = {18: (0, 4), 17: (0, 1), 36: (0, 2), 3: (0, 12)}

    def version_ok(key: int, v: int) -> bool:
        lo, hi = versions.get(key, (0, -1))
        return lo <= v <= hi

    return SaslAuthenticator(listener, conn, version_ok, clock_ns=clock), conn, clock


def frame(api_key: int, version: int, request) -> bytearray:
    flexible = API_BY_KEY[api_key].request.is_flexible(version)
    return bytearray(encode_request_header(api_key, version, 7, "c", flexible)
                     + request.to_bytes(version))


def answer(chunks: list, response_cls, version: int):
    data = b"".join(chunks)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    pos = 8 + (1 if response_cls.is_flexible(version) else 0)
    return response_cls.from_bytes(data[pos:], version)


def handshake(auth, version: int = 1, mechanism: str = "PLAIN"):
    return answer(auth.gate(frame(17, version, SaslHandshakeRequest(mechanism=mechanism))),
                  SaslHandshakeResponse, version)


def authenticate(auth, token: bytes, version: int = 2):
    return answer(auth.gate(frame(36, version, SaslAuthenticateRequest(auth_bytes=token))),
                  SaslAuthenticateResponse, version)


def test_plain_success_sets_the_principal():
    auth, conn, _ = make()
    assert handshake(auth).mechanisms == ["PLAIN"]
    resp = authenticate(auth, b"\0alice\0a-pw")
    assert (resp.error_code, resp.session_lifetime_ms) == (0, 0)
    assert auth.authenticated and conn.principal == user("alice")
    assert auth.gate(frame(3, 12, MetadataRequest(topics=[]))) is PROCEED


def test_requests_before_authentication_close_with_kafkas_message():
    auth, _, _ = make()
    with pytest.raises(CloseConnection, match=r"^Unexpected Kafka request of type METADATA "
                                              r"during SASL handshake\.$"):
        auth.gate(frame(3, 12, MetadataRequest(topics=[])))



def test_a_request_during_the_exchange_gets_illegal_sasl_state_then_closes():
    """Kafka: the request's getErrorResponse(IllegalSaslStateException), then the close."""
    from spool.protocol._generated import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataResponse,
    )
    from spool.protocol._generated import metadata_request as mr

    auth, conn, _ = make()
    handshake(auth)
    md = answer(auth.gate(frame(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(
        name="t1")]))), MetadataResponse, 12)
    assert [(t.name, t.error_code) for t in md.topics] == [("t1", Errors.ILLEGAL_SASL_STATE)]
    assert conn.condemned == ("Unexpected Kafka request of type METADATA during SASL "
                              "authentication.")
    with pytest.raises(CloseConnection):
        auth.gate(frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0a-pw")))
    auth, conn, _ = make()
    handshake(auth)
    av = answer(auth.gate(frame(18, 0, ApiVersionsRequest())), ApiVersionsResponse, 0)
    assert av.error_code == Errors.ILLEGAL_SASL_STATE
    auth, conn, _ = make()
    handshake(auth)
    with pytest.raises(CloseConnection, match=r"^Unexpected Kafka request of type PRODUCE "
                                              r"during SASL authentication\.$"):
        auth.gate(frame(0, 9, API_BY_KEY[0].request()))  # (a version not served here)


def test_failure_answers_then_condemns_and_refuses_everything_after():
    auth, conn, _ = make()
    handshake(auth)
    resp = authenticate(auth, b"\0alice\0nope")
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == "Authentication failed: Invalid username or password"
    assert conn.condemned == ("Failed authentication (Authentication failed: Invalid username "
                              "or password)")
    assert conn.principal == ANONYMOUS
    with pytest.raises(CloseConnection):
        authenticate(auth, b"\0alice\0a-pw")


def test_an_oversized_frame_fails_before_it_is_parsed():
    auth, _, _ = make(max_receive=100)
    handshake(auth)
    big = frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"x" * 200))
    with pytest.raises(CloseConnection, match=r"^Failing SASL authentication due to invalid "
                                              r"receive size \(2\d\d > sasl\.server\.max\."
                                              r"receive\.size=100\)$"):
        auth.gate(big)


def test_api_versions_only_first_and_a_retry_after_an_unsupported_version():
    auth, _, _ = make()
    from spool.protocol._generated import ApiVersionsRequest
    assert auth.gate(frame(18, 0, ApiVersionsRequest())) is PROCEED
    with pytest.raises(CloseConnection, match="API_VERSIONS during SASL handshake"):
        auth.gate(frame(18, 0, ApiVersionsRequest()))


def test_session_lifetime_and_expiry():
    auth, conn, clock = make(reauth_ms=60_000)
    handshake(auth)
    assert authenticate(auth, b"\0alice\0a-pw").session_lifetime_ms == 60_000
    md = frame(3, 12, MetadataRequest(topics=[]))
    clock.ns += 59_999 * 10**6
    assert auth.gate(md) is PROCEED
    clock.ns += 2 * 10**6
    with pytest.raises(CloseConnection, match="SASL session of User:alice expired"):
        auth.gate(md)


def test_reauthentication_renews_the_session_and_keeps_the_principal():
    auth, conn, clock = make(reauth_ms=1000)
    handshake(auth)
    authenticate(auth, b"\0alice\0a-pw")
    clock.ns += 900 * 10**6
    assert handshake(auth).error_code == 0  # KIP-368: a handshake after authentication
    assert authenticate(auth, b"\0alice\0a-pw").session_lifetime_ms == 1000
    clock.ns += 900 * 10**6
    assert auth.gate(frame(3, 12, MetadataRequest(topics=[]))) is PROCEED
    handshake(auth)
    resp = authenticate(auth, b"\0bob\0b-pw")
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert resp.error_message == ("Cannot change principals during re-authentication from "
                                  "User.alice: User.bob")
    assert conn.principal == user("alice")


def test_a_v0_client_cannot_reauthenticate():
    auth, _, _ = make(reauth_ms=1000)
    handshake(auth)
    authenticate(auth, b"\0alice\0a-pw", version=0)
    assert auth.gate(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))) is PROCEED


# ---- hostile frames: the gate answers, or closes; it never fails otherwise

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_HEADERS = st.builds(lambda key, ver, rest: struct.pack(">hhi", key, ver, 1) + rest,
                     st.sampled_from([17, 36, 18, 3, 0, -1, 999]), st.integers(-2, 5),
                     st.binary(max_size=60))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([None, 0, 1]), st.lists(st.one_of(st.binary(max_size=80), _HEADERS),
                                               min_size=1, max_size=4))
def test_hostile_frames_are_answered_or_close_the_connection(handshake_version, frames):
    auth, _, _ = make()
    if handshake_version is not None:  # (v0: the frames are raw tokens)
        handshake(auth, version=handshake_version)
    for raw in frames:
        try:
            auth.gate(bytearray(raw))
        except CloseConnection:
            break


def test_an_unsupported_api_versions_is_answered_and_may_be_retried_once():
    from spool.protocol._generated import ApiVersionsRequest

    auth, _, _ = make()
    v0 = frame(18, 0, ApiVersionsRequest())
    assert auth.gate(v0[:2] + b"\x00\x63" + v0[4:]) is PROCEED  # v99: answered v0
    assert auth.gate(frame(18, 0, ApiVersionsRequest())) is PROCEED  # the retry
    assert handshake(auth).error_code == 0


def oauth_make(reauth_ms: int, exp_s: int):
    from spool.security.sasl.oauthbearer import OAuthBearerServer, UnsecuredValidator

    now_ms = 1_800_000_000_000
    validator = UnsecuredValidator(wall_ms=lambda: now_ms)
    listener = SaslListener("SASL_PLAINTEXT", ("OAUTHBEARER",), 524288,
                            {"OAUTHBEARER": reauth_ms},
                            {"OAUTHBEARER": lambda: OAuthBearerServer(validator)},
                            failed_delay_ms=0)
    conn = FakeConn()
    auth = SaslAuthenticator(listener, conn, lambda k, v: True, clock_ns=Clock(),
                             wall_ms=lambda: now_ms)
    claims = {"sub": "tok", "exp": now_ms // 1000 + exp_s}
    import base64
    import json

    def b64(o):
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    token = f"{b64({'alg': 'none'})}.{b64(claims)}."
    handshake(auth, mechanism="OAUTHBEARER")
    return authenticate(auth, f"n,,\x01auth=Bearer {token}\x01\x01".encode()), conn


@pytest.mark.parametrize(("reauth_ms", "exp_s", "lifetime"), [
    (0, 10, 10_000),        # the token's exp alone
    (60_000, 10, 10_000),   # the token ends first
    (1_000, 10, 1_000),     # connections.max.reauth.ms ends first
])
def test_an_oauthbearer_session_ends_with_its_token(reauth_ms, exp_s, lifetime):
    resp, conn = oauth_make(reauth_ms, exp_s)
    assert (resp.error_code, resp.session_lifetime_ms) == (0, lifetime)
    assert conn.principal == user("tok")
