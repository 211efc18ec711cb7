"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server and client.

The exchange, four messages (no channel binding: the gs2 header is ``n,,`` or
``n,a=<authzid>,``)::

    client-first   n,,n=<saslname>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

The server holds only ``ScramCredential``s (``spool.security.scram``), looked up by
``credential(user, mechanism)``; an unknown user, a wrong proof, a bad nonce or a
malformed message fail with ``SaslError`` (the client is told Kafka's generic
message, never which). Unlike Kafka, an unknown user is not refused at its first
message: the server answers with a made-up salt (stable per name) and refuses the
proof, so the exchange does not tell who exists (RFC 5802's advice). An authorization
id other than the user fails with Kafka's
"Authentication failed: Client requested an authorization id that is different from
username". Usernames travel as saslnames (``=`` as ``=3D``, ``,`` as ``=2C``).
Extensions (Kafka's ``tokenauth`` for delegation tokens) are ignored: Spool has no
delegation tokens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from spool.security.sasl import SaslAuthenticationError, SaslClient, SaslError, SaslServer
from spool.security.scram import (
    ScramCredential,
    ScramMechanism,
    client_key,
    hmac_digest,
    nonce,
    salted_password,
)

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_B64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXT = r"(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*"
CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m=[^,]+,)?"
                          rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE}){_EXT})")
SERVER_FIRST = re.compile(rf"(?:m=[^,]+,)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),"
                          rf"i=(?P<iterations>[0-9]+){_EXT}")
CLIENT_FINAL = re.compile(rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE})"
                          rf"{_EXT}),p=(?P<proof>{_B64})")
SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[^,]+)|v=(?P<signature>{_B64})){_EXT}")

CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]


_DECOY_SECRET = secrets.token_bytes(32)


def _decoy(mech: ScramMechanism, user: str) -> ScramCredential:
    """A credential for a user that does not exist: the same salt for the same name (for
    this process), so asking twice does not tell it apart from a real one."""
    salt = hmac.new(_DECOY_SECRET, user.encode(), "sha256").digest()[:16]
    key = hmac.new(_DECOY_SECRET, b"key" + user.encode(), mech.hash_name).digest()
    return ScramCredential(salt, key, key, mech.min_iterations)


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username(saslname: str) -> str:
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def _text(token: bytes) -> str:
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError as e:
        raise SaslError("SCRAM message is not UTF-8") from e


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramServer(SaslServer):
    def __init__(self, mechanism: ScramMechanism, credential: CredentialLookup) -> None:
        super().__init__()
        self.scram = mechanism
        self.mechanism = mechanism.mechanism_name
        self.lookup = credential
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._unknown = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslError("Unexpected challenge in Sasl server state COMPLETE")
        if self._credential is None:
            return self._first(_text(token))
        return self._final(_text(token))

    def _first(self, message: str) -> bytes:
        m = CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise SaslError(f"Invalid SCRAM client first message format: {message}")
        user = username(m["saslname"])
        cred = self.lookup(user, self.scram)
        if cred is None:  # go on with a made-up credential: the proof fails at the end
            self._unknown = True
            cred = _decoy(self.scram, user)
        authzid = m["authzid"] or ""
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if cred.iterations < self.scram.min_iterations:
            raise SaslError(f"Iterations {cred.iterations} is less than the minimum "
                            f"{self.scram.min_iterations} for {self.mechanism}")
        self._credential = cred
        self._first_bare = m["bare"]
        self._nonce = m["nonce"] + nonce()
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        self.authorization_id = user
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        m = CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise SaslError(f"Invalid SCRAM client final message format: {message}")
        # Kafka checks endsWith, not equality: librdkafka 2.0 (Debian's kcat) sends its own
        # nonce again in front of the server's whole nonce and signs what it sent
        if not m["nonce"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        cred = self._credential
        assert cred is not None
        if self._unknown:
            raise SaslError("Authentication failed: Invalid user credentials")
        auth = f"{self._first_bare},{self._server_first},{m['without_proof']}".encode()
        signature = hmac_digest(self.scram, cred.stored_key, auth)
        proof = base64.b64decode(m["proof"])
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        computed = hashlib.new(self.scram.hash_name, _xor(signature, proof)).digest()
        if not hmac.compare_digest(computed, cred.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = hmac_digest(self.scram, cred.server_key, auth)
        self._credential = None
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient(SaslClient):
    def __init__(self, mechanism: ScramMechanism, user: str, password: str,
                 client_nonce: str | None = None) -> None:
        super().__init__()
        self.scram = mechanism
        self.mechanism = mechanism.mechanism_name
        self.user, self.password = user, password
        self._nonce = client_nonce or nonce()
        self._first_bare = f"n={sasl_name(user)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def initial_response(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        message = _text(challenge)
        if self._server_signature is None:
            return self._final(message)
        m = SERVER_FINAL.fullmatch(message)
        if m is None:
            raise SaslError(f"Invalid SCRAM server final message format: {message}")
        if m["error"] is not None:
            raise SaslError(f"Sasl authentication using {self.mechanism} failed with error: "
                            f"{m['error']}")
        if not hmac.compare_digest(base64.b64decode(m["signature"]), self._server_signature):
            raise SaslError("Invalid server signature in server final message")
        self.complete = True
        return None

    def _final(self, message: str) -> bytes:
        m = SERVER_FIRST.fullmatch(message)
        if m is None:
            raise SaslError(f"Invalid SCRAM server first message format: {message}")
        iterations = int(m["iterations"])
        if not m["nonce"].startswith(self._nonce) or m["nonce"] == self._nonce:
            raise SaslError("Invalid server nonce: does not start with client nonce")
        if iterations < self.scram.min_iterations:
            raise SaslError(f"Requested iterations {iterations} is less than the minimum "
                            f"{self.scram.min_iterations} for {self.mechanism}")
        try:
            salt = base64.b64decode(m["salt"], validate=True)
        except binascii.Error as e:
            raise SaslError("Invalid SCRAM server first message format: salt") from e
        salted = salted_password(self.scram, self.password, salt, iterations)
        without_proof = f"c=biws,r={m['nonce']}"
        auth = f"{self._first_bare},{message},{without_proof}".encode()
        ckey = client_key(self.scram, salted)
        stored = hashlib.new(self.scram.hash_name, ckey).digest()
        proof = _xor(ckey, hmac_digest(self.scram, stored, auth))
        server_key = hmac_digest(self.scram, salted, b"Server Key")
        self._server_signature = hmac_digest(self.scram, server_key, auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
