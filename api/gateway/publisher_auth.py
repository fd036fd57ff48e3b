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
from pydantic import ValidationError

from api.common.auth import TokenKind
from api.common.errors import Conflict, Forbidden, ServiceUnavailable, Unauthenticated
from api.dataplane import workload_tls
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


def build_boundary_client(settings: GatewaySettings) -> BoundaryClient:
    found = workload_tls.discover(
        Path(settings.tls_dir),
        deployment_id=settings.deployment_id,
        cell=settings.cell,
        remedy="set BAML_STUDIO_GATEWAY_DEPLOYMENT_ID or BAML_STUDIO_GATEWAY_TLS_DIR",
    )
    return BoundaryClient(
        settings.boundary_workload_url,
        found.tls,
        found.deployment_id,
        found.cell,
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
