"""SASL mechanisms as sans-I/O state machines, server side and client side.

Server side, one object per authentication exchange (``server_for``)::

    server = PlainServer(users)            # or ScramServer, OAuthBearerServer
    reply = server.evaluate(client_token)  # bytes for the client; raises on failure
    server.complete                        # True once the client is authenticated
    server.authorization_id                # the authenticated name (the principal's)
    server.credential_expiry_ms            # wall-clock ms the credential dies (OAUTHBEARER)

``evaluate`` raises ``SaslAuthenticationError`` with a message meant for the client
(Kafka's ``SaslAuthenticationException``: "Authentication failed: Invalid username or
password"), or ``SaslError`` whose message is only logged: the client then gets Kafka's
generic "Authentication failed during authentication due to invalid credentials with
SASL mechanism <M>" (it must not learn whether the user exists).

Client side, the mirror image (``client_for``; used by ``spool.net`` and tests)::

    client = PlainClient("alice", "secret")
    token = client.initial_response()        # the first token to send
    token = client.evaluate(server_reply)    # the next one, or None when done
    client.complete                          # the server proved itself (SCRAM) / said yes

Neither side does I/O or knows how tokens travel (SaslAuthenticate requests, or
v0's size-prefixed raw frames): ``spool.broker.dispatch`` and ``spool.net`` do.
"""

from __future__ import annotations


class SaslError(Exception):
    """Authentication failed; the reason is for the log, not for the client."""


class SaslAuthenticationError(SaslError):
    """Authentication failed; ``str(e)`` is told to the client as is."""


PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)
"""The mechanisms Spool serves (GSSAPI, Kafka's default, is not one of them)."""


class SaslServer:
    """One server-side exchange (module doc). Subclasses implement ``evaluate``."""

    mechanism = ""

    def __init__(self) -> None:
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class SaslClient:
    """One client-side exchange (module doc)."""

    mechanism = ""

    def __init__(self) -> None:
        self.complete = False

    def initial_response(self) -> bytes:
        raise NotImplementedError

    def evaluate(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError
