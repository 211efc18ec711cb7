"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them.

A user's SCRAM credential for one mechanism is what the metadata log keeps
(``UserScramCredentialRecord``): ``salt``, ``stored_key``, ``server_key`` and the
iteration count; never the password. From a password::

    salted_password = Hi(password, salt, iterations)          # PBKDF2-HMAC
    client_key      = HMAC(salted_password, "Client Key")
    stored_key      = H(client_key)
    server_key      = HMAC(salted_password, "Server Key")

``ScramMechanism`` numbers the mechanisms as the wire does (the ``mechanism``
int8 of AlterUserScramCredentials, DescribeUserScramCredentials and the
metadata records): 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512 (0 is Kafka's
UNKNOWN, never a member here). Iterations must lie in
``[min_iterations, max_iterations]`` = [4096, 16384], Kafka's bounds.

The SASL exchange itself (client-first, server-first, client-final,
server-final) is ``spool.security.sasl.scram``; this module is pure
arithmetic and the names, so the metadata code can use it without SASL.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import IntEnum
from typing import NamedTuple


class ScramMechanism(IntEnum):
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """``SCRAM-SHA-256`` / ``SCRAM-SHA-512``: the SASL mechanism name."""
        return _NAMES[self]

    @property
    def hash_name(self) -> str:
        """hashlib's name of the hash: ``sha256`` / ``sha512``."""
        return _HASHES[self]

    @property
    def min_iterations(self) -> int:
        return 4096

    @property
    def max_iterations(self) -> int:
        return 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        """The mechanism for a SASL name (``SCRAM-SHA-256``), None if not SCRAM."""
        return _BY_NAME.get(name)


_NAMES = {ScramMechanism.SCRAM_SHA_256: "SCRAM-SHA-256",
          ScramMechanism.SCRAM_SHA_512: "SCRAM-SHA-512"}
_HASHES = {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}
_BY_NAME = {name: mech for mech, name in _NAMES.items()}
SCRAM_MECHANISM_NAMES = tuple(_NAMES.values())


class ScramCredential(NamedTuple):
    """What the broker keeps of a user's password for one mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)``: PBKDF2-HMAC over the UTF-8 password.

    Kafka does not SASLprep the password (its ``normalize`` is UTF-8 encoding only):
    nor do we, so credentials interoperate with Kafka's tools.
    """
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def hmac_digest(mech: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mech.hash_name).digest()


def client_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return hmac_digest(mech, salted, b"Client Key")


def credential(mech: ScramMechanism, salt: bytes, salted: bytes,
               iterations: int) -> ScramCredential:
    """The stored credential for a salted password (kafka-storage's ``saltedpassword=``)."""
    stored_key = hashlib.new(mech.hash_name, client_key(mech, salted)).digest()
    server_key = hmac_digest(mech, salted, b"Server Key")
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def random_salt() -> bytes:
    """A fresh salt: Kafka's (a 130-bit random number in base 36, as ASCII bytes)."""
    return _base36(secrets.randbits(130)).encode()


def nonce() -> str:
    """A fresh SCRAM nonce (printable, no comma): Kafka's 130 random bits in base 36."""
    return _base36(secrets.randbits(130))


def credential_from_password(mech: ScramMechanism, password: str, iterations: int = 4096,
                             salt: bytes | None = None) -> ScramCredential:
    """Salt (fresh unless given), salt the password, derive the keys."""
    salt = random_salt() if salt is None else salt
    return credential(mech, salt, salted_password(mech, password, salt, iterations), iterations)


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out
