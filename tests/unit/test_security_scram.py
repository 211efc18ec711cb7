"""SCRAM credentials: RFC 7677's test vector, and kafka-storage's numbers."""

import base64
import hashlib
import hmac

import pytest

from spool.security.scram import (
    ScramCredential,
    ScramMechanism,
    credential,
    credential_from_password,
    salted_password,
)

# RFC 7677 section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL_NO_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_rfc7677_vector_verifies_against_the_derived_credential():
    mech = ScramMechanism.SCRAM_SHA_256
    cred = credential(mech, SALT, salted_password(mech, "pencil", SALT, 4096), 4096)
    auth = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{CLIENT_FINAL_NO_PROOF}".encode()
    signature = hmac.new(cred.stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(PROOF, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    assert hmac.new(cred.server_key, auth, "sha256").digest() == SERVER_SIGNATURE
    assert cred.salt == SALT and cred.iterations == 4096


def test_mechanisms_as_the_wire_numbers_them():
    assert ScramMechanism(1).mechanism_name == "SCRAM-SHA-256"
    assert ScramMechanism(2).mechanism_name == "SCRAM-SHA-512"
    assert ScramMechanism.from_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.from_name("PLAIN") is None
    with pytest.raises(ValueError):
        ScramMechanism(0)
    assert ScramMechanism.SCRAM_SHA_512.min_iterations == 4096
    assert ScramMechanism.SCRAM_SHA_512.max_iterations == 16384


def test_fresh_salts_differ_and_keys_have_the_hash_size():
    mech = ScramMechanism.SCRAM_SHA_512
    a = credential_from_password(mech, "secret")
    b = credential_from_password(mech, "secret")
    assert isinstance(a, ScramCredential)
    assert a.salt != b.salt and a.stored_key != b.stored_key
    assert len(a.stored_key) == len(a.server_key) == 64
    same = credential_from_password(mech, "secret", salt=a.salt)
    assert same == a
