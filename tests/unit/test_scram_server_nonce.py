"""SCRAM server (spool.security.sasl.scram): a client-final message's nonce must end with the
nonce the server made (client nonce + server nonce), even when its proof is right for what it
says. RFC 5802 section 5.1 says "the same"; Kafka's ScramSaslServer checks endsWith, and
librdkafka 2.0 (Debian's kcat) relies on it: it sends its client nonce again in front. Found by mutation: with the nonce check removed every existing test passed, since the
"bad nonce" case of test_sasl_mechanisms also breaks the proof. Here the proof is computed,
as a client holding the password would, over the message with the other nonce. Also: a
proof of the wrong length is a failed authentication, not a server error."""

from __future__ import annotations

import base64
import hashlib

import pytest

from spool.security.sasl import SaslAuthenticationError, SaslError
from spool.security.sasl.scram import ScramServer
from spool.security.scram import (
    ScramMechanism,
    client_key,
    credential_from_password,
    hmac_digest,
    salted_password,
)


def final_with_nonce(mech: ScramMechanism, password: str, first_bare: str, server_first: str,
                     nonce: str) -> bytes:
    """A client-final for ``nonce`` whose proof is right for the message as sent."""
    fields = dict(p.split("=", 1) for p in server_first.split(","))
    salted = salted_password(mech, password, base64.b64decode(fields["s"]), int(fields["i"]))
    without_proof = f"c=biws,r={nonce}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    ckey = client_key(mech, salted)
    signature = hmac_digest(mech, hashlib.new(mech.hash_name, ckey).digest(), auth)
    proof = bytes(a ^ b for a, b in zip(ckey, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mech", list(ScramMechanism), ids=lambda m: m.mechanism_name)
def test_the_right_nonce_and_proof_complete(mech):
    creds = {"alice": credential_from_password(mech, "secret")}
    server = ScramServer(mech, lambda user, m: creds.get(user))
    first_bare = "n=alice,r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    nonce = server_first.split(",")[0][2:]
    reply = server.evaluate(final_with_nonce(mech, "secret", first_bare, server_first, nonce))
    assert reply.startswith(b"v=") and server.complete
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mech", list(ScramMechanism), ids=lambda m: m.mechanism_name)
def test_librdkafka_2_0s_final_nonce_completes(mech):
    """r=<client nonce><server's whole nonce>, signed as sent (librdkafka 2.0.2)."""
    creds = {"alice": credential_from_password(mech, "secret")}
    server = ScramServer(mech, lambda user, m: creds.get(user))
    first_bare = "n=alice,r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    nonce = server_first.split(",")[0][2:]
    final = final_with_nonce(mech, "secret", first_bare, server_first, "clientnonce" + nonce)
    assert server.evaluate(final).startswith(b"v=") and server.complete
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mech", list(ScramMechanism), ids=lambda m: m.mechanism_name)
@pytest.mark.parametrize("which", ["client nonce only", "server nonce changed", "other"])
def test_a_final_message_with_another_nonce_is_refused_even_with_its_proof(mech, which):
    creds = {"alice": credential_from_password(mech, "secret")}
    server = ScramServer(mech, lambda user, m: creds.get(user))
    first_bare = "n=alice,r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    nonce = server_first.split(",")[0][2:]
    wrong = {"client nonce only": "clientnonce",
             "server nonce changed": nonce[:-1] + ("a" if nonce[-1] != "a" else "b"),
             "other": "somebodyelsesnonce"}[which]
    with pytest.raises(SaslError) as e:
        server.evaluate(final_with_nonce(mech, "secret", first_bare, server_first, wrong))
    assert not isinstance(e.value, SaslAuthenticationError)  # the client learns nothing more
    assert not server.complete


@pytest.mark.parametrize("mech", list(ScramMechanism), ids=lambda m: m.mechanism_name)
@pytest.mark.parametrize("length", [0, 16, 100])
def test_a_proof_of_the_wrong_length_is_an_authentication_failure(mech, length):
    """A proof shorter or longer than the hash is a failed authentication (SaslError: the
    client gets Kafka's generic message), not an error of the server. Found by mutation:
    without the length check the XOR raised ValueError and every existing test passed."""
    creds = {"alice": credential_from_password(mech, "secret")}
    server = ScramServer(mech, lambda user, m: creds.get(user))
    server_first = server.evaluate(b"n,,n=alice,r=clientnonce").decode()
    nonce = server_first.split(",")[0][2:]
    proof = base64.b64encode(b"\x01" * length).decode()
    with pytest.raises(SaslError) as e:
        server.evaluate(f"c=biws,r={nonce},p={proof}".encode())
    assert not isinstance(e.value, SaslAuthenticationError)
    assert not server.complete
