"""Who is calling: a publisher token validated by Boundary, and its environment's config.

The gateway never reads the metastore. It asks Boundary's workload API (an outbound mTLS call
with the deployment's workload JWT) to introspect the bearer token, and reads the caller's
environment's publisher config the same way. This module maps those answers onto the guide's
status table:

- 401: no token, a malformed one, or one Boundary does not know as active (unknown, expired,
  revoked, or of another tenant: they look alike on purpose);
- 403: an active token that is not a publisher token with the ``publish`` permission;
- 409: the token's scope has no evidence prefix here (ids outside the key layout, an
  environment Boundary no longer has, or no bucket configured for it);
- 503: Boundary unreachable or refusing the gateway's own workload identity.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import httpx
from cryptography import x509
from pydantic import ValidationError

from api.common.auth import TokenKind
from api.common.errors import Conflict, Forbidden, ServiceUnavailable, Unauthenticated
from api.common.workload_identity import names_in_cert
from api.dataplane.boundary_client import BoundaryClient, BoundaryError
from api.gateway.settings import GatewaySettings
from formats import object_keys as keys
from formats import upload_wire as uw

_log = logging.getLogger(__name__)


class BoundaryUnavailable(ServiceUnavailable):
    code = "boundary_unavailable"
    title = "Control plane unavailable"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


class NoEvidencePrefix(Conflict):
    code = "no_evidence_prefix"
    title = "The scope maps to no evidence prefix"


@dataclass(frozen=True, slots=True)
class PublisherIdentity:
    token_id: str
    scope: keys.Scope


@dataclass(frozen=True, slots=True)
class ClientTls:
    ca_cert: Path
    client_cert: Path
    client_key: Path


def client_tls(settings: GatewaySettings) -> tuple[ClientTls, str, str]:
    """The CA and client certificate in ``tls_dir``, and the deployment and cell it names.

    With ``deployment_id`` set the certificate is ``client-<deployment_id>.pem``; otherwise the
    directory must hold exactly one client certificate (the embedded stack writes one).
    """
    tls_dir = Path(settings.tls_dir)
    if settings.deployment_id:
        candidates = [tls_dir / f"client-{settings.deployment_id}.pem"]
    else:
        candidates = sorted(p for p in tls_dir.glob("client-*.pem") if not p.name.endswith("-key.pem"))
        candidates = [p for p in candidates if p.name != "client-boundary-self-check.pem"]
    if len(candidates) != 1 or not candidates[0].exists():
        raise RuntimeError(
            f"no single client certificate in {tls_dir}: set BAML_STUDIO_GATEWAY_DEPLOYMENT_ID "
            "or BAML_STUDIO_GATEWAY_TLS_DIR"
        )
    cert_path = candidates[0]
    names = names_in_cert(x509.load_pem_x509_certificate(cert_path.read_bytes()))
    if names is None:
        raise RuntimeError(f"{cert_path} does not name a deployment (CN) and a cell (OU)")
    deployment_id = settings.deployment_id or names[0]
    cell = settings.cell or names[1]
    key_path = cert_path.with_name(cert_path.name.removesuffix(".pem") + "-key.pem")
    return ClientTls(tls_dir / "ca.pem", cert_path, key_path), deployment_id, cell


def build_boundary_client(settings: GatewaySettings) -> BoundaryClient:
    tls, deployment_id, cell = client_tls(settings)
    return BoundaryClient(
        settings.boundary_workload_url,
        tls,
        deployment_id,
        cell,
        timeout=settings.boundary_timeout_seconds,
        attempts=settings.boundary_attempts,
        introspection_ttl_seconds=settings.token_cache_seconds,
        inactive_ttl_seconds=min(5.0, settings.token_cache_seconds),
    )


def _boundary_failed(what: str, exc: Exception) -> BoundaryUnavailable:
    code = exc.code if isinstance(exc, BoundaryError) else type(exc).__name__
    _log.warning("boundary call failed call=%s error=%s", what, code)
    return BoundaryUnavailable(
        "the control plane could not be reached to " + what, remedy="Back off with jitter and retry."
    )


_BOUNDARY_FAILURES = (BoundaryError, httpx.HTTPError, ValidationError, OSError, RuntimeError)


def authenticate_publisher(boundary: BoundaryClient, token: str) -> PublisherIdentity:
    try:
        info = boundary.introspect_token(token)
    except _BOUNDARY_FAILURES as exc:
        raise _boundary_failed("validate the token", exc) from None
    if not info.active:
        raise Unauthenticated(
            "token is unknown, expired or revoked",
            code="token_inactive",
            remedy="Stop shipping, keep files, reload the token and retry later.",
        )
    if info.kind != TokenKind.PUBLISHER.value or "publish" not in info.permissions:
        raise Forbidden(
            "this endpoint needs a publisher token with the publish permission",
            code="token_not_for_publishing",
            remedy="Use the environment's publisher token.",
        )
    if not (info.tenant_id and info.project_id and info.environment_id and info.token_id):
        raise Forbidden("the token does not name one environment", code="token_scope_incomplete")
    try:
        scope = keys.Scope(info.tenant_id, info.project_id, info.environment_id)
    except keys.InvalidKeyError:
        raise NoEvidencePrefix(
            f"environment {info.environment_id} has ids outside the evidence key layout"
        ) from None
    return PublisherIdentity(token_id=info.token_id, scope=scope)


def fetch_config(boundary: BoundaryClient, environment_id: str) -> uw.PublisherConfig:
    try:
        config = boundary.publisher_config(environment_id)
    except BoundaryError as exc:
        if exc.status == 404:
            raise NoEvidencePrefix(
                f"environment {environment_id} is not known to this deployment's tenant",
                remedy="Stop shipping; check the token's environment.",
            ) from None
        raise _boundary_failed("read the publisher config", exc) from None
    except _BOUNDARY_FAILURES as exc:
        raise _boundary_failed("read the publisher config", exc) from None
    return uw.PublisherConfig.model_validate(config.model_dump())
