"""SASL/OAUTHBEARER (RFC 7628), server and client, with Kafka's two token checks.

The client's one message: ``n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A...]^A``.
The server checks the token with a validator (below). Accepted: it answers an empty
token, the principal is the token's principal claim and the session lasts no longer
than the token (``credential_expiry_ms``, its ``exp``; KIP-368). Refused: it answers
the RFC's JSON error (``{"status":"invalid_token"}``; ``insufficient_scope`` with the
scope missing) as a challenge, the client answers ``^A`` and the server fails with that
JSON as the message (Kafka's OAuthBearerSaslServer). A message that does not parse
fails at once ("Invalid OAUTHBEARER client first message").

Validators (``TokenValidator``: ``validate(token) -> Token``, ``TokenError`` otherwise):

- ``UnsecuredValidator``: Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, for
  development: an unsecured JWS (``alg`` ``none``, no signature) whose principal claim
  (``unsecuredValidatorPrincipalClaimName``, ``sub``) is a string, ``exp`` a number not
  in the past, ``iat`` (if any) not in the future and before ``exp`` (give or take
  ``unsecuredValidatorAllowableClockSkewMs``), holding ``unsecuredValidatorRequiredScope``.
- ``JwksValidator``: Kafka's OAuthBearerValidatorCallbackHandler: a JWT signed by a key of
  a JWKS file (``sasl.oauthbearer.jwks.endpoint.url=file:///...``, re-read when the file
  changes), checked by PyJWT: signature, ``exp``/``nbf``/``iat`` with
  ``sasl.oauthbearer.clock.skew.seconds``, ``aud`` among
  ``sasl.oauthbearer.expected.audience``, ``iss`` equal to
  ``sasl.oauthbearer.expected.issuer``; the principal is ``sasl.oauthbearer.sub.claim.name``.

The client side (``OAuthBearerClient``) sends a token it is given; ``unsecured_token``
makes one as Kafka's OAuthBearerUnsecuredLoginCallbackHandler does from its JAAS options
(``unsecuredLoginStringClaim_sub="alice"``, ``unsecuredLoginLifetimeSeconds``...).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spool.security.sasl import (
    OAUTHBEARER,
    SaslAuthenticationError,
    SaslClient,
    SaslError,
    SaslServer,
)

SEP = "\x01"
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_KV = re.compile(r"[A-Za-z]+=[\x21-\x7e \t\r\n]+")


class TokenError(Exception):
    """A token refused: ``str(e)`` why (logged), ``scope`` a missing required scope."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@dataclass(frozen=True)
class Token:
    principal: str
    expiry_ms: int  # wall-clock ms (the ``exp`` claim)
    claims: Mapping[str, Any] = field(default_factory=dict)


TokenValidator = Callable[[str], Token]


def _b64url_json(part: str, what: str) -> dict:
    try:
        data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise TokenError(f"malformed JSON in the JWS {what}") from e
    if not isinstance(value, dict):
        raise TokenError(f"the JWS {what} is not a JSON object")
    return value


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"The {name} claim had the incorrect type: {type(value).__name__}")
    return float(value)


def _scopes(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


class UnsecuredValidator:
    """Kafka's unsecured JWS validation (module doc); options as its JAAS options."""

    def __init__(self, options: Mapping[str, str] | None = None,
                 wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        opts = dict(options or {})
        self.principal_claim = (opts.get("unsecuredValidatorPrincipalClaimName") or "").strip() \
            or "sub"
        self.scope_claim = (opts.get("unsecuredValidatorScopeClaimName") or "").strip() \
            or "scope"
        self.required_scope = (opts.get("unsecuredValidatorRequiredScope") or "").split()
        skew = (opts.get("unsecuredValidatorAllowableClockSkewMs") or "0").strip() or "0"
        try:
            self.skew_ms = int(skew)
        except ValueError as e:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs={skew}: not an "
                             f"integer") from e
        if self.skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        self.wall_ms = wall_ms

    def __call__(self, token: str) -> Token:
        parts = token.split(".")
        if len(parts) == 2 and token.endswith("."):
            parts.append("")
        if len(parts) != 3:
            raise TokenError(f"Unsecured JWS compact serializations must have 3 dot-separated "
                             f"Base64URL-encoded values, got {len(parts)}")
        header = _b64url_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenError("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenError("Unsecured JWS must not contain a digital signature")
        claims = _b64url_json(parts[1], "claims")
        principal = claims.get(self.principal_claim)
        if principal is None:
            raise TokenError(f"Required claim missing: {self.principal_claim}")
        if not isinstance(principal, str) or not principal.strip():
            raise TokenError(f"The {self.principal_claim} claim had the incorrect type")
        now = self.wall_ms()
        exp = _number(claims, "exp", True)
        iat = _number(claims, "iat", False)
        assert exp is not None
        if iat is not None and iat * 1000 > now + self.skew_ms:
            raise TokenError(f"The Issued At value ({iat} seconds) was after the indicated "
                             f"time ({now} ms) plus allowable clock skew ({self.skew_ms} ms)")
        if exp * 1000 <= now - self.skew_ms:
            raise TokenError(f"The indicated time ({now} ms) minus allowable clock skew "
                             f"({self.skew_ms} ms) was on or after the Expiration Time value "
                             f"({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenError(f"The Expiration Time time ({exp} seconds) was not after the "
                             f"Issued At time ({iat} seconds)")
        have = _scopes(claims.get(self.scope_claim))
        for scope in self.required_scope:
            if scope not in have:
                raise TokenError(f"The provided scope ({have}) was missing a required scope "
                                 f"({scope}). All required scope elements: "
                                 f"{self.required_scope}", scope=" ".join(self.required_scope))
        return Token(principal, round(exp * 1000), claims)


# the JWS algorithms of each JWK key type (RFC 7518), for a JWK without "alg"
_FAMILIES = {"RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
             "EC": ("ES256", "ES384", "ES512"), "OKP": ("EdDSA",)}


class JwksValidator:
    """Validated JWTs against a JWKS file (module doc)."""

    def __init__(self, jwks_url: str, audience: list[str] | None = None,
                 issuer: str | None = None, sub_claim: str = "sub",
                 clock_skew_s: int = 30) -> None:
        if not jwks_url.startswith("file:"):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={jwks_url}: Spool reads a "
                             f"JWKS file (file:///path), not a URL")
        path = jwks_url[len("file:"):]
        self.path = Path(path[2:] if path.startswith("//") else path)
        self.audience = audience or []
        self.issuer = issuer or None
        self.sub_claim = sub_claim
        self.clock_skew_s = clock_skew_s
        self._mtime: float | None = None
        self._keys: dict[str | None, Any] = {}
        self._load()

    def _load(self) -> None:
        import jwt

        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as e:
            raise ValueError(f"cannot read the JWKS file {self.path}: {e.strerror}") from e
        if mtime == self._mtime:
            return
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            keyset = jwt.PyJWKSet.from_dict(doc)
        except (OSError, ValueError, TypeError, jwt.PyJWTError) as e:
            raise ValueError(f"the JWKS file {self.path} is not a JSON Web Key Set: {e}") \
                from e
        self._keys = {k.key_id: k for k in keyset.keys}
        named = {jwk.get("kid"): jwk.get("alg") for jwk in doc.get("keys", ())
                 if isinstance(jwk, dict)}
        # what a token signed by each key may use: the JWK's "alg" when it names one, else
        # every algorithm of the key's type (never what the token's header alone says)
        self._algorithms = {kid: ([named[kid]] if named.get(kid)
                                  else list(_FAMILIES.get(k.key_type, (k.algorithm_name,))))
                            for kid, k in self._keys.items()}
        self._mtime = mtime

    def __call__(self, token: str) -> Token:
        import jwt

        try:
            self._load()
        except ValueError as e:
            raise TokenError(str(e)) from e
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenError(f"malformed JWT: {e}") from e
        key = self._keys.get(header.get("kid"))
        if key is None and len(self._keys) == 1 and header.get("kid") is None:
            key = next(iter(self._keys.values()))
        if key is None:
            raise TokenError(f"no key with kid {header.get('kid')!r} in {self.path}")
        options = {"require": ["exp"], "verify_aud": bool(self.audience)}
        try:
            claims = jwt.decode(token, key.key, algorithms=self._algorithms[key.key_id],
                                audience=self.audience or None, issuer=self.issuer,
                                leeway=self.clock_skew_s, options=options)
        except jwt.PyJWTError as e:
            raise TokenError(f"JWT refused: {e}") from e
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal:
            raise TokenError(f"Required claim missing: {self.sub_claim}")
        return Token(principal, round(float(claims["exp"]) * 1000), claims)


def parse_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authzid, extensions) of a client's first message; SaslError if malformed."""
    try:
        text = bytes(message).decode("utf-8")
    except UnicodeDecodeError as e:
        raise SaslError("Invalid OAUTHBEARER client first message") from e
    m = re.fullmatch(r"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kv>(?:[A-Za-z]+=[^\x01]*\x01)*)\x01",
                     text)
    if m is None:
        raise SaslError("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.split("=", 1) for kv in m["kv"].split(SEP) if kv)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am["scheme"] != "Bearer":
        raise SaslError(f"Invalid scheme in OAUTHBEARER client first message: {am['scheme']}")
    return am["token"], m["authzid"] or "", pairs


class OAuthBearerServer(SaslServer):
    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        super().__init__()
        self.validator = validator
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if bytes(token) == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        value, authzid, _extensions = parse_initial_response(token)
        try:
            checked = self.validator(value)
        except TokenError as e:
            status = "insufficient_scope" if e.scope is not None else "invalid_token"
            body = {"status": status, **({"scope": e.scope} if e.scope is not None else {})}
            self._error = json.dumps(body, separators=(",", ":"))
            self.reason = str(e)  # for the broker's log
            return self._error.encode()
        if authzid and authzid != checked.principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({checked.principal})")
        self.authorization_id = checked.principal
        self.credential_expiry_ms = checked.expiry_ms
        self.complete = True
        return b""


class OAuthBearerClient(SaslClient):
    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.token = token
        self.extensions = dict(extensions or {})

    def initial_response(self) -> bytes:
        ext = "".join(f"{k}={v}{SEP}" for k, v in self.extensions.items())
        return f"n,,{SEP}auth=Bearer {self.token}{SEP}{ext}{SEP}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if challenge:  # the server's JSON error: acknowledge, it fails with the reason
            self.error = bytes(challenge).decode("utf-8", errors="replace")
            return SEP.encode()
        self.complete = True
        return None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_LOGIN = "unsecuredLogin"


@dataclass(frozen=True)
class UnsecuredLogin:
    """Kafka's OAuthBearerUnsecuredLoginCallbackHandler options, read (``unsecured_login``)."""

    claims: dict[str, Any]  # string, number and list claims
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    lifetime_s: int = 3600
    extensions: dict[str, str] = field(default_factory=dict)

    @property
    def principal(self) -> str:
        return str(self.claims[self.principal_claim])

    def token(self, now_s: float | None = None) -> str:
        """The unsecured JWS (``alg: none``), ``iat`` now and ``exp`` a lifetime later."""
        now = int(time.time() if now_s is None else now_s)
        claims = {**self.claims}
        claims.setdefault("iat", now)
        claims.setdefault("exp", now + self.lifetime_s)
        header = _b64url(json.dumps({"alg": "none"}).encode())
        return f"{header}.{_b64url(json.dumps(claims).encode())}."


def unsecured_login(options: Mapping[str, str]) -> UnsecuredLogin:
    """The ``unsecuredLogin*`` JAAS options: ``StringClaim_<name>``, ``NumberClaim_<name>``,
    ``ListClaim_<name>`` (the first character separates), ``Extension_<name>``,
    ``PrincipalClaimName`` (sub), ``ScopeClaimName`` (scope), ``LifetimeSeconds`` (3600).
    Options without the prefix are not this handler's and are skipped. ValueError naming the
    option for an unknown ``unsecuredLogin`` option, a bad number, or no principal claim."""
    claims: dict[str, Any] = {}
    extensions: dict[str, str] = {}
    principal_claim, scope_claim, lifetime = "sub", "scope", 3600
    for key, value in options.items():
        if not key.startswith(_LOGIN):
            continue
        name = key[len(_LOGIN):]
        if name.startswith("StringClaim_"):
            claims[name[len("StringClaim_"):]] = value
        elif name.startswith("NumberClaim_"):
            try:
                claims[name[len("NumberClaim_"):]] = (int(value) if value.lstrip("-").isdigit()
                                                      else float(value))
            except ValueError:
                raise ValueError(f"{key}={value} is not a number") from None
        elif name.startswith("ListClaim_"):
            claims[name[len("ListClaim_"):]] = ([v for v in value[1:].split(value[0]) if v]
                                                if value else [])
        elif name.startswith("Extension_"):
            extensions[name[len("Extension_"):]] = value
        elif name == "PrincipalClaimName":
            principal_claim = value
        elif name == "ScopeClaimName":
            scope_claim = value
        elif name == "LifetimeSeconds":
            if not value.isdigit():
                raise ValueError(f"{key}={value} is not a number of seconds")
            lifetime = int(value)
        else:
            raise ValueError(f"unknown option '{key}'")
    if not isinstance(claims.get(principal_claim), str):
        raise ValueError(f"{_LOGIN}StringClaim_{principal_claim} is required (the token's "
                         f"principal)")
    return UnsecuredLogin(claims, principal_claim, scope_claim, lifetime, extensions)


def unsecured_token(options: Mapping[str, str], now_s: float | None = None) -> str:
    """An unsecured JWS from Kafka's OAuthBearerUnsecuredLoginCallbackHandler options
    (``unsecured_login``)."""
    return unsecured_login(options).token(now_s)
