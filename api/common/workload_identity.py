"""Data-plane workload identity: a development CA, mTLS certificates and the workload JWT.

Who proves what:

* The client certificate (issued by the CA) names the deployment (subject CN) and the cell
  (subject OU). TLS verifies it against the CA; Boundary re-checks the chain and the names.
* Boundary signs the workload JWT (ES256, key ``workload-jwt-key.pem`` in the TLS dir) at
  ``POST /workload-tokens`` for a caller that presented a valid client certificate. The JWT
  names the deployment and cell and is bound to the certificate by its SHA-256 thumbprint
  (``cnf.x5t#S256``, RFC 8705), so a token lifted from one workload is useless without that
  workload's key. Every other workload call needs both, and they must agree.

``ensure_dev_pki`` is idempotent: files that exist are reused, so restarting the stack keeps
the same CA and clients keep trusting the server.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import os
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from api.common.errors import Unauthenticated

JWT_ISSUER = "baml-boundary"
JWT_AUDIENCE = "baml-boundary-workload"
JWT_ALGORITHM = "ES256"
JWT_TTL_SECONDS = 600
_ORG = "BAML Studio development"


@dataclass(frozen=True)
class DevPki:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    jwt_key: Path


@dataclass(frozen=True)
class WorkloadPeer:
    """What a verified client certificate says about its holder."""

    deployment_id: str
    cell: str
    thumbprint: str  # base64url SHA-256 of the DER certificate


@dataclass(frozen=True)
class WorkloadClaims:
    deployment_id: str
    cell: str
    thumbprint: str
    expires_at: dt.datetime
    jti: str


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} does not hold an EC private key")
    return key


def _ensure_key(path: Path) -> ec.EllipticCurvePrivateKey:
    if path.exists():
        return _load_key(path)
    key = ec.generate_private_key(ec.SECP256R1())
    _write_private(path, _key_pem(key))
    return key


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, _ORG)]
    if ou is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    days: int,
    ca: bool = False,
    server_names: list[str] | None = None,
    client: bool = False,
) -> x509.Certificate:
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    if ca:
        builder = builder.add_extension(
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
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if server_names:
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    if client:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def ensure_ca(tls_dir: Path) -> tuple[Path, Path]:
    tls_dir.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = tls_dir / "ca.pem", tls_dir / "ca-key.pem"
    if not (ca_cert.exists() and ca_key.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name("BAML Studio development CA")
        cert = _issue(name, key.public_key(), name, key, days=3650, ca=True)
        _write_private(ca_key, _key_pem(key))
        ca_cert.write_bytes(_cert_pem(cert))
    return ca_cert, ca_key


def _load_ca(tls_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ensure_ca(tls_dir)
    return x509.load_pem_x509_certificate(ca_cert.read_bytes()), _load_key(ca_key)


def issue_client_cert(
    tls_dir: Path, deployment_id: str, cell: str, *, stem: str | None = None, days: int = 365
) -> tuple[Path, Path]:
    """Issue (always anew) a client certificate naming ``deployment_id`` (CN) and ``cell`` (OU)."""
    ca, ca_key = _load_ca(tls_dir)
    stem = stem or f"client-{deployment_id}"
    cert_path, key_path = tls_dir / f"{stem}.pem", tls_dir / f"{stem}-key.pem"
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(_name(deployment_id, cell), key.public_key(), ca.subject, ca_key, days=days, client=True)
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(_cert_pem(cert))
    return cert_path, key_path


def _client_cert_matches(cert_path: Path, deployment_id: str, cell: str) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError):
        return False
    return names_in_cert(cert) == (deployment_id, cell) and cert.not_valid_after_utc > _now()


def ensure_dev_pki(tls_dir: Path, deployment_id: str, cell: str) -> DevPki:
    """Create, or reuse, the CA, Boundary's server cert, one client cert and the JWT key."""
    tls_dir = Path(tls_dir)
    ca_cert, ca_key_path = ensure_ca(tls_dir)
    ca, ca_key = _load_ca(tls_dir)
    server_cert, server_key = tls_dir / "server.pem", tls_dir / "server-key.pem"
    if not (server_cert.exists() and server_key.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(
            _name("localhost"),
            key.public_key(),
            ca.subject,
            ca_key,
            days=825,
            server_names=["localhost", "127.0.0.1", "::1"],
        )
        _write_private(server_key, _key_pem(key))
        server_cert.write_bytes(_cert_pem(cert))
    client_cert, client_key = (
        tls_dir / f"client-{deployment_id}.pem",
        tls_dir / f"client-{deployment_id}-key.pem",
    )
    if not (client_key.exists() and _client_cert_matches(client_cert, deployment_id, cell)):
        issue_client_cert(tls_dir, deployment_id, cell)
    jwt_key = tls_dir / "workload-jwt-key.pem"
    _ensure_key(jwt_key)
    return DevPki(
        ca_cert=ca_cert,
        ca_key=ca_key_path,
        server_cert=server_cert,
        server_key=server_key,
        client_cert=client_cert,
        client_key=client_key,
        jwt_key=jwt_key,
    )


def names_in_cert(cert: x509.Certificate) -> tuple[str, str] | None:
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ous = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    if len(cns) != 1 or len(ous) != 1:
        return None
    return str(cns[0].value), str(ous[0].value)


def cert_thumbprint(cert: x509.Certificate) -> str:
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class CertificateVerifier:
    """Checks a client certificate (PEM) against the CA and returns the peer it names."""

    def __init__(self, ca_cert_path: Path) -> None:
        self._ca = x509.load_pem_x509_certificate(Path(ca_cert_path).read_bytes())

    def verify(self, cert_pem: str | bytes | None) -> WorkloadPeer:
        if not cert_pem:
            raise Unauthenticated(
                "no client certificate was presented",
                remedy="Call the workload API over mTLS with the deployment's client certificate.",
                code="client_certificate_missing",
            )
        try:
            data = cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
            cert = x509.load_pem_x509_certificate(data)
            cert.verify_directly_issued_by(self._ca)
        except (ValueError, TypeError, InvalidSignature) as exc:
            raise Unauthenticated(
                "client certificate is not issued by the Boundary CA", code="client_certificate_invalid"
            ) from exc
        now = _now()
        if not (cert.not_valid_before_utc <= now <= cert.not_valid_after_utc):
            raise Unauthenticated(
                "client certificate is outside its validity period", code="client_certificate_invalid"
            )
        names = names_in_cert(cert)
        if names is None:
            raise Unauthenticated(
                "client certificate does not name one deployment (CN) and one cell (OU)",
                code="client_certificate_invalid",
            )
        return WorkloadPeer(deployment_id=names[0], cell=names[1], thumbprint=cert_thumbprint(cert))


class WorkloadJwtSigner:
    """Signs and verifies workload JWTs with Boundary's ES256 key."""

    def __init__(self, key_path: Path, *, ttl_seconds: int = JWT_TTL_SECONDS) -> None:
        self._key = _ensure_key(Path(key_path))
        self._public = self._key.public_key()
        self.ttl_seconds = ttl_seconds

    def issue(self, peer: WorkloadPeer) -> tuple[str, dt.datetime]:
        now = _now()
        expires = now + dt.timedelta(seconds=self.ttl_seconds)
        claims: dict[str, Any] = {
            "iss": JWT_ISSUER,
            "aud": JWT_AUDIENCE,
            "sub": peer.deployment_id,
            "cell": peer.cell,
            "cnf": {"x5t#S256": peer.thumbprint},
            "iat": int(now.timestamp()),
            "nbf": int(now.timestamp()) - 5,
            "exp": int(expires.timestamp()),
            "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, self._key, algorithm=JWT_ALGORITHM), expires

    def verify(self, token: str) -> WorkloadClaims:
        try:
            claims = jwt.decode(
                token,
                self._public,
                algorithms=[JWT_ALGORITHM],
                audience=JWT_AUDIENCE,
                issuer=JWT_ISSUER,
                options={"require": ["exp", "iat", "sub", "aud", "iss", "jti"]},
                leeway=5,
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthenticated(
                "workload token expired",
                remedy="POST /workload-tokens for a new one.",
                code="workload_token_expired",
            ) from exc
        except jwt.PyJWTError as exc:
            raise Unauthenticated(
                "workload token is invalid",
                remedy="POST /workload-tokens for a new one.",
                code="workload_token_invalid",
            ) from exc
        cnf = claims.get("cnf")
        thumb = cnf.get("x5t#S256") if isinstance(cnf, dict) else None
        cell = claims.get("cell")
        if not isinstance(thumb, str) or not isinstance(cell, str):
            raise Unauthenticated(
                "workload token lacks its certificate binding", code="workload_token_invalid"
            )
        return WorkloadClaims(
            deployment_id=str(claims["sub"]),
            cell=cell,
            thumbprint=thumb,
            expires_at=dt.datetime.fromtimestamp(int(claims["exp"]), dt.UTC),
            jti=str(claims["jti"]),
        )


def server_ssl_kwargs(pki: DevPki) -> dict[str, Any]:
    """uvicorn keyword arguments for a TLS listener that requires a CA-issued client cert."""
    return {
        "ssl_certfile": str(pki.server_cert),
        "ssl_keyfile": str(pki.server_key),
        "ssl_ca_certs": str(pki.ca_cert),
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
    }


def client_ssl_context(ca_cert: Path, client_cert: Path | None, client_key: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_cert))
    if client_cert is not None and client_key is not None:
        ctx.load_cert_chain(str(client_cert), str(client_key))
    return ctx
