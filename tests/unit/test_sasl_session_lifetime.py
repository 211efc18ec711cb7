"""SaslAuthenticator's KIP-368 session lifetime where a credential expires (OAUTHBEARER's
token ``exp``) and ``connections.max.reauth.ms`` is set too: the session lasts the shorter
of the two, is told to the client in SaslAuthenticate v1+ and ends there; a
re-authentication must keep its mechanism; a failed connection gets no second attempt.
Found by mutation: with the lifetime no longer
capped at connections.max.reauth.ms when the token outlives it, every existing test passed."""

from __future__ import annotations

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
from spool.security.sasl import SaslServer
from spool.security.sasl.plain import PlainServer

WALL_MS = 1_800_000_000_000  # the wall clock's "now"
MONO_NS = 10**12


class TokenServer(SaslServer):
    """A one-message mechanism accepting the token ``<name>:<ms until it expires>``."""

    mechanism = "OAUTHBEARER"

    def evaluate(self, token: bytes) -> bytes:
        name, ms = token.decode().split(":")
        self.authorization_id = name
        self.credential_expiry_ms = WALL_MS + int(ms)
        self.complete = True
        return b""


class Conn:
    def __init__(self) -> None:
        self.principal = ANONYMOUS

    def _condemn(self, reason: str) -> None:
        self.condemned = reason


class Clock:
    ns = MONO_NS

    def __call__(self) -> int:
        return self.ns


def make(reauth_ms: int):
    listener = SaslListener(
        "SASL_PLAINTEXT", ("OAUTHBEARER", "PLAIN"), 524288,
        {"OAUTHBEARER": reauth_ms, "PLAIN": reauth_ms},
        {"OAUTHBEARER": TokenServer, "PLAIN": lambda: PlainServer({"alice": "pw"})},
        failed_delay_ms=0)
    clock = Clock()
    auth = SaslAuthenticator(listener, Conn(), lambda key, v: True, clock_ns=clock,
                             wall_ms=lambda: WALL_MS)
    return auth, clock


def frame(api_key: int, version: int, request) -> bytearray:
    flexible = API_BY_KEY[api_key].request.is_flexible(version)
    return bytearray(encode_request_header(api_key, version, 7, "c", flexible)
                     + request.to_bytes(version))


def answer(chunks: list, cls, version: int):
    data = b"".join(chunks)
    return cls.from_bytes(data[8 + (1 if cls.is_flexible(version) else 0):], version)


def login(auth, token: bytes, mechanism: str = "OAUTHBEARER"):
    hs = answer(auth.gate(frame(17, 1, SaslHandshakeRequest(mechanism=mechanism))),
                SaslHandshakeResponse, 1)
    if hs.error_code:
        return hs
    return answer(auth.gate(frame(36, 2, SaslAuthenticateRequest(auth_bytes=token))),
                  SaslAuthenticateResponse, 2)


METADATA = frame(3, 12, MetadataRequest(topics=[]))


@pytest.mark.parametrize(("token_ms", "reauth_ms", "lifetime"), [
    (600_000, 1_000, 1_000),  # connections.max.reauth.ms is shorter than the token
    (30_000, 60_000, 30_000),  # the token is shorter
    (45_000, 0, 45_000),  # no connections.max.reauth.ms: the token alone
])
def test_the_session_lasts_the_shorter_of_token_and_reauth_ms(token_ms, reauth_ms, lifetime):
    auth, clock = make(reauth_ms)
    resp = login(auth, f"alice:{token_ms}".encode())
    assert resp.error_code == 0
    assert resp.session_lifetime_ms == lifetime
    assert auth.conn.principal == user("alice")
    clock.ns = MONO_NS + (lifetime - 1) * 10**6
    assert auth.gate(METADATA) is PROCEED
    clock.ns = MONO_NS + (lifetime + 1) * 10**6
    with pytest.raises(CloseConnection, match="expired"):
        auth.gate(METADATA)


def test_reauthentication_must_keep_the_mechanism():
    auth, clock = make(1_000)
    assert login(auth, b"alice:600000").error_code == 0
    # same principal, other (enabled) mechanism: the handshake is answered (Kafka's
    # REAUTH_BAD_MECHANISM), the token after it closes the connection unanswered
    hs = answer(auth.gate(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))),
                SaslHandshakeResponse, 1)
    assert hs.error_code == Errors.NONE
    with pytest.raises(CloseConnection, match=r"^SASL mechanism 'PLAIN' requested by client is "
                                              r"not supported for re-authentication of "
                                              r"mechanism 'OAUTHBEARER'$"):
        auth.gate(frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw")))
    with pytest.raises(CloseConnection):  # and nothing after it is read
        auth.gate(METADATA)


def test_no_second_attempt_on_a_connection_whose_authentication_failed():
    """A failed authentication condemns the connection (closed after
    connection.failed.authentication.delay.ms); a frame read meanwhile, even a new
    SaslHandshake with the right password after it, is not served. Found by mutation:
    without the FAILED state's refusal a client could start over on the same connection."""
    auth, clock = make(0)
    resp = login(auth, b"\0alice\0wrong", mechanism="PLAIN")
    assert resp.error_code == Errors.SASL_AUTHENTICATION_FAILED
    with pytest.raises(CloseConnection):
        login(auth, b"\0alice\0pw", mechanism="PLAIN")
    assert auth.conn.principal == ANONYMOUS
