"""SASL/PLAIN (RFC 4616), server and client, as Kafka's PlainSaslServer.

The client's one message is ``[authzid] NUL authcid NUL passwd`` in UTF-8. The server
checks the password against its users (PlainLoginModule's ``user_<name>="<pw>"``
options, ``spool.security.jaas.plain_users``), answers an empty token and is done.
Failures carry Kafka's messages, told to the client: "Invalid SASL/PLAIN response:
expected 3 tokens, got N", "Authentication failed: username not specified", "...:
password not specified", "...: Invalid username or password" (the same for an unknown
user and a wrong password), "...: Client requested an authorization id that is
different from username". Passwords are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from spool.security.sasl import PLAIN, SaslAuthenticationError, SaslClient, SaslServer


class PlainServer(SaslServer):
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self.users = users

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected token after SASL/PLAIN completed")
        text = bytes(token).decode("utf-8", errors="replace")
        parts = text.split("\0", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare even for an unknown user, so the time taken does not tell it apart
        ok = hmac.compare_digest((expected if expected is not None else "\0" + password)
                                 .encode(), password.encode())
        if not ok or expected is None:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


class PlainClient(SaslClient):
    mechanism = PLAIN

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__()
        self.username, self.password, self.authzid = username, password, authzid

    def initial_response(self) -> bytes:
        return f"{self.authzid}\0{self.username}\0{self.password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        self.complete = True  # the server's empty answer: accepted
        return None
