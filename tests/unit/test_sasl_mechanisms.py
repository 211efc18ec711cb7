"""The SASL mechanisms' state machines, client against server, and RFC vectors."""

from __future__ import annotations

import base64

import pytest

from spool.security.sasl import SaslAuthenticationError, SaslError
from spool.security.sasl.plain import PlainClient, PlainServer
from spool.security.sasl.scram import ScramClient, ScramServer, sasl_name, username
from spool.security.scram import ScramMechanism, credential, credential_from_password

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def run(client, server) -> None:
    token = client.initial_response()
    while True:
        reply = server.evaluate(token)
        token = client.evaluate(reply)
        if token is None:
            break
    assert client.complete and server.complete


def test_plain_round_trip():
    server = PlainServer({"alice": "pw"})
    run(PlainClient("alice", "pw"), server)
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mech", [SHA256, SHA512])
def test_scram_round_trip_and_odd_names(mech):
    creds = {("a,b=c", mech): credential_from_password(mech, "p\u00e4ss")}
    server = ScramServer(mech, lambda u, m: creds.get((u, m)))
    run(ScramClient(mech, "a,b=c", "p\u00e4ss"), server)
    assert server.authorization_id == "a,b=c"


def test_scram_client_matches_rfc7677():
    client = ScramClient(SHA256, "user", "pencil", client_nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


def test_scram_client_refuses_a_forged_server_signature():
    client = ScramClient(SHA256, "user", "pencil", client_nonce="rOprNGfwEbeRWgbNEkqO")
    client.initial_response()
    client.evaluate(b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslError, match="Invalid server signature"):
        client.evaluate(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("case", ["wrong password", "unknown user", "bad nonce", "garbage",
                                  "authzid", "few iterations"])
def test_scram_server_refusals(case):
    salt = b"salt"
    cred = credential(SHA256, salt, b"k" * 32, 4096 if case != "few iterations" else 1000)
    good = credential_from_password(SHA256, "right")
    creds = {"alice": good if case != "few iterations" else cred}
    server = ScramServer(SHA256, lambda u, m: creds.get(u))
    client = ScramClient(SHA256, "bob" if case == "unknown user" else "alice",
                         "wrong" if case == "wrong password" else "right")
    first = client.initial_response()
    if case == "garbage":
        first = b"hello"
    if case == "authzid":
        first = first.replace(b"n,,", b"n,a=mallory,")
    error = SaslAuthenticationError if case == "authzid" else SaslError
    if case in ("garbage", "authzid", "few iterations"):
        with pytest.raises(error):
            server.evaluate(first)
        return
    final = client.evaluate(server.evaluate(first))
    if case == "bad nonce":  # the server's nonce must end the client's final nonce
        final = final.replace(b",p=", b"x,p=")
    with pytest.raises(SaslError) as e:
        server.evaluate(final)
    if case == "bad nonce":
        assert str(e.value) == "Invalid client nonce in the final client message."
    assert not isinstance(e.value, SaslAuthenticationError)  # the client learns nothing more
    assert not server.complete


def test_saslnames():
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    assert username("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(SaslError):
        username("a=4")


# ---- hostile tokens: a mechanism refuses with SaslError, never anything else

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spool.security.sasl.oauthbearer import OAuthBearerServer, UnsecuredValidator  # noqa: E402

_TOKENS = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=120).map(str.encode),
    st.builds(lambda a, b: b"n,," + a + b",r=" + b, st.binary(max_size=40),
              st.binary(max_size=40)),
    st.builds(lambda a: b"n,,\x01auth=Bearer " + a + b"\x01\x01", st.binary(max_size=80)),
)


def _servers():
    cred = credential_from_password(SHA256, "pw")
    return [PlainServer({"alice": "pw"}),
            ScramServer(SHA256, lambda u, m: cred if u == "alice" else None),
            OAuthBearerServer(UnsecuredValidator())]


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, min_size=1, max_size=3))
def test_hostile_tokens_only_ever_fail_as_sasl_errors(tokens):
    for server in _servers():
        for token in tokens:
            try:
                server.evaluate(token)
            except SaslError:
                break
            if server.complete:
                break


def test_an_unknown_user_looks_like_a_known_one_until_the_proof():
    creds = {"alice": credential_from_password(SHA256, "pw")}
    firsts = []
    for user in ("bob", "bob", "carol"):
        server = ScramServer(SHA256, lambda u, m: creds.get(u))
        client = ScramClient(SHA256, user, "pw")
        first = server.evaluate(client.initial_response()).decode()
        assert first.endswith(",i=4096")
        firsts.append(first.split(",s=")[1])
        with pytest.raises(SaslError) as e:
            server.evaluate(client.evaluate(first.encode()))
        assert not isinstance(e.value, SaslAuthenticationError)
    assert firsts[0] == firsts[1] != firsts[2]  # the same salt for the same name
