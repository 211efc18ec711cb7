"""``--command-config FILE``: Java client security properties, as Kafka's tools take them.

Contract:

- :func:`load(path)` reads a Java ``.properties`` file (``key=value``, ``key: value``
  or ``key value``; ``#``/``!`` comments; ``\\`` line continuations and escapes) and
  returns a :class:`CommandConfig`, or raises :class:`CommandConfigError` with one
  line naming the file and what is wrong: an unreadable file, an unknown key, an
  unsupported value (a JKS store, GSSAPI, ...), a malformed ``sasl.jaas.config``, a
  store that does not open with its password. Everything is read and checked here,
  so a command fails before it connects.
- Keys understood (Kafka's client names): ``security.protocol`` (PLAINTEXT, SSL,
  SASL_PLAINTEXT, SASL_SSL); ``ssl.truststore.type`` (PEM, PKCS12; JKS refused),
  ``ssl.truststore.location``, ``ssl.truststore.password``,
  ``ssl.truststore.certificates`` (inline PEM); ``ssl.keystore.type`` (PEM, PKCS12),
  ``ssl.keystore.location``, ``ssl.keystore.password``, ``ssl.key.password``,
  ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` (inline PEM);
  ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default, or empty to
  skip the host name check); ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512, OAUTHBEARER); ``sasl.jaas.config`` with one of Kafka's
  ``PlainLoginModule`` / ``ScramLoginModule`` (``username``, ``password``) or
  ``OAuthBearerLoginModule`` with the unsecured-token options
  (``unsecuredLoginStringClaim_<claim>``, ``unsecuredLoginListClaim_<claim>``,
  ``unsecuredLoginNumberClaim_<claim>``, ``unsecuredLoginPrincipalClaimName``,
  ``unsecuredLoginScopeClaimName``, ``unsecuredLoginLifetimeSeconds``,
  ``unsecuredLoginExtension_<name>``); ``client.id``. A store's type, when not
  given, is read from the file (PEM text or PKCS12).
- :meth:`CommandConfig.librdkafka` maps it onto librdkafka's keys for
  confluent-kafka clients. librdkafka reads only PEM trust stores from files, so a
  PKCS12 trust store (or inline certificates) and an inline certificate chain are
  written as PEM (certificates only, nothing secret: an inline key goes as
  ``ssl.key.pem``) to a private temporary directory removed at exit. An unsecured
  OAUTHBEARER login becomes librdkafka's ``sasl.oauthbearer.config``, which carries
  the principal, scope, lifetime and extensions only: other claims are refused.
- Spool's own client (``spool.net``, the wire commands) takes ``security``: the
  same properties read by ``spool.security.client_config.ClientSecurity`` (store
  types filled in as read from the files), built here so that both clients accept
  the same files; ``spool.cli.wire.node_client_options`` passes it on.
- ``ssl.enabled.protocols`` / ``ssl.protocol`` are checked (TLSv1.2, TLSv1.3) but
  not passed to librdkafka, which has no such setting (it negotiates the highest
  version both sides have); ``ssl.cipher.suites`` becomes ``ssl.cipher.suites``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spool.security import client_config
from spool.security.client_config import ClientConfigError, ClientSecurity
from spool.security.sasl.oauthbearer import UnsecuredLogin, unsecured_login
from spool.util.properties import parse_properties

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
STORE_TYPES = ("PEM", "PKCS12")
KNOWN_KEYS = client_config.KNOWN_KEYS | {"client.id"}
LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": ("OAUTHBEARER",),
}


class CommandConfigError(ValueError):
    """A command config that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class CommandConfig:
    """A parsed and checked command config (module docstring)."""

    path: str
    security_protocol: str = "PLAINTEXT"
    client_id: str | None = None
    ca_pem: str | None = None  # trusted certificates, PEM; None: the system's defaults
    ca_file: str | None = None  # the trust store's path when it already is PEM
    truststore_type: str | None = None  # PEM | PKCS12 (given, or read from the file)
    keystore_type: str | None = None  # PEM | PKCS12 | None (no client certificate)
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    cert_chain_pem: str | None = None  # inline ssl.keystore.certificate.chain
    key_pem: str | None = None  # inline ssl.keystore.key
    check_hostname: bool = True
    cipher_suites: str | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    oauth: UnsecuredLogin | None = None
    security: ClientSecurity = ClientSecurity()  # spool.net's reading of the same file

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka (librdkafka) configuration entries for this config."""
        conf: dict[str, Any] = {"security.protocol": self.security_protocol.lower()}
        if self.client_id:
            conf["client.id"] = self.client_id
        if self.uses_tls:
            if self.ca_file:
                conf["ssl.ca.location"] = self.ca_file
            elif self.ca_pem:
                conf["ssl.ca.location"] = _temp_file("truststore.pem", self.ca_pem)
            conf["ssl.endpoint.identification.algorithm"] = (
                "https" if self.check_hostname else "none")
            if self.cipher_suites:
                conf["ssl.cipher.suites"] = self.cipher_suites
            if self.keystore_type == "PKCS12":
                conf["ssl.keystore.location"] = self.keystore_location
                conf["ssl.keystore.password"] = self.keystore_password or ""
            elif self.keystore_type == "PEM":
                if self.keystore_location:
                    conf["ssl.certificate.location"] = self.keystore_location
                    conf["ssl.key.location"] = self.keystore_location
                else:  # the chain (public) as a file: librdkafka's ssl.certificate.pem
                    # takes one certificate; the key stays in memory
                    conf["ssl.certificate.location"] = _temp_file(
                        "certificate.pem", self.cert_chain_pem or "")
                    conf["ssl.key.pem"] = self.key_pem
                if self.key_password:
                    conf["ssl.key.password"] = self.key_password
        if self.uses_sasl:
            conf["sasl.mechanism"] = self.sasl_mechanism
            if self.oauth is not None:
                conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
                conf["sasl.oauthbearer.config"] = _librdkafka_oauth(self.oauth)
            else:
                conf["sasl.username"] = self.username
                conf["sasl.password"] = self.password
        return conf


# ---- reading the file


def load(path: str) -> CommandConfig:
    """Read, parse and check ``path`` (module docstring); CommandConfigError if unusable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CommandConfigError(f"cannot read command config {path}: "
                                 f"{getattr(e, 'strerror', None) or e}") from None
    props = parse_properties(text)
    try:
        return from_properties(props, path)
    except CommandConfigError as e:
        raise CommandConfigError(f"command config {path}: {e}") from None


def from_properties(props: dict[str, str], path: str = "<properties>") -> CommandConfig:
    """A CommandConfig from parsed properties (the checks of :func:`load`)."""
    unknown = sorted(set(props) - KNOWN_KEYS)
    if unknown:
        raise CommandConfigError(
            f"unknown key '{unknown[0]}' (understood: {', '.join(sorted(KNOWN_KEYS))})")
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(f"security.protocol={props['security.protocol']} is not one of "
                                 f"{', '.join(PROTOCOLS)}")
    fields: dict[str, Any] = {"path": path, "security_protocol": protocol,
                              "client_id": props.get("client.id")}
    if protocol in ("SSL", "SASL_SSL"):
        fields.update(_tls(props))
    else:
        stray = sorted(k for k in props if k.startswith("ssl."))
        if stray:
            raise CommandConfigError(f"'{stray[0]}' is set but security.protocol={protocol} "
                                     f"uses no TLS")
    if protocol.startswith("SASL_"):
        fields.update(_sasl(props))
    else:
        stray = sorted(k for k in props if k.startswith("sasl."))
        if stray:
            raise CommandConfigError(f"'{stray[0]}' is set but security.protocol={protocol} "
                                     f"uses no SASL")
    net = {k: v for k, v in props.items() if k != "client.id"}
    for store, kind in (("ssl.truststore", "truststore_type"), ("ssl.keystore", "keystore_type")):
        if fields.get(kind) and f"{store}.location" in net:  # the type read from the file
            net[f"{store}.type"] = fields[kind]
    try:
        fields["security"] = ClientSecurity.from_properties(net)
    except ClientConfigError as e:
        raise CommandConfigError(str(e)) from None
    return CommandConfig(**fields)


# ---- TLS


def _tls(props: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip()
    if algorithm.lower() not in ("https", ""):
        raise CommandConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: "
                                 f"expected https or an empty value")
    out["check_hostname"] = algorithm != ""
    for key in ("ssl.enabled.protocols", "ssl.protocol"):
        names = [p.strip() for p in props.get(key, "TLSv1.3").split(",") if p.strip()]
        if not names or set(names) - {"TLSv1.2", "TLSv1.3"}:
            raise CommandConfigError(f"{key}={props[key]}: expected TLSv1.2 and/or TLSv1.3")
    suites = props.get("ssl.cipher.suites", "").strip()
    if suites:
        out["cipher_suites"] = ":".join(x.strip() for x in suites.split(",") if x.strip())
    out.update(_truststore(props))
    out.update(_keystore(props))
    return out


def _store_type(props: dict[str, str], prefix: str, data: bytes | None) -> str:
    given = props.get(f"{prefix}.type")
    if given is None:  # Kafka's default is JKS; read what the file is instead
        return "PEM" if data is None or data.lstrip().startswith(b"-----BEGIN") else "PKCS12"
    kind = given.strip().upper()
    if kind == "JKS":
        raise CommandConfigError(
            f"{prefix}.type=JKS is not supported: convert the store with keytool "
            f"-importkeystore -deststoretype PKCS12, or use PEM")
    if kind not in STORE_TYPES:
        raise CommandConfigError(f"{prefix}.type={given} is not one of {', '.join(STORE_TYPES)}")
    return kind


def _read(props: dict[str, str], key: str) -> bytes:
    where = props[key]
    try:
        return Path(where).read_bytes()
    except OSError as e:
        raise CommandConfigError(f"cannot read {key} {where}: {e.strerror or e}") from None


def _truststore(props: dict[str, str]) -> dict[str, Any]:
    location, inline = props.get("ssl.truststore.location"), props.get("ssl.truststore.certificates")
    if location and inline:
        raise CommandConfigError("set ssl.truststore.location or ssl.truststore.certificates, "
                                 "not both")
    if inline:
        if _store_type(props, "ssl.truststore", None) != "PEM":
            raise CommandConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
        return {"ca_pem": _certificates(inline.encode(), "ssl.truststore.certificates")}
    if not location:
        for key in ("ssl.truststore.password", "ssl.truststore.type"):
            if key in props:
                raise CommandConfigError(f"'{key}' is set without ssl.truststore.location")
        return {}
    data = _read(props, "ssl.truststore.location")
    if _store_type(props, "ssl.truststore", data) == "PEM":
        return {"ca_pem": _certificates(data, "ssl.truststore.location " + location),
                "ca_file": location, "truststore_type": "PEM"}
    key, cert, extra = _open_pkcs12_bytes(data, props.get("ssl.truststore.password"),
                                          "ssl.truststore", location)
    certs = ([cert] if cert is not None else []) + extra
    if not certs:
        raise CommandConfigError(f"ssl.truststore.location {location} holds no certificate")
    from cryptography.hazmat.primitives import serialization  # ~0.2 s: only when used

    return {"ca_pem": "".join(c.public_bytes(serialization.Encoding.PEM).decode()
                              for c in certs), "truststore_type": "PKCS12"}


def _certificates(data: bytes, what: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509 import load_pem_x509_certificates

    try:
        certs = load_pem_x509_certificates(data)
    except ValueError:
        raise CommandConfigError(f"{what} holds no PEM certificate") from None
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def _keystore(props: dict[str, str]) -> dict[str, Any]:
    location = props.get("ssl.keystore.location")
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    key_password = props.get("ssl.key.password")
    if location and (chain or key):
        raise CommandConfigError("set ssl.keystore.location or ssl.keystore.certificate.chain/"
                                 "ssl.keystore.key, not both")
    if chain or key:
        if not (chain and key):
            raise CommandConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                                     "together")
        if _store_type(props, "ssl.keystore", None) != "PEM":
            raise CommandConfigError("inline ssl.keystore.* needs ssl.keystore.type=PEM")
        _certificates(chain.encode(), "ssl.keystore.certificate.chain")
        _private_key(key.encode(), key_password, "ssl.keystore.key")
        return {"keystore_type": "PEM", "cert_chain_pem": chain, "key_pem": key,
                "key_password": key_password}
    if not location:
        for k in ("ssl.keystore.password", "ssl.keystore.type", "ssl.key.password"):
            if k in props:
                raise CommandConfigError(f"'{k}' is set without ssl.keystore.location")
        return {}
    data = _read(props, "ssl.keystore.location")
    kind = _store_type(props, "ssl.keystore", data)
    if kind == "PEM":
        _certificates(data, f"ssl.keystore.location {location}")
        _private_key(data, key_password, f"ssl.keystore.location {location}")
        return {"keystore_type": "PEM", "keystore_location": location,
                "key_password": key_password}
    password = props.get("ssl.keystore.password")
    pkey, cert, _ = _open_pkcs12_bytes(data, password, "ssl.keystore", location)
    if pkey is None or cert is None:
        raise CommandConfigError(f"ssl.keystore.location {location} holds no private key with "
                                 f"its certificate")
    return {"keystore_type": "PKCS12", "keystore_location": location,
            "keystore_password": password, "key_password": key_password}


def _private_key(data: bytes, password: str | None, what: str) -> None:
    from cryptography.hazmat.primitives import serialization

    try:
        serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError:  # encrypted without a password, or a password for a clear key
        raise CommandConfigError(f"{what}: the key is encrypted and ssl.key.password is not "
                                 f"set" if not password else f"{what}: the key is not "
                                 f"encrypted but ssl.key.password is set") from None
    except ValueError:
        raise CommandConfigError(f"{what}: no readable private key (wrong ssl.key.password?)"
                                 ) from None


def _open_pkcs12_bytes(data: bytes, password: str | None, prefix: str, location: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        hint = "wrong or missing" if password is None else "wrong"
        raise CommandConfigError(f"{prefix}.location {location}: not a PKCS12 store, or a "
                                 f"{hint} {prefix}.password") from None


# ---- SASL


def _sasl(props: dict[str, str]) -> dict[str, Any]:
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise CommandConfigError(f"sasl.mechanism={props.get('sasl.mechanism', 'GSSAPI')} is not "
                                 f"supported (supported: {', '.join(MECHANISMS)})")
    jaas = props.get("sasl.jaas.config")
    if not jaas:
        raise CommandConfigError(f"sasl.mechanism={mechanism} needs sasl.jaas.config")
    module, options = parse_jaas(jaas)
    if module not in LOGIN_MODULES:
        raise CommandConfigError(f"sasl.jaas.config: login module {module} is not supported "
                                 f"(supported: {', '.join(sorted(LOGIN_MODULES))})")
    if mechanism not in LOGIN_MODULES[module]:
        raise CommandConfigError(f"sasl.jaas.config: {module.rsplit('.', 1)[1]} does not log in "
                                 f"with sasl.mechanism={mechanism}")
    out: dict[str, Any] = {"sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        out["oauth"] = _unsecured(options)
        _librdkafka_oauth(out["oauth"])  # what librdkafka cannot send is refused up front
        return out
    unknown = sorted(set(options) - {"username", "password"})
    if unknown:
        raise CommandConfigError(f"sasl.jaas.config: unknown option '{unknown[0]}' for "
                                 f"{module.rsplit('.', 1)[1]} (username, password)")
    for opt in ("username", "password"):
        if opt not in options:
            raise CommandConfigError(f"sasl.jaas.config: {opt} is not set")
    out.update(username=options["username"], password=options["password"])
    return out


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``Module flag k="v" ...;`` -> (module, options): exactly one login module, as a
    client takes (the grammar is spool.security.client_config's, Kafka's JaasConfig)."""
    try:
        entries = client_config.parse_jaas(text)
    except ClientConfigError as e:
        raise CommandConfigError(str(e)) from None
    if len(entries) != 1:
        raise CommandConfigError(f"sasl.jaas.config: {len(entries)} login modules; a client "
                                 f"takes exactly 1")
    return entries[0].login_module, dict(entries[0].options)


def _unsecured(options: dict[str, str]) -> UnsecuredLogin:
    other = sorted(k for k in options if not k.startswith("unsecuredLogin"))
    if other:
        raise CommandConfigError(
            f"sasl.jaas.config: OAuthBearerLoginModule option '{other[0]}' is not supported "
            f"(only the unsecuredLogin* options of Kafka's unsecured tokens)")
    try:
        return unsecured_login(options)
    except ValueError as e:
        raise CommandConfigError(f"sasl.jaas.config: {e}") from None


def _librdkafka_oauth(tok: UnsecuredLogin) -> str:
    """librdkafka's ``sasl.oauthbearer.config`` (its unsecured JWT builder's options)."""
    for name in tok.claims:
        if name not in (tok.principal_claim, tok.scope_claim):
            raise CommandConfigError(f"claim '{name}': librdkafka's unsecured tokens carry only "
                                     f"the principal and scope claims")
    parts = [f"principalClaimName={tok.principal_claim}", f"principal={tok.principal}",
             f"lifeSeconds={tok.lifetime_s}"]
    scope = tok.claims.get(tok.scope_claim)
    if scope:
        parts += [f"scopeClaimName={tok.scope_claim}",
                  "scope=" + ",".join(scope if isinstance(scope, list) else [str(scope)])]
    parts += [f"extension_{k}={v}" for k, v in tok.extensions.items()]
    for part in parts:
        if " " in part:
            raise CommandConfigError(f"'{part}': librdkafka's sasl.oauthbearer.config takes no "
                                     f"spaces in values")
    return " ".join(parts)


# ---- temporary PEM files for librdkafka

_tmpdir: str | None = None


def _temp_file(name: str, text: str) -> str:
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = tempfile.mkdtemp(prefix="spool-cli-")
        atexit.register(shutil.rmtree, _tmpdir, True)
    path = os.path.join(_tmpdir, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path
