"""HTTP bodies that cross between the data plane and Boundary: one typed definition for both sides.

Boundary's FastAPI apps use these as request and response models (so the OpenAPI document is
generated from them) and the data plane's client parses responses with the same classes.
Every field here is a non-value: identifiers, names, states, counters, timestamps.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Base64Bytes, BaseModel, ConfigDict, Field

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


# --- projection batches, resident queries, projection erasures ----------------------------------

ARROW_STREAM_MEDIA_TYPE = "application/vnd.apache.arrow.stream"
HEADER_GENERATION = "X-Baml-Generation"
HEADER_CATALOG_VERSION = "X-Baml-Catalog-Version"
HEADER_RELATION = "X-Baml-Relation"
HEADER_ROOT_ID = "X-Baml-Root-Id"
HEADER_CONTENT_DIGEST = "X-Baml-Content-Digest"
HEADER_ENVIRONMENT_ID = "X-Baml-Environment-Id"
HEADER_PARTITION = "X-Baml-Partition"
HEADER_ROW_COUNT = "X-Baml-Row-Count"
# Resident query answers: the generation the rows were read from (header and schema metadata).
HEADER_PROJECTION_GENERATION = "X-Baml-Projection-Generation"
META_PROJECTION_GENERATION = "baml.projection_generation"
META_CATALOG_VERSION = "baml.catalog_version"
META_SNAPSHOT_ID = "baml.snapshot_id"

Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
RootId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")]


class ProjectionBatchHeaders(_Model):
    """A projection batch's identity, sent as ``X-Baml-*`` headers with the Arrow IPC body of
    ``PUT /projection-batches/{batch_id}``. ``content_digest`` is ``sha256:`` + hex SHA-256 of the
    body bytes. The generation is not part of ``batch_id``, so a rebuild reuses batch ids."""

    generation: int = Field(ge=0)
    catalog_version: int = Field(ge=1)
    relation: str = Field(min_length=1, max_length=64)
    root_id: RootId
    content_digest: Digest
    environment_id: str = Field(min_length=1, max_length=64)
    partition: int | None = Field(default=None, ge=0)
    row_count: int | None = Field(default=None, ge=0)

    _NAMES: ClassVar[dict[str, str]] = {
        "generation": HEADER_GENERATION,
        "catalog_version": HEADER_CATALOG_VERSION,
        "relation": HEADER_RELATION,
        "root_id": HEADER_ROOT_ID,
        "content_digest": HEADER_CONTENT_DIGEST,
        "environment_id": HEADER_ENVIRONMENT_ID,
        "partition": HEADER_PARTITION,
        "row_count": HEADER_ROW_COUNT,
    }

    def http_headers(self) -> dict[str, str]:
        out = {"Content-Type": ARROW_STREAM_MEDIA_TYPE}
        for attr, header in self._NAMES.items():
            value = getattr(self, attr)
            if value is not None:
                out[header] = str(value)
        return out

    @classmethod
    def header_names(cls) -> dict[str, str]:
        return dict(cls._NAMES)


class ProjectionBatchState(_Out):
    batch_id: str
    state: Literal["visible"] = "visible"
    rows: int
    generation: int
    relation: str
    content_digest: str
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "batch_id": "5f0c2d6e9a7b4c1d8e3f2a1b0c9d8e7f",
                    "state": "visible",
                    "rows": 42,
                    "generation": 1,
                    "relation": "calls_v1",
                    "content_digest": "sha256:" + "0" * 64,
                }
            ]
        },
    )


BatchId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")]
PROJECTION_BATCH_SET_MAX = 4096


class ProjectionBatchSetItem(ProjectionBatchHeaders):
    """One batch of a set: the same identity as ``PUT /projection-batches/{batch_id}`` (its headers
    become fields) plus the batch id and the Arrow IPC body, base64-encoded. The digest is over the
    decoded body bytes, exactly as for the PUT."""

    batch_id: BatchId
    body: Base64Bytes = Field(description="Base64 of the Arrow IPC stream (the PUT body).")


class ProjectionBatchSet(_Model):
    """``POST /projection-batch-sets``: many batches in one request, each checked and made visible
    (or refused) on its own exactly as by the PUT; answered per batch, in request order."""

    batches: list[ProjectionBatchSetItem] = Field(min_length=1, max_length=PROJECTION_BATCH_SET_MAX)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "batches": [
                        {
                            "batch_id": "5f0c2d6e9a7b4c1d8e3f2a1b0c9d8e7f",
                            "generation": 1,
                            "catalog_version": 1,
                            "relation": "calls_v1",
                            "root_id": "0123456789abcdef",
                            "content_digest": "sha256:" + "0" * 64,
                            "environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C",
                            "partition": 0,
                            "row_count": 42,
                            "body": "QVJST1cx",
                        }
                    ]
                }
            ]
        },
    )


BATCH_SET_MEDIA_TYPE = "application/vnd.baml.projection-batch-set"
BATCH_SET_SCHEMA: Literal["baml-batch-set/1"] = "baml-batch-set/1"


class BatchSetEntry(_Model):
    """One batch of a binary set group (``formats.batch_set_body``): its identity, and ``length``,
    the bytes of its record-batch messages in the group's Arrow IPC stream. Its PUT body (what
    ``content_digest`` is the SHA-256 of) is the group's schema message, then those bytes, then
    the end-of-stream marker."""

    batch_id: BatchId
    root_id: RootId
    content_digest: Digest
    partition: int | None = Field(default=None, ge=0)
    row_count: int | None = Field(default=None, ge=0)
    length: int = Field(ge=0)


class BatchSetGroup(_Model):
    """Batches of one relation that share one schema message, environment and generation: one
    Arrow IPC stream (schema once, every batch's record batches, end of stream)."""

    environment_id: str = Field(min_length=1, max_length=64)
    generation: int = Field(ge=0)
    catalog_version: int = Field(ge=1)
    relation: str = Field(min_length=1, max_length=64)
    schema_length: int = Field(ge=8, description="Bytes of the group stream's schema message.")
    batches: list[BatchSetEntry] = Field(min_length=1, max_length=PROJECTION_BATCH_SET_MAX)

    def headers(self, entry: BatchSetEntry) -> ProjectionBatchHeaders:
        """The batch's identity as the PUT would carry it (already validated: no re-check)."""
        return ProjectionBatchHeaders.model_construct(
            generation=self.generation,
            catalog_version=self.catalog_version,
            relation=self.relation,
            root_id=entry.root_id,
            content_digest=entry.content_digest,
            environment_id=self.environment_id,
            partition=entry.partition,
            row_count=entry.row_count,
        )


class ProjectionBatchSetManifest(_Model):
    """The manifest of a binary ``POST /projection-batch-sets`` body (``BATCH_SET_MEDIA_TYPE``);
    answers come in manifest order: group by group, batch by batch."""

    schema_: Literal["baml-batch-set/1"] = Field(default=BATCH_SET_SCHEMA, alias="schema")
    groups: list[BatchSetGroup] = Field(min_length=1, max_length=PROJECTION_BATCH_SET_MAX)
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @property
    def batch_count(self) -> int:
        return sum(len(g.batches) for g in self.groups)


class ProjectionBatchSetOutcome(_Out):
    """One batch's answer: ``status`` is the HTTP status the PUT would have answered; ``state`` when
    visible (200), ``problem`` when refused."""

    batch_id: str
    status: int
    state: ProjectionBatchState | None = None
    problem: Problem | None = None


class ProjectionBatchSetResult(_Out):
    results: list[ProjectionBatchSetOutcome]
    visible: int
    rejected: int


class ResidentBudget(_Model):
    """Requested limits; Boundary caps each at its configured maximum."""

    wall_ms: int = Field(default=10_000, ge=1, le=600_000)
    rows: int = Field(default=100_000, ge=1, le=100_000_000)
    bytes: int = Field(default=64 << 20, ge=1, le=1 << 34)


class ResidentQueryRequest(_Model):
    """The public part of a query plan. Name either ``snapshot_id`` or ``generation`` with
    ``catalog_version``. Only registered public relations and columns, one SELECT or UNION."""

    sql: str = Field(min_length=1, max_length=100_000)
    environment_id: str
    snapshot_id: str | None = None
    generation: int | None = Field(default=None, ge=1)
    catalog_version: int | None = Field(default=None, ge=1)
    budget: ResidentBudget = Field(default_factory=ResidentBudget)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "sql": "SELECT function_name, count() AS calls FROM calls_v1 GROUP BY function_name",
                    "environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C",
                    "snapshot_id": "snp_0123456789abcdef0123456789abcdef",
                    "budget": {"wall_ms": 5000, "rows": 10000, "bytes": 16777216},
                }
            ]
        },
    )


class ProjectionErasureRequest(_Model):
    environment_id: str
    generation: int = Field(ge=1)
    root_ids: list[RootId] = Field(min_length=1, max_length=10_000)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C",
                    "generation": 1,
                    "root_ids": ["0123456789abcdef0123456789abcdef"],
                }
            ]
        },
    )


class ProjectionErasure(_Out):
    """Per-relation rows deleted and still present for the roots (``remaining_total`` 0 = done)."""

    environment_id: str
    generation: int
    roots: int
    deleted: dict[str, int]
    remaining: dict[str, int]
    remaining_total: int
    state: Literal["complete", "incomplete"]


class ProjectionFactCountsRequest(_Model):
    environment_id: str
    generation: int | None = Field(default=None, ge=1, description="Null counts every generation.")
    root_ids: list[RootId] = Field(min_length=1, max_length=10_000)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"environment_id": "env_01JD4Z8Q6W3V6J5X9T2N8K7M4C", "root_ids": ["0123456789abcdef"]}
            ]
        },
    )


class ProjectionFactCounts(_Out):
    environment_id: str
    generation: int | None
    counts: dict[str, int]
    total: int


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
