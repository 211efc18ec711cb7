"""Test certificates made with ``cryptography``: a CA, server and client certificates.

    pki = Pki(tmp_path)                      # a CA ("CN=Spool Test CA"), files under tmp_path
    server = pki.issue("CN=localhost", hosts=("127.0.0.1", "localhost"))
    alice = pki.issue("CN=alice,OU=eng,O=Acme")
    server.keystore_pem     # key + chain in one file: ssl.keystore.type=PEM, .location
    server.p12              # PKCS12 keystore (password PASSWORD): ssl.keystore.type=PKCS12
    pki.ca_pem              # the CA certificate: ssl.truststore.location (PEM), ssl.ca.location
    pki.truststore_p12      # the CA in a PKCS12 truststore (password PASSWORD)
    alice.cert_pem, alice.key_pem   # separate files (librdkafka, kafka-python, aiokafka)
    alice.chain_text, alice.key_text  # inline PEM (ssl.keystore.certificate.chain / .key)

Keys are ECDSA P-256 (fast to make). ``issue(..., key_password=...)`` encrypts the key
in ``keystore_pem``/``key_pem`` (PKCS#8, ssl.key.password). Certificates are valid from
a day ago for a year. Another ``Pki`` is another CA (the wrong-CA cases).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

PASSWORD = "changeit"


def _pem_key(key, password: str | None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Identity:
    """A certificate with its key, written out in every form the tests use."""

    subject: str
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_pem: Path
    key_pem: Path
    keystore_pem: Path
    p12: Path
    chain_text: str
    key_text: str


class Pki:
    """A CA under ``directory``; ``issue`` makes certificates it signs."""

    def __init__(self, directory: Path, ca_subject: str = "CN=Spool Test CA") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name.from_rfc4514_string(ca_subject)
        now = dt.datetime.now(dt.UTC)
        self.ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(self.ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.ca_key, hashes.SHA256())
        )
        self.ca_pem = self.dir / "ca.pem"
        self.ca_pem.write_bytes(_pem(self.ca_cert))
        self.truststore_p12 = self.dir / "truststore.p12"
        self.truststore_p12.write_bytes(pkcs12.serialize_key_and_certificates(
            None, None, None, [self.ca_cert],
            serialization.BestAvailableEncryption(PASSWORD.encode())))
        self._n = 0

    @property
    def ca_text(self) -> str:
        return _pem(self.ca_cert).decode()

    def issue(self, subject: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              key_password: str | None = None) -> Identity:
        """A certificate for ``subject`` (RFC 4514, ``CN=alice,O=Acme``) usable by a server
        for ``hosts`` and by a client."""
        self._n += 1
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name.from_rfc4514_string(subject))
            .issuer_name(self.ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        base = self.dir / f"id{self._n}"
        key_bytes = _pem_key(key, key_password)
        chain = _pem(cert) + _pem(self.ca_cert)
        ident = Identity(
            subject, cert, key, Path(f"{base}.crt"), Path(f"{base}.key"),
            Path(f"{base}.keystore.pem"), Path(f"{base}.p12"), chain.decode(),
            key_bytes.decode())
        ident.cert_pem.write_bytes(chain)
        ident.key_pem.write_bytes(key_bytes)
        ident.keystore_pem.write_bytes(key_bytes + chain)
        ident.p12.write_bytes(pkcs12.serialize_key_and_certificates(
            b"spool", key, cert, [self.ca_cert],
            serialization.BestAvailableEncryption(PASSWORD.encode())))
        return ident
