"""A certificate authority of the test's own, and a server certificate it signs for 127.0.0.1,
for the servers a client must reach over HTTPS (Azurite in OAuth mode, the Entra ID stand-in):
a bearer token is refused over plain HTTP by both the Azure SDK and Azurite.

The clients trust the authority through the setting each already reads - `REQUESTS_CA_BUNDLE`
for requests (which azure-core's transport and MSAL use) - never by turning verification off:
a test that passed with verification off would not show that the real chain of trust works.

The authority is a proper CA (basicConstraints CA:TRUE, keyCertSign, key identifiers) and the
leaf names its address in subjectAltName, so that OpenSSL's strict verification accepts both.
"""

from __future__ import annotations

import datetime
import ipaddress
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TestAuthority:
    """PEM files: `ca` (the authority, to trust), `cert` and `key` (the server's)."""

    ca: Path
    cert: Path
    key: Path


def make_authority(folder: Path | None = None) -> TestAuthority:
    """A fresh authority and a server certificate for 127.0.0.1 and localhost, valid a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder or tempfile.mkdtemp(prefix="tls-"))
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "workqueue test authority")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = TestAuthority(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    paths.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths
