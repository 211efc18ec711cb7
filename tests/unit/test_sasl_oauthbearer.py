"""OAUTHBEARER: Kafka's unsecured JWS rules, JWTs against a JWKS file, the exchange."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from spool.security.sasl import SaslAuthenticationError, SaslError, client_for
from spool.security.sasl.oauthbearer import (
    JwksValidator,
    OAuthBearerClient,
    OAuthBearerServer,
    TokenError,
    UnsecuredValidator,
    unsecured_token,
)

NOW_MS = 1_800_000_000_000


def b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def jws(claims, header=None) -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def validator(**options) -> UnsecuredValidator:
    return UnsecuredValidator(options, wall_ms=lambda: NOW_MS)


def exchange(server: OAuthBearerServer, token: str):
    client = OAuthBearerClient(token)
    reply = server.evaluate(client.initial_response())
    follow = client.evaluate(reply)
    if follow is not None:
        server.evaluate(follow)  # raises the refusal
    return client


def test_unsecured_token_accepted_principal_and_expiry():
    server = OAuthBearerServer(validator())
    exchange(server, jws({"sub": "alice", "iat": NOW_MS // 1000, "exp": NOW_MS // 1000 + 60}))
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiry_ms == NOW_MS + 60_000


@pytest.mark.parametrize(("claims", "header", "status"), [
    ({"sub": "alice", "exp": NOW_MS // 1000 - 1}, None, "invalid_token"),
    ({"sub": "alice"}, None, "invalid_token"),
    ({"exp": NOW_MS // 1000 + 60}, None, "invalid_token"),
    ({"sub": "alice", "exp": NOW_MS // 1000 + 60}, {"alg": "HS256"}, "invalid_token"),
    ({"sub": "alice", "iat": NOW_MS // 1000 + 100, "exp": NOW_MS // 1000 + 600}, None,
     "invalid_token"),
])
def test_unsecured_refusals_answer_the_rfc_json(claims, header, status):
    server = OAuthBearerServer(validator())
    with pytest.raises(SaslAuthenticationError) as e:
        exchange(server, jws(claims, header))
    assert json.loads(str(e.value)) == {"status": status}
    assert not server.complete


def test_required_scope():
    server = OAuthBearerServer(validator(unsecuredValidatorRequiredScope="write"))
    with pytest.raises(SaslAuthenticationError) as e:
        exchange(server, jws({"sub": "a", "exp": NOW_MS // 1000 + 9, "scope": "read"}))
    assert json.loads(str(e.value)) == {"status": "insufficient_scope", "scope": "write"}
    ok = OAuthBearerServer(validator(unsecuredValidatorRequiredScope="write"))
    exchange(ok, jws({"sub": "a", "exp": NOW_MS // 1000 + 9, "scope": "read write"}))
    assert ok.complete


@pytest.mark.parametrize("message", [b"garbage", b"n,,\x01auth=Basic abc\x01\x01",
                                     b"n,,\x01x=y\x01\x01"])
def test_malformed_first_messages(message):
    with pytest.raises(SaslError) as e:
        OAuthBearerServer(validator()).evaluate(message)
    assert str(e.value).startswith("Invalid")


def test_client_for_makes_an_unsecured_token_kafkas_way():
    client = client_for("OAUTHBEARER", None, None, {"unsecuredLoginStringClaim_sub": "bob",
                                                    "unsecuredLoginLifetimeSeconds": "60"})
    server = OAuthBearerServer(UnsecuredValidator())
    assert server.evaluate(client.initial_response()) == b""
    assert server.authorization_id == "bob"
    with pytest.raises(ValueError, match="unsecuredLoginStringClaim_sub is required"):
        unsecured_token({})


@pytest.fixture(scope="module")
def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks_file(tmp_path, key, kid="k1"):
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**jwk, "kid": kid, "alg": "RS256", "use": "sig"}]}))
    return f"file://{path}"


def signed(key, claims, kid="k1") -> str:
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def test_jwks_validator(tmp_path, rsa_key):
    v = JwksValidator(jwks_file(tmp_path, rsa_key), audience=["spool"], issuer="https://idp")
    now = int(time.time())
    good = {"sub": "carol", "aud": "spool", "iss": "https://idp", "iat": now, "exp": now + 60}
    token = v(signed(rsa_key, good))
    assert (token.principal, token.expiry_ms) == ("carol", (now + 60) * 1000)
    for bad in ({**good, "aud": "other"}, {**good, "iss": "https://evil"},
                {**good, "exp": now - 3600}):
        with pytest.raises(TokenError):
            v(signed(rsa_key, bad))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenError):
        v(signed(other, good))  # signed by a key not in the set
    with pytest.raises(TokenError):
        v(jws(good))  # an unsecured token is not a validated one


@pytest.mark.parametrize("jwk_alg", ["RS256", None])
@pytest.mark.parametrize("alg", ["HS256", "RS512", "none"])
def test_the_key_not_the_token_header_decides_the_algorithm(tmp_path, rsa_key, alg, jwk_alg):
    """A JWK naming its "alg" takes only that; one without takes its type's (RSA: RS*/PS*).
    An HS256 or unsecured header naming an RSA key is a refused token, never tried."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}
                                         | ({"alg": jwk_alg} if jwk_alg else {})]}))
    v = JwksValidator(f"file://{path}")
    now = int(time.time())
    claims = {"sub": "mallory", "iat": now, "exp": now + 60}
    if alg == "HS256":
        token = jwt.encode(claims, "a shared secret of at least 32 bytes", algorithm="HS256",
                           headers={"kid": "k1"})
    elif alg == "RS512":
        token = jwt.encode(claims, rsa_key, algorithm="RS512", headers={"kid": "k1"})
    else:
        token = jws(claims, {"alg": "none", "kid": "k1"})
    if alg == "RS512" and jwk_alg is None:
        assert v(token).principal == "mallory"
        return
    with pytest.raises(TokenError):
        v(token)


def test_jwks_url_must_be_a_file(tmp_path):
    with pytest.raises(ValueError, match="Spool reads a JWKS file"):
        JwksValidator("https://idp/jwks")
    with pytest.raises(ValueError, match="cannot read the JWKS file"):
        JwksValidator(f"file://{tmp_path}/missing.json")


def test_an_authorization_id_other_than_the_principal_is_refused():
    server = OAuthBearerServer(validator())
    token = jws({"sub": "alice", "exp": NOW_MS // 1000 + 60})
    with pytest.raises(SaslAuthenticationError, match=r"authorization id \(bob\) that is "
                                                      r"different from the token's principal"):
        server.evaluate(f"n,a=bob,\x01auth=Bearer {token}\x01\x01".encode())


def test_clock_skew_allows_a_just_expired_token():
    token = jws({"sub": "a", "exp": NOW_MS // 1000 - 1})
    assert validator(unsecuredValidatorAllowableClockSkewMs="5000")(token).principal == "a"
    with pytest.raises(TokenError):
        validator()(token)


def test_a_rotated_jwks_file_is_read_again(tmp_path, rsa_key):
    import os

    url = jwks_file(tmp_path, rsa_key, kid="old")
    v = JwksValidator(url)
    now = int(time.time())
    claims = {"sub": "x", "exp": now + 60}
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenError):
        v(signed(new_key, claims, kid="new"))
    jwks_file(tmp_path, new_key, kid="new")
    st = os.stat(tmp_path / "jwks.json")
    os.utime(tmp_path / "jwks.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert v(signed(new_key, claims, kid="new")).principal == "x"
