"""Dev PKI and workload JWTs."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from api.common.errors import Unauthenticated
from api.common.workload_identity import (
    CertificateVerifier,
    WorkloadJwtSigner,
    ensure_dev_pki,
    names_in_cert,
)


def test_ensure_dev_pki_is_idempotent(tmp_path: Path) -> None:
    a = ensure_dev_pki(tmp_path, "dep_1", "cell-1")
    ca_bytes, server_bytes, client_bytes = (
        a.ca_cert.read_bytes(),
        a.server_cert.read_bytes(),
        a.client_cert.read_bytes(),
    )
    b = ensure_dev_pki(tmp_path, "dep_1", "cell-1")
    assert a == b
    assert (a.ca_cert.read_bytes(), a.server_cert.read_bytes(), a.client_cert.read_bytes()) == (
        ca_bytes,
        server_bytes,
        client_bytes,
    )
    assert (a.client_key.stat().st_mode & 0o777) == 0o600
    server = x509.load_pem_x509_certificate(server_bytes)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1"}
    client = x509.load_pem_x509_certificate(client_bytes)
    assert names_in_cert(client) == ("dep_1", "cell-1")
    # Another cell for the same deployment re-issues the client cert, same CA.
    c = ensure_dev_pki(tmp_path, "dep_1", "cell-2")
    assert names_in_cert(x509.load_pem_x509_certificate(c.client_cert.read_bytes())) == ("dep_1", "cell-2")
    assert c.ca_cert.read_bytes() == ca_bytes


def test_verifier_and_jwt_round_trip(tmp_path: Path) -> None:
    pki = ensure_dev_pki(tmp_path, "dep_1", "cell-1")
    peer = CertificateVerifier(pki.ca_cert).verify(pki.client_cert.read_text())
    assert (peer.deployment_id, peer.cell) == ("dep_1", "cell-1")
    signer = WorkloadJwtSigner(pki.jwt_key)
    token, expires = signer.issue(peer)
    claims = signer.verify(token)
    assert (claims.deployment_id, claims.cell, claims.thumbprint) == ("dep_1", "cell-1", peer.thumbprint)
    assert claims.expires_at == expires.replace(microsecond=0)
    # Another key (another Boundary) does not accept it.
    other = WorkloadJwtSigner(tmp_path / "other-key.pem")
    with pytest.raises(Unauthenticated):
        other.verify(token)
    with pytest.raises(Unauthenticated):
        signer.verify(token[:-4] + "AAAA")


def test_verifier_rejects_missing_foreign_and_garbage(tmp_path: Path) -> None:
    pki = ensure_dev_pki(tmp_path / "a", "dep_1", "cell-1")
    foreign = ensure_dev_pki(tmp_path / "b", "dep_1", "cell-1")
    verifier = CertificateVerifier(pki.ca_cert)
    for bad in (
        None,
        "",
        "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n",
        foreign.client_cert.read_text(),
    ):
        with pytest.raises(Unauthenticated):
            verifier.verify(bad)
