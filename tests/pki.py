"""Throwaway keys for the tests: a CA with server and service certificates (mTLS), and an operator's
identity provider that signs RS256/ES256 tokens and publishes its keys as a JWKS."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from croupier_platform.auth import SERVICE_URI_PREFIX

NOT_BEFORE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
NOT_AFTER = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)


def _pem_key(key) -> bytes:  # noqa: ANN001
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@dataclass
class Ca:
    """A certificate authority of its own, written under `directory` (ca.pem)."""

    directory: Path
    name: str = "croupier test CA"
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.name)])
        self.certificate = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.file = self.directory / "ca.pem"
        self.file.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, dns: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",),
              service: str | None = None) -> tuple[Path, Path]:
        """A leaf certificate for servers and clients alike; `service` adds the SAN naming a Croupier
        service. Returns (certificate file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        if service:
            names.append(x509.UniformResourceIdentifier(SERVICE_URI_PREFIX + service))
        certificate = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH, x509.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_file, key_file = self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"
        cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(_pem_key(key))
        key_file.chmod(0o600)
        return cert_file, key_file


@dataclass
class SigningKey:
    kid: str
    algorithm: str  # RS256 or ES256
    key: object = None

    def __post_init__(self) -> None:
        if self.key is None:
            self.key = rsa.generate_private_key(65537, 2048) if self.algorithm == "RS256" else ec.generate_private_key(ec.SECP256R1())

    def public_jwk(self) -> dict:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        jwk = json.loads(algorithm.to_jwk(self.key.public_key()))  # type: ignore[attr-defined]
        return {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined]


@dataclass
class IdentityProvider:
    """The operator's: signs tokens with its current key; `jwks()` is what it publishes."""

    issuer: str = "https://id.casino.example"
    audience: str = "croupier"
    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey("key-1", "RS256")])

    def jwks(self) -> dict:
        return {"keys": [key.public_jwk() for key in self.keys]}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def rotate(self, key: SigningKey) -> None:
        self.keys.append(key)

    def sign(self, claims: dict, key: SigningKey | None = None) -> str:
        key = key or self.keys[-1]
        return jwt.encode(claims, key.key, algorithm=key.algorithm, headers={"kid": key.kid})  # type: ignore[arg-type]

    def mint(self, subject: str, role: str, issued_at: int, lifetime_s: int, key: SigningKey | None = None, **extra) -> str:
        """A token as the identity provider issues it (the same call shape as TokenAuthority.mint)."""
        claims = {"sub": subject, "role": role, "iss": self.issuer, "aud": self.audience, "iat": issued_at,
                  "exp": issued_at + lifetime_s, **extra}
        return self.sign(claims, key)
