"""A throwaway certificate authority for TLS tests: a CA, a server and a client certificate.

Everything is generated at run time with ``cryptography`` into a directory the test owns (its
``tmp_path``); nothing is checked in and nothing outlives the test. The server certificate names
``127.0.0.1`` and ``localhost`` so clients verify the host name as they would in production.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("localhost",)
SERVER_IPS = ("127.0.0.1",)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one throwaway CA and the certificates it issued."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Jetfleet tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.now(timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
    )


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    usage: x509.ObjectIdentifier,
    san: list[x509.GeneralName] | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(common_name, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_ca(directory: Path, name: str = "jetfleet-test-ca") -> TlsFiles:
    """Generate a CA plus a server (SAN 127.0.0.1, localhost) and a client certificate.

    Files go to ``directory/<name>/``; call twice with two names for two unrelated CAs.
    """
    out = directory / name
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = _name(name)
    ca_cert = (
        _builder(name, ca_subject, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    san: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_NAMES]
    san += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVER_IPS]
    server_cert, server_key = _leaf(
        ca_cert, ca_key, "localhost", ExtendedKeyUsageOID.SERVER_AUTH, san
    )
    client_cert, client_key = _leaf(ca_cert, ca_key, "gw-tls", ExtendedKeyUsageOID.CLIENT_AUTH)
    files = TlsFiles(
        ca_cert=out / "ca.pem",
        ca_key=out / "ca.key",
        server_cert=out / "server.pem",
        server_key=out / "server.key",
        client_cert=out / "client.pem",
        client_key=out / "client.key",
    )
    _write_cert(ca_cert, files.ca_cert)
    _write_key(ca_key, files.ca_key)
    _write_cert(server_cert, files.server_cert)
    _write_key(server_key, files.server_key)
    _write_cert(client_cert, files.client_cert)
    _write_key(client_key, files.client_key)
    return files
