"""Tokens, keys and certificates for the access-control tests, made with real cryptography."""

from __future__ import annotations

import datetime
import ipaddress
import time
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# The broker of the `auth_broker` fixture checks HS256 tokens with this secret, issuer and audience.
SECRET = "test-secret-7c1f0d5e9a8b4c3d2e1f0a9b8c7d6e5f"
ISSUER = "https://issuer.test"
AUDIENCE = "reginamq-tests"
ROLES = ("admin", "read-write", "read-only", "write-only")


def mint(role: str | None = None, *, sub: str = "tester", key=SECRET, algorithm: str = "HS256",
         lifetime: float = 600, headers: dict | None = None, **claims) -> str:
    """A signed token; ``role=None`` leaves the role out, extra claims override the defaults."""
    now = int(time.time())
    payload = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime, **claims}
    if role is not None:
        payload["role"] = role
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, key, algorithm=algorithm,
                      headers=headers)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def self_signed(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A certificate for ``host`` (an IP address) and its key, as PEM files in ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
