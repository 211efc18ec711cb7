"""SASL mechanisms as sans-I/O state machines, server side and client side.

Server side, one object per authentication exchange::

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

Client side, the mirror image (``client_for(mechanism, username, password, jaas_options)``
builds one from a client's settings; used by ``spool.net`` and tests)::

    client = PlainClient("alice", "secret")
    token = client.initial_response()        # the first token to send
    token = client.evaluate(server_reply)    # the next one, or None when done
    client.complete                          # the server proved itself (SCRAM) / said yes

Neither side does I/O or knows how tokens travel (SaslAuthenticate requests, or
v0's size-prefixed raw frames): ``spool.broker.dispatch`` and ``spool.net`` do.
"""

from __future__ import annotations

from collections.abc import Mapping


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


def client_for(mechanism: str, username: str | None, password: str | None,
               jaas_options: Mapping[str, str] | None = None) -> SaslClient:
    """A new client exchange for ``mechanism`` from a client's settings (its
    ``sasl.jaas.config`` options: OAUTHBEARER makes an unsecured JWS from
    ``unsecuredLoginStringClaim_sub`` and friends, as Kafka's unsecured login handler).
    ValueError for a mechanism Spool has no client for, or settings it lacks."""
    from spool.security.sasl.oauthbearer import OAuthBearerClient, unsecured_login
    from spool.security.sasl.plain import PlainClient
    from spool.security.sasl.scram import ScramClient
    from spool.security.scram import ScramMechanism

    scram = ScramMechanism.from_name(mechanism)
    if mechanism == PLAIN or scram is not None:
        if username is None or password is None:
            raise ValueError(f"SASL mechanism {mechanism} needs a username and a password")
        if scram is not None:
            return ScramClient(scram, username, password)
        return PlainClient(username, password)
    if mechanism == OAUTHBEARER:
        login = unsecured_login(jaas_options or {})
        return OAuthBearerClient(login.token(), login.extensions)
    raise ValueError(f"SASL mechanism {mechanism}: Spool has no client for it "
                     f"(it has {', '.join(MECHANISMS)})")
