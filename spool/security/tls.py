"""A TLS listener from Kafka's ``ssl.*`` configs: its context and how it names clients.

``server_context(get)`` builds a listener's ``ssl.SSLContext``; ``get(key)`` returns a
key's value as the listener sees it (``BrokerConfig.listener_value``), None when unset
(Kafka's defaults apply then). Any bad setting raises ``TlsConfigError`` naming the key.
``ServerTls`` is what a connection on the listener needs: the context, and the
``SslPrincipalMapper`` that names an SSL listener's clients by their certificate
(``spool.security.ssl_principal``). The client side is ``spool.security.client_config``.

- ``ssl.keystore.type`` PEM or PKCS12 (Kafka's default, JKS, is Java's own format:
  refused with the keytool command that converts it). PEM: ``ssl.keystore.location``, a
  file holding the private key and the certificate chain, or inline
  ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``; an encrypted key's
  password is ``ssl.key.password``. PKCS12: ``ssl.keystore.location`` and
  ``ssl.keystore.password`` (``ssl.key.password`` tried too). A server needs one.
- ``ssl.truststore.type`` PEM (``ssl.truststore.location``, or inline
  ``ssl.truststore.certificates``) or PKCS12 (``ssl.truststore.location``,
  ``ssl.truststore.password``); none configured: the system's CAs (Java's cacerts).
- ``ssl.client.auth`` (server): ``required`` (no certificate, no connection),
  ``requested`` (verified when given), ``none``.
- ``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3 (older ones refused).
- ``ssl.cipher.suites``: IANA names as Java takes them (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``,
  ``TLS_AES_128_GCM_SHA256``) or OpenSSL's; empty: OpenSSL's defaults. Python 3.11 can pick
  the TLS 1.2 suites only: a list without any TLS 1.3 suite turns TLS 1.3 off (as it does
  in Java), a list with some of them leaves OpenSSL's TLS 1.3 suites on.

Keys given inline or from PKCS12 reach OpenSSL through a file in a private temporary
directory (mode 0700), removed as soon as it is loaded: Python's ``ssl`` loads keys
from files only.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spool.security.ssl_principal import SslPrincipalMapper

Get = Callable[[str], "str | None"]

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}
# the keys server_tls reads (what a dynamic change of them rebuilds)
KEYS = frozenset((
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.principal.mapping.rules"))
TLS13_SUITES = frozenset(("TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256",
                          "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                          "TLS_AES_128_CCM_8_SHA256"))
_KX = {"ECDHE_RSA": "ECDHE-RSA", "ECDHE_ECDSA": "ECDHE-ECDSA", "DHE_RSA": "DHE-RSA",
       "RSA": "", "ECDHE_PSK": "ECDHE-PSK", "DHE_DSS": "DHE-DSS"}
_ENC = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
        "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305", "AES_128_CBC_SHA256": "AES128-SHA256",
        "AES_256_CBC_SHA384": "AES256-SHA384", "AES_256_CBC_SHA256": "AES256-SHA256",
        "AES_128_CBC_SHA": "AES128-SHA", "AES_256_CBC_SHA": "AES256-SHA",
        "AES_128_CCM": "AES128-CCM", "AES_256_CCM": "AES256-CCM"}


class TlsConfigError(ValueError):
    """A TLS setting is missing, unreadable or wrong; the message names the key."""


def _value(get: Get, key: str, default: str | None = None) -> str | None:
    v = get(key)
    return default if v is None or v == "" else v


def _list(get: Get, key: str, default: str = "") -> list[str]:
    return [s.strip() for s in (_value(get, key, default) or "").split(",") if s.strip()]


def _password(get: Get, key: str) -> bytes | None:
    v = _value(get, key)
    return None if v is None else v.encode()


def _read(key: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{key}={location}: cannot read it: {e.strerror}") from None


def _store_type(get: Get, store: str) -> str:
    key = f"ssl.{store}.type"
    kind = (_value(get, key, "JKS") or "").upper()
    if kind == "JKS":
        raise TlsConfigError(
            f"{key}=JKS (Kafka's default): Spool reads PKCS12 and PEM {store}s; set {key} "
            f"(convert a JKS file with keytool -importkeystore -deststoretype PKCS12)")
    if kind not in ("PEM", "PKCS12"):
        raise TlsConfigError(f"{key}={kind}: expected PEM or PKCS12")
    return kind


def _load_pkcs12(key: str, data: bytes, passwords: list[bytes | None]):
    from cryptography.hazmat.primitives.serialization import pkcs12  # (only for PKCS12)

    last: Exception | None = None
    for password in passwords:
        try:
            return pkcs12.load_key_and_certificates(data, password)
        except (ValueError, TypeError) as e:
            last = e
    raise TlsConfigError(f"{key}: cannot open the PKCS12 store (wrong password?): {last}")


def _no_password() -> bytes:
    # (without a callback OpenSSL would prompt on the terminal for an encrypted key)
    raise TlsConfigError("the private key is encrypted: set ssl.key.password")


def _load_chain_pem(ctx: ssl.SSLContext, pem: bytes, password: bytes | None) -> None:
    with tempfile.TemporaryDirectory(prefix="spool-tls-") as d:
        path = os.path.join(d, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password if password is not None else _no_password)


def load_keystore(ctx: ssl.SSLContext, get: Get, required: bool) -> bool:
    """Load the key and certificate chain ``ssl.keystore.*`` names into ``ctx``; False if
    none is configured (a TlsConfigError when ``required``)."""
    location = _value(get, "ssl.keystore.location")
    chain = _value(get, "ssl.keystore.certificate.chain")
    inline_key = _value(get, "ssl.keystore.key")
    if location is None and chain is None and inline_key is None:
        if required:
            raise TlsConfigError("no keystore: set ssl.keystore.location (PEM or PKCS12), or "
                                 "ssl.keystore.certificate.chain and ssl.keystore.key (PEM)")
        return False
    kind = _store_type(get, "keystore")
    key_password = _password(get, "ssl.key.password")
    try:
        if chain is not None or inline_key is not None:
            if kind != "PEM" or location is not None or chain is None or inline_key is None:
                raise TlsConfigError(
                    "ssl.keystore.certificate.chain and ssl.keystore.key go together, with "
                    "ssl.keystore.type=PEM and no ssl.keystore.location")
            _load_chain_pem(ctx, (inline_key.strip() + "\n" + chain.strip() + "\n").encode(),
                            key_password)
        elif kind == "PEM":
            _read("ssl.keystore.location", location or "")
            ctx.load_cert_chain(location or "", password=key_password
                                if key_password is not None else _no_password)
        else:
            from cryptography.hazmat.primitives import serialization

            data = _read("ssl.keystore.location", location or "")
            key, cert, extra = _load_pkcs12(
                "ssl.keystore.location", data,
                [_password(get, "ssl.keystore.password"), key_password])
            if key is None or cert is None:
                raise TlsConfigError(f"ssl.keystore.location={location}: the PKCS12 store "
                                     f"holds no private key with its certificate")
            pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
            for c in (cert, *extra):
                pem += c.public_bytes(serialization.Encoding.PEM)
            _load_chain_pem(ctx, pem, None)
    except ssl.SSLError as e:
        raise TlsConfigError(f"the keystore ({location or 'inline PEM'}) cannot be used "
                             f"(wrong ssl.key.password, or not a key and its "
                             f"certificate?): {e}") from None
    return True


def load_truststore(ctx: ssl.SSLContext, get: Get, purpose: ssl.Purpose) -> None:
    """Load the CAs ``ssl.truststore.*`` names into ``ctx`` (the system's for ``purpose``
    when none)."""
    location = _value(get, "ssl.truststore.location")
    inline = _value(get, "ssl.truststore.certificates")
    if location is None and inline is None:
        ctx.load_default_certs(purpose)
        return
    kind = _store_type(get, "truststore")
    try:
        if inline is not None:
            if kind != "PEM" or location is not None:
                raise TlsConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM "
                                     "and no ssl.truststore.location")
            ctx.load_verify_locations(cadata=inline)
        elif kind == "PEM":
            _read("ssl.truststore.location", location or "")
            ctx.load_verify_locations(cafile=location)
        else:
            from cryptography.hazmat.primitives import serialization

            data = _read("ssl.truststore.location", location or "")
            _, cert, extra = _load_pkcs12("ssl.truststore.location", data,
                                          [_password(get, "ssl.truststore.password"), None])
            certs = [c for c in (cert, *extra) if c is not None]
            if not certs:
                raise TlsConfigError(f"ssl.truststore.location={location}: no certificates")
            ctx.load_verify_locations(cadata="".join(
                c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
    except ssl.SSLError as e:
        raise TlsConfigError(f"the truststore ({location or 'inline PEM'}) cannot be used: "
                             f"{e}") from None


def openssl_cipher(name: str) -> str:
    """An IANA cipher suite name (Java's) as OpenSSL names it; other names unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, enc = name[4:].partition("_WITH_")
    if kx not in _KX or enc not in _ENC:
        return name
    return "-".join(p for p in (_KX[kx], _ENC[enc]) if p)


def _protocols_and_ciphers(ctx: ssl.SSLContext, get: Get) -> None:
    enabled = _list(get, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
    bad = [p for p in enabled if p not in PROTOCOLS]
    if bad or not enabled:
        raise TlsConfigError(f"ssl.enabled.protocols={','.join(enabled)}: Spool serves "
                             f"TLSv1.2 and TLSv1.3 only")
    versions = sorted(PROTOCOLS[p] for p in enabled)
    suites = _list(get, "ssl.cipher.suites")
    if suites:
        tls12 = [openssl_cipher(s) for s in suites if s not in TLS13_SUITES]
        for name, openssl_name in zip(
                [s for s in suites if s not in TLS13_SUITES], tls12, strict=True):
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
            except ssl.SSLError:
                raise TlsConfigError(f"ssl.cipher.suites: {name} is not a cipher suite "
                                     f"OpenSSL has") from None
        if tls12:
            ctx.set_ciphers(":".join(tls12))
        elif ssl.TLSVersion.TLSv1_2 in versions:
            versions.remove(ssl.TLSVersion.TLSv1_2)  # TLS 1.3 suites only: no TLS 1.2
        if not any(s in TLS13_SUITES for s in suites):
            versions = [v for v in versions if v != ssl.TLSVersion.TLSv1_3]
        if not versions:
            raise TlsConfigError("ssl.cipher.suites leaves no suite for ssl.enabled.protocols")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def server_context(get: Get, client_auth: str | None = None) -> ssl.SSLContext:
    """A listener's context (module doc); ``client_auth`` overrides ``ssl.client.auth``
    (a SASL_SSL listener reads only its listener-prefixed value, KIP-684)."""
    auth = (client_auth if client_auth is not None
            else _value(get, "ssl.client.auth", "none") or "none")
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth}: expected required, requested or none")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols_and_ciphers(ctx, get)
    load_keystore(ctx, get, required=True)
    ctx.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        load_truststore(ctx, get, ssl.Purpose.CLIENT_AUTH)
    return ctx


@dataclass(frozen=True)
class ServerTls:
    """A TLS listener: its context; ``mapper`` names clients by their certificate's subject
    (SSL listeners; None on SASL_SSL, where SASL names them)."""

    context: ssl.SSLContext
    mapper: SslPrincipalMapper | None


def server_tls(get: Get, protocol: str, prefixed_client_auth: str | None = None) -> ServerTls:
    """The TLS side of a listener of security ``protocol`` (SSL or SASL_SSL). On SASL_SSL
    only the listener's own ``ssl.client.auth`` counts (``prefixed_client_auth``, KIP-684)."""
    if protocol == "SASL_SSL":
        return ServerTls(server_context(get, prefixed_client_auth or "none"), None)
    from spool.security.ssl_principal import SslPrincipalMapper  # (cryptography's x509)

    rules = _value(get, "ssl.principal.mapping.rules", "DEFAULT")
    try:
        mapper = SslPrincipalMapper(rules)
    except ValueError as e:
        raise TlsConfigError(f"ssl.principal.mapping.rules={rules}: {e}") from None
    return ServerTls(server_context(get), mapper)
