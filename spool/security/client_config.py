"""Client security properties: how a Kafka client connects (TLS, SASL), Kafka's names.

``ClientSecurity`` is the one place that says how ``spool.net.client.NodeClient``
secures a connection. It is built from Java client properties (a tool's
``--command-config`` file, Kafka's ``client.properties``) by
``ClientSecurity.from_properties``, or by the broker for its own connections
(``spool.broker.peer_security``: the inter-broker and controller listeners'
settings, as Kafka's broker builds its client channels).

Properties read (Kafka's client names and defaults):

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL.
- TLS (SSL, SASL_SSL): ``ssl.truststore.type`` PEM or PKCS12 (JKS is refused: it
  cannot be read here) with ``ssl.truststore.location`` (and ``ssl.truststore.password``
  for PKCS12), or inline ``ssl.truststore.certificates`` (PEM); no truststore: the
  system's CAs (as the JVM's default trust). ``ssl.keystore.type`` PEM or PKCS12 with
  ``ssl.keystore.location``, ``ssl.keystore.password``, ``ssl.key.password``, or inline
  ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` (a client certificate, mTLS).
  ``ssl.endpoint.identification.algorithm``: ``https`` (default) checks the server
  certificate's name against the host connected to; empty turns the check off (the
  certificate is still verified against the trust). ``ssl.enabled.protocols``
  (TLSv1.2, TLSv1.3), ``ssl.cipher.suites`` (OpenSSL or IANA names, as OpenSSL takes them;
  TLS 1.3 suites are not configurable).
- SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism`` (Kafka's default GSSAPI is refused:
  no Kerberos here) PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; ``sasl.jaas.config``
  (``<LoginModule> required username="..." password="..." other="...";``), whose
  ``username``/``password`` are the credentials and whose other options go to the
  mechanism (OAUTHBEARER's ``unsecuredLoginStringClaim_sub``...).

``from_properties`` raises ``ClientConfigError`` (a ``ValueError``) naming the key and the
value; keys it does not read are listed in ``unknown`` (a tool may warn or refuse; other
client keys like ``client.id`` are common in such files). Pure: no I/O until
``ssl_context()``, which reads the store files.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

from spool.security.jaas import JaasConfigError, parse_jaas_modules

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
STORE_TYPES = ("PEM", "PKCS12")
_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

KNOWN_KEYS = frozenset("""
security.protocol sasl.mechanism sasl.jaas.config
ssl.truststore.type ssl.truststore.location ssl.truststore.password ssl.truststore.certificates
ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password
ssl.keystore.certificate.chain ssl.keystore.key
ssl.endpoint.identification.algorithm ssl.enabled.protocols ssl.protocol ssl.cipher.suites
""".split())


class ClientConfigError(ValueError):
    """A client security property is invalid; the message names the key."""


@dataclass(frozen=True)
class JaasEntry:
    """One ``LoginModule flag options;`` entry of a ``sasl.jaas.config``."""

    login_module: str
    control_flag: str
    options: Mapping[str, str]


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> list[JaasEntry]:
    """Kafka's JaasConfig grammar (``spool.security.jaas``): ``Module flag name="value" ...;``
    entries, quoted values with backslash escapes. ClientConfigError naming ``key``."""
    try:
        modules = parse_jaas_modules(text)
    except JaasConfigError as e:
        raise ClientConfigError(f"{key}: {e}") from None
    if not modules:
        raise ClientConfigError(f"{key}: no login module in {text!r}")
    return [JaasEntry(m.class_name, m.flag, dict(m.options)) for m in modules]


@dataclass(frozen=True)
class ClientSecurity:
    """How to secure a client connection (module docstring). The default is PLAINTEXT."""

    protocol: str = "PLAINTEXT"
    # TLS
    truststore_type: str = "PEM"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    keystore_type: str = "PEM"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    endpoint_identification: str = "https"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    # SASL
    sasl_mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    jaas_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    unknown: tuple[str, ...] = ()

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def describe(self) -> str:
        """``SASL_SSL/SCRAM-SHA-512 as admin``: for log lines and errors (no secrets)."""
        if not self.sasl:
            return self.protocol
        who = f" as {self.username}" if self.username else ""
        return f"{self.protocol}/{self.sasl_mechanism}{who}"

    # ---- building

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """Read Java client properties (module docstring); ClientConfigError on a bad one."""
        def get(key: str) -> str | None:
            v = props.get(key)
            return None if v is None else str(v).strip()

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(f"security.protocol={protocol}: expected one of "
                                    f"{', '.join(PROTOCOLS)}")
        kw: dict = {"protocol": protocol,
                    "unknown": tuple(sorted(k for k in props if k not in KNOWN_KEYS))}
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            v = get(key)
            if v is not None and v.upper() not in STORE_TYPES:
                raise ClientConfigError(f"{key}={v}: expected PEM or PKCS12 (JKS stores cannot "
                                        f"be read here: convert with keytool -importkeystore "
                                        f"-deststoretype PKCS12)")
            if v is not None:
                kw[key.split(".")[1] + "_type"] = v.upper()
        for key in ("ssl.truststore.location", "ssl.truststore.password",
                    "ssl.truststore.certificates", "ssl.keystore.location",
                    "ssl.keystore.password", "ssl.key.password",
                    "ssl.keystore.certificate.chain", "ssl.keystore.key"):
            v = get(key)
            if v:
                kw[key.removeprefix("ssl.").replace(".", "_")] = v
        if "truststore_certificates" in kw and "truststore_location" in kw:
            raise ClientConfigError("ssl.truststore.certificates and ssl.truststore.location "
                                    "are both set: set one")
        if "keystore_certificate_chain" in kw and "keystore_location" in kw:
            raise ClientConfigError("ssl.keystore.certificate.chain and ssl.keystore.location "
                                    "are both set: set one")
        if ("keystore_certificate_chain" in kw) != ("keystore_key" in kw):
            raise ClientConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go "
                                    "together")
        alg = get("ssl.endpoint.identification.algorithm")
        if alg is not None:
            if alg.lower() not in ("", "https"):
                raise ClientConfigError(f"ssl.endpoint.identification.algorithm={alg}: expected "
                                        f"https or empty")
            kw["endpoint_identification"] = alg.lower()
        protos = get("ssl.enabled.protocols")
        if protos is not None:
            names = tuple(p.strip() for p in protos.split(",") if p.strip())
            bad = [p for p in names if p not in _TLS_VERSIONS]
            if bad or not names:
                raise ClientConfigError(f"ssl.enabled.protocols={protos}: expected TLSv1.2 "
                                        f"and/or TLSv1.3")
            kw["enabled_protocols"] = names
        suites = get("ssl.cipher.suites")
        if suites:
            kw["cipher_suites"] = tuple(s.strip() for s in suites.split(",") if s.strip())
        mech = get("sasl.mechanism")
        if mech is not None:
            kw["sasl_mechanism"] = mech
        jaas = get("sasl.jaas.config")
        if jaas:
            entries = parse_jaas(jaas)
            if len(entries) != 1:  # Kafka's rule for the property
                raise ClientConfigError(f"sasl.jaas.config: JAAS config property contains "
                                        f"{len(entries)} login modules, should be 1 module")
            entry = entries[0]
            opts = dict(entry.options)
            kw["username"] = opts.pop("username", None)
            kw["password"] = opts.pop("password", None)
            kw["jaas_options"] = opts
        sec = cls(**kw)
        sec.check()
        return sec

    def check(self) -> None:
        """The cross-key rules; ClientConfigError."""
        if self.sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise ClientConfigError(
                    f"sasl.mechanism={self.sasl_mechanism}: expected one of "
                    f"{', '.join(MECHANISMS)}" + (" (GSSAPI, Kafka's default, is not supported: "
                                                  "set sasl.mechanism)"
                                                  if self.sasl_mechanism == "GSSAPI" else ""))
            if self.sasl_mechanism == "OAUTHBEARER":
                from spool.security.sasl.oauthbearer import unsecured_token

                try:  # the unsecured JWS a client makes from its options (Kafka's default)
                    unsecured_token(self.jaas_options)
                except ValueError as e:
                    raise ClientConfigError(f"sasl.jaas.config: OAUTHBEARER: {e}") from None
            elif self.username is None or self.password is None:
                module = ("plain.PlainLoginModule" if self.sasl_mechanism == "PLAIN"
                          else "scram.ScramLoginModule")
                raise ClientConfigError(
                    f"sasl.jaas.config: {self.sasl_mechanism} needs username=\"...\" and "
                    f"password=\"...\" (e.g. org.apache.kafka.common.security.{module}"
                    f" required username=\"alice\" password=\"...\";)")

    # ---- TLS

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client's SSLContext (None without TLS); reads the stores. ClientConfigError
        when a store cannot be read."""
        if not self.tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        versions = sorted(_TLS_VERSIONS[p] for p in self.enabled_protocols)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
        if self.cipher_suites:
            try:
                ctx.set_ciphers(":".join(self.cipher_suites))
            except ssl.SSLError as e:
                raise ClientConfigError(f"ssl.cipher.suites={','.join(self.cipher_suites)}: "
                                        f"{e.reason or e}") from None
        ctx.check_hostname = self.endpoint_identification == "https"
        ctx.verify_mode = ssl.CERT_REQUIRED
        trust = self._trust_pem()
        if trust is None:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:
            try:
                ctx.load_verify_locations(cadata=trust)
            except (ssl.SSLError, ValueError) as e:
                raise ClientConfigError(f"ssl.truststore: no certificate read: {e}") from None
        chain_key = self._keystore_pem()
        if chain_key is not None:
            _load_cert_chain(ctx, *chain_key, self.key_password)
        return ctx

    def _trust_pem(self) -> str | None:
        if self.truststore_certificates:
            return self.truststore_certificates
        if not self.truststore_location:
            return None
        data = _read(self.truststore_location, "ssl.truststore.location")
        if self.truststore_type == "PEM":
            return data.decode("ascii", "replace")
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        try:
            p12 = pkcs12.load_pkcs12(data, _pw(self.truststore_password))
        except ValueError as e:
            raise ClientConfigError(f"ssl.truststore.location={self.truststore_location}: "
                                    f"not a PKCS12 store this password opens ({e})") from None
        certs = [c.certificate for c in p12.additional_certs]
        if p12.cert is not None:
            certs.insert(0, p12.cert.certificate)
        if not certs:
            raise ClientConfigError(f"ssl.truststore.location={self.truststore_location}: "
                                    f"no certificate in the store")
        return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)

    def _keystore_pem(self) -> tuple[bytes, bytes] | None:
        """(certificate chain PEM, private key PEM) or None without a keystore."""
        if self.keystore_certificate_chain:
            return self.keystore_certificate_chain.encode(), (self.keystore_key or "").encode()
        if not self.keystore_location:
            return None
        data = _read(self.keystore_location, "ssl.keystore.location")
        if self.keystore_type == "PEM":  # key and chain in one file, as Kafka's PEM keystore
            return data, data
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )

        try:
            p12 = pkcs12.load_pkcs12(data, _pw(self.keystore_password))
        except ValueError as e:
            raise ClientConfigError(f"ssl.keystore.location={self.keystore_location}: not a "
                                    f"PKCS12 store this password opens ({e})") from None
        if p12.key is None or p12.cert is None:
            raise ClientConfigError(f"ssl.keystore.location={self.keystore_location}: no key "
                                    f"and certificate in the store")
        chain = p12.cert.certificate.public_bytes(Encoding.PEM) + b"".join(
            c.certificate.public_bytes(Encoding.PEM) for c in p12.additional_certs)
        key = p12.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        return chain, key


def _pw(password: str | None) -> bytes | None:
    return password.encode() if password else None


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ClientConfigError(f"{key}={path}: {e.strerror or e}") from None


def _load_cert_chain(ctx: ssl.SSLContext, chain: bytes, key: bytes,
                     key_password: str | None) -> None:
    """``load_cert_chain`` reads files only: write both to a private temp file, load, delete."""
    fd, path = tempfile.mkstemp(prefix="spool-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(chain if chain == key else chain.rstrip(b"\n") + b"\n" + key)
        ctx.load_cert_chain(path, password=key_password)
    except ssl.SSLError as e:
        raise ClientConfigError(f"ssl.keystore: the key and certificate chain do not load: "
                                f"{e.reason or e}") from None
    finally:
        os.unlink(path)
