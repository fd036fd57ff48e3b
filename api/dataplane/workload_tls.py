"""The deployment's client TLS material for Boundary's workload API: one definition for every caller.

A deployment's processes (gateway, coordinator, Temporal worker, SQS bridge) all present the same
kind of identity to Boundary: the dev CA (``ca.pem``) and the client certificate
``client-<deployment_id>.pem`` with its key ``client-<deployment_id>-key.pem``, in one TLS
directory. The certificate names the deployment (CN) and its cell (OU)
(api/common/workload_identity.py), so a process that was not told its deployment finds it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509

from api.common.workload_identity import names_in_cert

# The certificate Boundary's own readiness probe uses; never a deployment's identity.
_SELF_CHECK_CERT = "client-boundary-self-check.pem"


class TlsMaterial(Protocol):
    """Anything holding the three paths (a :class:`ClientTls`, or the dev PKI of the tests)."""

    @property
    def ca_cert(self) -> Path: ...
    @property
    def client_cert(self) -> Path: ...
    @property
    def client_key(self) -> Path: ...


@dataclass(frozen=True, slots=True)
class ClientTls:
    ca_cert: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def in_dir(cls, tls_dir: Path, deployment_id: str) -> ClientTls:
        """The deployment's material in ``tls_dir``, by the file names the dev PKI writes."""
        return cls(
            tls_dir / "ca.pem",
            tls_dir / f"client-{deployment_id}.pem",
            tls_dir / f"client-{deployment_id}-key.pem",
        )

    @classmethod
    def of(cls, material: TlsMaterial) -> ClientTls:
        return cls(material.ca_cert, material.client_cert, material.client_key)


@dataclass(frozen=True, slots=True)
class DeploymentTls:
    """The material, and the deployment and cell the caller speaks for."""

    tls: ClientTls
    deployment_id: str
    cell: str


def discover(tls_dir: Path, *, deployment_id: str | None, cell: str | None, remedy: str) -> DeploymentTls:
    """The client certificate in ``tls_dir`` and the deployment and cell it names.

    With ``deployment_id`` set the certificate is ``client-<deployment_id>.pem``; otherwise the
    directory must hold exactly one deployment certificate (the embedded stack writes one). The
    given ``cell`` wins over the certificate's OU. ``remedy`` names the settings that fix a
    directory that does not answer (each process has its own variables).
    """
    if deployment_id:
        candidates = [tls_dir / f"client-{deployment_id}.pem"]
    else:
        candidates = sorted(
            p
            for p in tls_dir.glob("client-*.pem")
            if not p.name.endswith("-key.pem") and p.name != _SELF_CHECK_CERT
        )
    if len(candidates) != 1 or not candidates[0].exists():
        raise RuntimeError(f"no single client certificate in {tls_dir}: {remedy}")
    cert = candidates[0]
    names = names_in_cert(x509.load_pem_x509_certificate(cert.read_bytes()))
    if names is None:
        raise RuntimeError(f"{cert} does not name a deployment (CN) and a cell (OU)")
    key = cert.with_name(cert.name.removesuffix(".pem") + "-key.pem")
    tls = ClientTls(tls_dir / "ca.pem", cert, key)
    return DeploymentTls(tls, deployment_id or names[0], cell or names[1])
