"""HTTP bodies that cross between the data plane and Boundary: one typed definition for both sides.

Boundary's FastAPI apps use these as request and response models (so the OpenAPI document is
generated from them) and the data plane's client parses responses with the same classes.
Every field here is a non-value: identifiers, names, states, counters, timestamps.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

API_VERSION = "0.3.0-proposal"

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")]
TokenKindName = Literal["publisher", "user", "operator"]
PermissionName = Literal["query", "erasure", "admin", "publish"]
DeploymentKind = Literal["byoc", "alien"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    # Responses ignore unknown fields so an older client keeps working after a field is added.
    model_config = ConfigDict(extra="ignore")


class Problem(_Out):
    """``application/problem+json`` (RFC 9457) with BAML's fields."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str | None = None
    retryable: bool = False
    remedy: str | None = None


# --- tenants, projects, environments, deployments -------------------------------------------------


class TenantCreate(_Model):
    name: Name
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "acme"}]})


class Tenant(_Out):
    tenant_id: str
    name: str
    created_at: dt.datetime


class TenantList(_Out):
    items: list[Tenant]


class ProjectCreate(_Model):
    name: Name
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "billing"}]})


class Project(_Out):
    project_id: str
    tenant_id: str
    name: str
    created_at: dt.datetime


class ProjectList(_Out):
    items: list[Project]


class EnvironmentCreate(_Model):
    name: Name
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "production"}]})


class Environment(_Out):
    environment_id: str
    project_id: str
    tenant_id: str
    name: str
    active_generation: int
    created_at: dt.datetime


class EnvironmentList(_Out):
    items: list[Environment]


class DeploymentCreate(_Model):
    name: Name
    cell: Name
    kind: DeploymentKind = "byoc"
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "acme-us-east-1", "cell": "byoc-acme-1", "kind": "byoc"}]},
    )


class Deployment(_Out):
    deployment_id: str
    tenant_id: str
    name: str
    cell: str
    kind: DeploymentKind
    created_at: dt.datetime


class DeploymentList(_Out):
    items: list[Deployment]


# --- tokens ----------------------------------------------------------------------------------------


class TokenIssue(_Model):
    """Issue a token. Scope fields select; the caller's own scope bounds what it may select."""

    kind: TokenKindName
    name: Name
    tenant_id: str | None = None
    project_id: str | None = None
    environment_id: str | None = None
    permissions: list[PermissionName] = Field(default_factory=list)
    expires_in_seconds: int | None = Field(default=None, ge=60, le=60 * 60 * 24 * 3650)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "kind": "publisher",
                    "name": "checkout-service",
                    "environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C",
                    "permissions": ["publish"],
                    "expires_in_seconds": 7776000,
                }
            ]
        },
    )


class Token(_Out):
    """A token's metadata. The secret is never part of it."""

    token_id: str
    kind: TokenKindName
    name: str
    display_prefix: str
    tenant_id: str | None
    project_id: str | None
    environment_id: str | None
    permissions: list[PermissionName]
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    rotated_from: str | None = None
    replaced_by: str | None = None


class IssuedToken(Token):
    """Returned once, at issue or rotation: ``secret`` is the bearer token. An idempotent
    replay of the same request returns the same token with ``secret`` null."""

    secret: str | None


class TokenList(_Out):
    items: list[Token]


class TokenRotate(_Model):
    grace_seconds: int = Field(default=0, ge=0, le=60 * 60 * 24 * 30)
    expires_in_seconds: int | None = Field(default=None, ge=60, le=60 * 60 * 24 * 3650)
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"grace_seconds": 3600}]})


class TokenRotation(_Out):
    replacement: IssuedToken
    previous: Token


# --- catalog, generation, publisher config ---------------------------------------------------------


class CatalogVersion(_Out):
    version: int
    digest: str
    registered_at: dt.datetime


class CatalogVersionList(_Out):
    items: list[CatalogVersion]


class ActiveGeneration(_Out):
    environment_id: str
    generation: int
    updated_at: dt.datetime


class ActiveGenerationUpdate(_Model):
    generation: int = Field(ge=1)
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"generation": 2}]})


class PublisherConfig(_Out):
    """What ``GET /v1/publisher/config`` at the gateway returns (defaults: publisher guide)."""

    capture_enabled: bool = True
    supported_segment_versions: list[int] = Field(default_factory=lambda: [2])
    supported_cas_versions: list[int] = Field(default_factory=lambda: [1])
    flush_interval_seconds: int = 5
    max_objects_per_authorize: int = 100
    large_value_threshold_bytes: int = 32768
    max_object_bytes: int = 268435456
    pack_max_entry_bytes: int = 8388608
    shipped_value_retention_seconds: int = 3600
    upload_url_ttl_seconds: int = 900


class PublisherConfigUpdate(_Model):
    capture_enabled: bool | None = None
    supported_segment_versions: list[Annotated[int, Field(ge=1)]] | None = Field(default=None, min_length=1)
    supported_cas_versions: list[Annotated[int, Field(ge=1)]] | None = Field(default=None, min_length=1)
    flush_interval_seconds: int | None = Field(default=None, ge=1, le=3600)
    max_objects_per_authorize: int | None = Field(default=None, ge=1, le=10000)
    large_value_threshold_bytes: int | None = Field(default=None, ge=1024, le=1 << 30)
    max_object_bytes: int | None = Field(default=None, ge=1 << 20, le=5 << 30)
    pack_max_entry_bytes: int | None = Field(default=None, ge=1024, le=1 << 30)
    shipped_value_retention_seconds: int | None = Field(default=None, ge=0, le=60 * 60 * 24 * 30)
    upload_url_ttl_seconds: int | None = Field(default=None, ge=60, le=60 * 60 * 12)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"flush_interval_seconds": 10, "capture_enabled": True}]},
    )


# --- workload API ----------------------------------------------------------------------------------


class WorkloadToken(_Out):
    token: str
    token_type: Literal["Bearer"] = "Bearer"
    expires_at: dt.datetime
    deployment_id: str
    cell: str
    tenant_id: str


class QuerySnapshotRequest(_Model):
    environment_id: str
    catalog_version: int | None = Field(default=None, ge=1, description="Defaults to the newest registered.")
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C", "catalog_version": 1}]
        },
    )


class QuerySnapshot(_Out):
    snapshot_id: str
    tenant_id: str
    project_id: str
    environment_id: str
    catalog_version: int
    generation: int
    expires_at: dt.datetime


class TokenIntrospectionRequest(_Model):
    token: str = Field(min_length=1, max_length=256)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"token": "bst_usr_" + "a" * 52}]},
    )


class TokenIntrospection(_Out):
    """``active`` false says nothing else: unknown, expired, revoked and foreign tokens look alike."""

    active: bool
    kind: TokenKindName | None = None
    token_id: str | None = None
    tenant_id: str | None = None
    project_id: str | None = None
    environment_id: str | None = None
    permissions: list[PermissionName] = Field(default_factory=list)
    expires_at: dt.datetime | None = None


class ColumnSpec(_Out):
    name: str
    arrow_type: str
    nullable: bool
    visibility: Literal["public", "private"]
    description: str


class RelationSpec(_Out):
    name: str
    storage: Literal["clickhouse", "lance"]
    description: str
    columns: list[ColumnSpec]
    arrow_schema_ipc_base64: str | None = Field(
        default=None,
        description="The public columns' Arrow schema, IPC-serialised; absent for private-only relations.",
    )


class ProjectionSchemaDocument(_Out):
    catalog_version: int
    digest: str
    relations: list[RelationSpec]
    vocabularies: dict[str, list[str]]


class Healthz(_Out):
    status: Literal["ok"]
    service: str


def example(model: type[BaseModel]) -> dict[str, Any] | None:
    extra = model.model_config.get("json_schema_extra")
    if isinstance(extra, dict):
        examples = extra.get("examples")
        if isinstance(examples, list) and examples and isinstance(examples[0], dict):
            return examples[0]
    return None
