"""Metastore rows to wire models (formats.boundary_wire)."""

from __future__ import annotations

from typing import Any, cast

from api.boundary import models as m
from api.boundary.metastore import permissions_of
from formats import boundary_wire as w


def tenant(t: m.Tenant) -> w.Tenant:
    return w.Tenant(tenant_id=t.id, name=t.name, created_at=t.created_at)


def project(p: m.Project) -> w.Project:
    return w.Project(project_id=p.id, tenant_id=p.tenant_id, name=p.name, created_at=p.created_at)


def environment(e: m.Environment) -> w.Environment:
    return w.Environment(
        environment_id=e.id,
        project_id=e.project_id,
        tenant_id=e.tenant_id,
        name=e.name,
        active_generation=e.active_generation,
        created_at=e.created_at,
    )


def deployment(d: m.Deployment) -> w.Deployment:
    return w.Deployment(
        deployment_id=d.id,
        tenant_id=d.tenant_id,
        name=d.name,
        cell=d.cell,
        kind=cast(Any, d.kind),
        created_at=d.created_at,
    )


def _token_fields(t: m.Token) -> dict[str, Any]:
    return {
        "token_id": t.id,
        "kind": t.kind,
        "name": t.name,
        "display_prefix": t.display_prefix,
        "tenant_id": t.tenant_id,
        "project_id": t.project_id,
        "environment_id": t.environment_id,
        "permissions": permissions_of(t),
        "created_at": t.created_at,
        "expires_at": t.expires_at,
        "revoked_at": t.revoked_at,
        "rotated_from": t.rotated_from,
        "replaced_by": t.replaced_by,
    }


def token(t: m.Token) -> w.Token:
    return w.Token.model_validate(_token_fields(t))


def issued_token(t: m.Token, secret: str | None) -> w.IssuedToken:
    return w.IssuedToken.model_validate({**_token_fields(t), "secret": secret})


def catalog_version(c: m.CatalogVersion) -> w.CatalogVersion:
    return w.CatalogVersion(version=c.version, digest=c.digest, registered_at=c.registered_at)


def active_generation(e: m.Environment) -> w.ActiveGeneration:
    return w.ActiveGeneration(
        environment_id=e.id, generation=e.active_generation, updated_at=e.generation_updated_at
    )


def snapshot(s: m.QuerySnapshot) -> w.QuerySnapshot:
    return w.QuerySnapshot(
        snapshot_id=s.id,
        tenant_id=s.tenant_id,
        project_id=s.project_id,
        environment_id=s.environment_id,
        catalog_version=s.catalog_version,
        generation=s.generation,
        expires_at=s.expires_at,
    )
