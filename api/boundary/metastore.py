"""Metastore operations: the system of record for the tenant hierarchy, deployments, tokens,
catalog versions, active generations, publisher config, snapshots and idempotency records.

Every method runs in its own transaction and works the same on SQLite and MySQL. Methods
raise :mod:`api.common.errors` types (NotFound, Conflict, IdempotencyConflict) so routers stay
thin. Authorization is not decided here; :mod:`api.boundary.policy` does that.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from ulid import ULID

from api.boundary import models as m
from api.boundary.db import make_engine, migrate, session_factory, transaction
from api.common.auth import TokenKind, generate_token, hash_token, token_display_prefix
from api.common.errors import Conflict, IdempotencyConflict, NotFound, Unprocessable
from formats import catalog

T = TypeVar("T")

PUBLISHER_CONFIG_FIELDS = (
    "capture_enabled",
    "supported_segment_versions",
    "supported_cas_versions",
    "flush_interval_seconds",
    "max_objects_per_authorize",
    "large_value_threshold_bytes",
    "max_object_bytes",
    "pack_max_entry_bytes",
    "shipped_value_retention_seconds",
    "upload_url_ttl_seconds",
)
_LIST_FIELDS = ("supported_segment_versions", "supported_cas_versions")


def new_id(prefix: str) -> str:
    return f"{prefix}_{ULID()}"


def _perm_str(perms: list[str] | tuple[str, ...] | frozenset[str]) -> str:
    return ",".join(sorted(set(perms)))


def permissions_of(token: m.Token) -> list[str]:
    return [p for p in token.permissions.split(",") if p]


@dataclass(frozen=True)
class IdempotencyContext:
    """An ``Idempotency-Key`` applied to one operation by one caller."""

    caller_scope: str
    operation: str
    key: str
    request_digest: str


@dataclass(frozen=True)
class Issued:
    token: m.Token
    secret: str | None  # None on an idempotent replay


class Metastore:
    def __init__(self, url: str, *, run_migrations: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url)
        if run_migrations:
            migrate(self.engine)
        self._sessions = session_factory(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def _tx(self) -> Any:
        return transaction(self._sessions)

    # --- idempotency -------------------------------------------------------------------------

    def _idempotent(
        self,
        idem: IdempotencyContext | None,
        resource_type: str,
        create: Callable[[Session], tuple[str, T]],
        load: Callable[[Session, str], T],
    ) -> tuple[T, bool]:
        """Run ``create`` once per key: returns (result, replayed)."""
        if idem is None:
            with self._tx() as s:
                return create(s)[1], False
        for _attempt in range(3):
            try:
                with self._tx() as s:
                    rec = s.scalar(
                        sa.select(m.IdempotencyRecord).where(
                            m.IdempotencyRecord.caller_scope == idem.caller_scope,
                            m.IdempotencyRecord.operation == idem.operation,
                            m.IdempotencyRecord.idem_key == idem.key,
                        )
                    )
                    if rec is not None:
                        if rec.request_digest != idem.request_digest:
                            raise IdempotencyConflict(
                                f"Idempotency-Key was used with a different request for {idem.operation}",
                                remedy="Use a new Idempotency-Key for a different request.",
                            )
                        return load(s, rec.resource_id), True
                    resource_id, result = create(s)
                    s.add(
                        m.IdempotencyRecord(
                            caller_scope=idem.caller_scope,
                            operation=idem.operation,
                            idem_key=idem.key,
                            request_digest=idem.request_digest,
                            resource_type=resource_type,
                            resource_id=resource_id,
                            created_at=m.utcnow(),
                        )
                    )
                    s.flush()
                    return result, False
            except IntegrityError:
                # A concurrent request with the same key won the insert; read its record.
                continue
        raise Conflict("concurrent requests with one Idempotency-Key did not settle", code="idempotency_race")

    # --- tenants, projects, environments, deployments --------------------------------------------

    def create_tenant(self, name: str, *, idem: IdempotencyContext | None = None) -> tuple[m.Tenant, bool]:
        def create(s: Session) -> tuple[str, m.Tenant]:
            if s.scalar(sa.select(m.Tenant.id).where(m.Tenant.name == name)) is not None:
                raise Conflict(f"a tenant named {name!r} exists", code="tenant_exists")
            t = m.Tenant(id=new_id("ten"), name=name, created_at=m.utcnow())
            s.add(t)
            s.flush()
            return t.id, t

        return self._idempotent(idem, "tenant", create, lambda s, i: self._get(s, m.Tenant, i, "tenant"))

    def list_tenants(self, tenant_id: str | None = None) -> list[m.Tenant]:
        with self._tx() as s:
            q = sa.select(m.Tenant).order_by(m.Tenant.created_at, m.Tenant.id)
            if tenant_id is not None:
                q = q.where(m.Tenant.id == tenant_id)
            return list(s.scalars(q))

    def get_tenant(self, tenant_id: str) -> m.Tenant:
        with self._tx() as s:
            return self._get(s, m.Tenant, tenant_id, "tenant")

    def create_project(
        self, tenant_id: str, name: str, *, idem: IdempotencyContext | None = None
    ) -> tuple[m.Project, bool]:
        def create(s: Session) -> tuple[str, m.Project]:
            self._get(s, m.Tenant, tenant_id, "tenant")
            exists = s.scalar(
                sa.select(m.Project.id).where(m.Project.tenant_id == tenant_id, m.Project.name == name)
            )
            if exists is not None:
                raise Conflict(f"project {name!r} exists in this tenant", code="project_exists")
            p = m.Project(id=new_id("prj"), tenant_id=tenant_id, name=name, created_at=m.utcnow())
            s.add(p)
            s.flush()
            return p.id, p

        return self._idempotent(idem, "project", create, lambda s, i: self._get(s, m.Project, i, "project"))

    def list_projects(self, tenant_id: str, project_id: str | None = None) -> list[m.Project]:
        with self._tx() as s:
            q = (
                sa.select(m.Project)
                .where(m.Project.tenant_id == tenant_id)
                .order_by(m.Project.created_at, m.Project.id)
            )
            if project_id is not None:
                q = q.where(m.Project.id == project_id)
            return list(s.scalars(q))

    def get_project(self, project_id: str) -> m.Project:
        with self._tx() as s:
            return self._get(s, m.Project, project_id, "project")

    def create_environment(
        self, project_id: str, name: str, *, idem: IdempotencyContext | None = None
    ) -> tuple[m.Environment, bool]:
        def create(s: Session) -> tuple[str, m.Environment]:
            project = self._get(s, m.Project, project_id, "project")
            exists = s.scalar(
                sa.select(m.Environment.id).where(
                    m.Environment.project_id == project_id, m.Environment.name == name
                )
            )
            if exists is not None:
                raise Conflict(f"environment {name!r} exists in this project", code="environment_exists")
            now = m.utcnow()
            env = m.Environment(
                id=new_id("env"),
                project_id=project_id,
                tenant_id=project.tenant_id,
                name=name,
                active_generation=1,
                generation_updated_at=now,
                created_at=now,
            )
            s.add(env)
            s.flush()
            s.add(m.PublisherConfig(environment_id=env.id, updated_at=now))
            s.flush()
            return env.id, env

        return self._idempotent(
            idem, "environment", create, lambda s, i: self._get(s, m.Environment, i, "environment")
        )

    def list_environments(self, project_id: str, environment_id: str | None = None) -> list[m.Environment]:
        with self._tx() as s:
            q = (
                sa.select(m.Environment)
                .where(m.Environment.project_id == project_id)
                .order_by(m.Environment.created_at, m.Environment.id)
            )
            if environment_id is not None:
                q = q.where(m.Environment.id == environment_id)
            return list(s.scalars(q))

    def get_environment(self, environment_id: str) -> m.Environment:
        with self._tx() as s:
            return self._get(s, m.Environment, environment_id, "environment")

    def create_deployment(
        self, tenant_id: str, name: str, cell: str, kind: str, *, idem: IdempotencyContext | None = None
    ) -> tuple[m.Deployment, bool]:
        def create(s: Session) -> tuple[str, m.Deployment]:
            self._get(s, m.Tenant, tenant_id, "tenant")
            exists = s.scalar(
                sa.select(m.Deployment.id).where(
                    m.Deployment.tenant_id == tenant_id, m.Deployment.name == name
                )
            )
            if exists is not None:
                raise Conflict(f"deployment {name!r} exists in this tenant", code="deployment_exists")
            d = m.Deployment(
                id=new_id("dep"), tenant_id=tenant_id, name=name, cell=cell, kind=kind, created_at=m.utcnow()
            )
            s.add(d)
            s.flush()
            return d.id, d

        return self._idempotent(
            idem, "deployment", create, lambda s, i: self._get(s, m.Deployment, i, "deployment")
        )

    def list_deployments(self, tenant_id: str) -> list[m.Deployment]:
        with self._tx() as s:
            q = (
                sa.select(m.Deployment)
                .where(m.Deployment.tenant_id == tenant_id)
                .order_by(m.Deployment.created_at, m.Deployment.id)
            )
            return list(s.scalars(q))

    def get_deployment(self, deployment_id: str) -> m.Deployment:
        with self._tx() as s:
            return self._get(s, m.Deployment, deployment_id, "deployment")

    def find_deployment(self, deployment_id: str) -> m.Deployment | None:
        with self._tx() as s:
            return s.get(m.Deployment, deployment_id)

    # --- tokens -------------------------------------------------------------------------------

    def issue_token(
        self,
        *,
        kind: TokenKind,
        name: str,
        tenant_id: str | None,
        project_id: str | None,
        environment_id: str | None,
        permissions: list[str] | tuple[str, ...] | frozenset[str],
        expires_at: dt.datetime | None,
        created_by: str | None = None,
        idem: IdempotencyContext | None = None,
    ) -> Issued:
        holder: dict[str, str] = {}

        def create(s: Session) -> tuple[str, m.Token]:
            tok, secret = self._insert_token(
                s,
                kind=kind,
                name=name,
                tenant_id=tenant_id,
                project_id=project_id,
                environment_id=environment_id,
                permissions=permissions,
                expires_at=expires_at,
                created_by=created_by,
                rotated_from=None,
            )
            holder["secret"] = secret
            return tok.id, tok

        tok, replayed = self._idempotent(
            idem, "token", create, lambda s, i: self._get(s, m.Token, i, "token")
        )
        return Issued(tok, None if replayed else holder["secret"])

    def _insert_token(
        self,
        s: Session,
        *,
        kind: TokenKind,
        name: str,
        tenant_id: str | None,
        project_id: str | None,
        environment_id: str | None,
        permissions: list[str] | tuple[str, ...] | frozenset[str],
        expires_at: dt.datetime | None,
        created_by: str | None,
        rotated_from: str | None,
    ) -> tuple[m.Token, str]:
        # Scope ids must name one consistent chain; the caller's authority was checked already.
        if environment_id is not None:
            env = self._get(s, m.Environment, environment_id, "environment")
            if project_id not in (None, env.project_id) or tenant_id not in (None, env.tenant_id):
                raise Unprocessable(
                    "environment_id does not belong to the given project/tenant", code="scope_mismatch"
                )
            project_id, tenant_id = env.project_id, env.tenant_id
        elif project_id is not None:
            prj = self._get(s, m.Project, project_id, "project")
            if tenant_id not in (None, prj.tenant_id):
                raise Unprocessable("project_id does not belong to the given tenant", code="scope_mismatch")
            tenant_id = prj.tenant_id
        elif tenant_id is not None:
            self._get(s, m.Tenant, tenant_id, "tenant")
        secret = generate_token(kind)
        tok = m.Token(
            id=new_id("tok"),
            kind=kind.value,
            name=name,
            token_hash=hash_token(secret),
            display_prefix=token_display_prefix(secret),
            tenant_id=tenant_id,
            project_id=project_id,
            environment_id=environment_id,
            permissions=_perm_str(permissions),
            created_at=m.utcnow(),
            expires_at=expires_at,
            revoked_at=None,
            rotated_from=rotated_from,
            replaced_by=None,
            created_by=created_by,
        )
        s.add(tok)
        s.flush()
        return tok, secret

    def authenticate(self, secret: str, *, now: dt.datetime | None = None) -> m.Token | None:
        """The active token with this secret, or None (unknown, revoked or expired)."""
        now = now or m.utcnow()
        with self._tx() as s:
            tok = s.scalar(sa.select(m.Token).where(m.Token.token_hash == hash_token(secret)))
            if tok is None or not token_active(tok, now):
                return None
            return tok

    def list_tokens(
        self,
        *,
        tenant_id: str | None = None,
        project_id: str | None = None,
        environment_id: str | None = None,
        kind: str | None = None,
    ) -> list[m.Token]:
        with self._tx() as s:
            q = sa.select(m.Token).order_by(m.Token.created_at, m.Token.id)
            if tenant_id is not None:
                q = q.where(m.Token.tenant_id == tenant_id)
            if project_id is not None:
                q = q.where(m.Token.project_id == project_id)
            if environment_id is not None:
                q = q.where(m.Token.environment_id == environment_id)
            if kind is not None:
                q = q.where(m.Token.kind == kind)
            return list(s.scalars(q))

    def get_token(self, token_id: str) -> m.Token:
        with self._tx() as s:
            return self._get(s, m.Token, token_id, "token")

    def revoke_token(self, token_id: str, *, at: dt.datetime | None = None) -> m.Token:
        with self._tx() as s:
            tok = self._get(s, m.Token, token_id, "token")
            if tok.revoked_at is None:
                tok.revoked_at = at or m.utcnow()
            s.flush()
            return tok

    def rotate_token(
        self,
        token_id: str,
        *,
        grace_seconds: int,
        expires_at: dt.datetime | None,
        created_by: str | None = None,
        idem: IdempotencyContext | None = None,
    ) -> tuple[Issued, m.Token]:
        """Issue a replacement with the same scope; the old one stops after ``grace_seconds``."""
        holder: dict[str, str] = {}

        def create(s: Session) -> tuple[str, m.Token]:
            old = self._get(s, m.Token, token_id, "token")
            now = m.utcnow()
            if not token_active(old, now):
                raise Conflict("only an active token can be rotated", code="token_inactive")
            if old.replaced_by is not None:
                raise Conflict("token was already rotated", code="token_already_rotated")
            new, secret = self._insert_token(
                s,
                kind=TokenKind(old.kind),
                name=old.name,
                tenant_id=old.tenant_id,
                project_id=old.project_id,
                environment_id=old.environment_id,
                permissions=permissions_of(old),
                expires_at=expires_at if expires_at is not None else old.expires_at,
                created_by=created_by,
                rotated_from=old.id,
            )
            old.replaced_by = new.id
            cutoff = now + dt.timedelta(seconds=grace_seconds)
            if grace_seconds == 0:
                old.revoked_at = now
            elif old.expires_at is None or old.expires_at > cutoff:
                old.expires_at = cutoff
            s.flush()
            holder["secret"] = secret
            return new.id, new

        new, replayed = self._idempotent(
            idem, "token", create, lambda s, i: self._get(s, m.Token, i, "token")
        )
        old = self.get_token(token_id)
        return Issued(new, None if replayed else holder["secret"]), old

    # --- catalog, generation, publisher config --------------------------------------------------

    def register_catalog_versions(self) -> None:
        """Record every catalog version ``formats.catalog`` defines (idempotent; digests pinned)."""
        with self._tx() as s:
            for version in catalog.CATALOG_VERSIONS:
                digest = catalog.catalog_digest(version)
                row = s.get(m.CatalogVersion, version)
                if row is None:
                    s.add(m.CatalogVersion(version=version, digest=digest, registered_at=m.utcnow()))
                elif row.digest != digest:
                    # A registered catalog is immutable: a change needs a new version number.
                    raise RuntimeError(
                        f"catalog version {version} changed "
                        f"(registered {row.digest[:12]}, code {digest[:12]})"
                    )

    def list_catalog_versions(self) -> list[m.CatalogVersion]:
        with self._tx() as s:
            return list(s.scalars(sa.select(m.CatalogVersion).order_by(m.CatalogVersion.version)))

    def get_catalog_version(self, version: int) -> m.CatalogVersion:
        with self._tx() as s:
            row = s.get(m.CatalogVersion, version)
            if row is None:
                raise NotFound(
                    f"catalog version {version} is not registered", code="catalog_version_not_found"
                )
            return row

    def set_active_generation(self, environment_id: str, generation: int) -> m.Environment:
        with self._tx() as s:
            env = self._get(s, m.Environment, environment_id, "environment")
            if env.active_generation != generation:
                env.active_generation = generation
                env.generation_updated_at = m.utcnow()
            s.flush()
            return env

    def get_publisher_config(self, environment_id: str) -> dict[str, Any]:
        with self._tx() as s:
            self._get(s, m.Environment, environment_id, "environment")
            row = s.get(m.PublisherConfig, environment_id)
            if row is None:  # environments created before the config table had a row
                row = m.PublisherConfig(environment_id=environment_id, updated_at=m.utcnow())
                s.add(row)
                s.flush()
            return _config_dict(row)

    def update_publisher_config(self, environment_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        unknown = set(changes) - set(PUBLISHER_CONFIG_FIELDS)
        if unknown:
            raise Unprocessable(f"unknown publisher config fields: {sorted(unknown)}")
        with self._tx() as s:
            self._get(s, m.Environment, environment_id, "environment")
            row = s.get(m.PublisherConfig, environment_id)
            if row is None:
                row = m.PublisherConfig(environment_id=environment_id, updated_at=m.utcnow())
                s.add(row)
                s.flush()
            for name, value in changes.items():
                if name in _LIST_FIELDS:
                    value = ",".join(str(int(v)) for v in sorted(set(value)))
                setattr(row, name, value)
            row.updated_at = m.utcnow()
            s.flush()
            return _config_dict(row)

    # --- query snapshots ---------------------------------------------------------------------

    def query_snapshot(
        self,
        environment_id: str,
        catalog_version: int,
        *,
        window_seconds: int,
        ttl_seconds: int,
        now: dt.datetime | None = None,
    ) -> m.QuerySnapshot:
        """One snapshot row per (environment, generation, catalog version, time window).

        Queries that start in the same window share a snapshot, so the call is one indexed
        read in the common case and the response is cacheable until ``expires_at``.
        """
        now = now or m.utcnow()
        epoch = int(now.timestamp())
        window_start = epoch - epoch % window_seconds
        expires_at = dt.datetime.fromtimestamp(window_start + window_seconds + ttl_seconds, dt.UTC)
        for _attempt in range(3):
            try:
                with self._tx() as s:
                    env = self._get(s, m.Environment, environment_id, "environment")
                    if s.get(m.CatalogVersion, catalog_version) is None:
                        raise NotFound(
                            f"catalog version {catalog_version} is not registered",
                            code="catalog_version_not_found",
                        )
                    material = f"{env.id}|{env.active_generation}|{catalog_version}|{window_start}"
                    sid = "snp_" + hashlib.sha256(material.encode()).hexdigest()[:32]
                    snap = s.get(m.QuerySnapshot, sid)
                    if snap is None:
                        snap = m.QuerySnapshot(
                            id=sid,
                            tenant_id=env.tenant_id,
                            project_id=env.project_id,
                            environment_id=env.id,
                            catalog_version=catalog_version,
                            generation=env.active_generation,
                            created_at=now,
                            expires_at=expires_at,
                        )
                        s.add(snap)
                        s.flush()
                    return snap
            except IntegrityError:
                continue
        raise Conflict("snapshot creation raced repeatedly", code="snapshot_race")

    def get_query_snapshot(self, snapshot_id: str) -> m.QuerySnapshot:
        with self._tx() as s:
            return self._get(s, m.QuerySnapshot, snapshot_id, "query snapshot")

    def purge_expired_snapshots(self, *, now: dt.datetime | None = None) -> int:
        now = now or m.utcnow()
        with self._tx() as s:
            result = s.execute(sa.delete(m.QuerySnapshot).where(m.QuerySnapshot.expires_at < now))
            return int(getattr(result, "rowcount", 0) or 0)

    # --- development bootstrap record ------------------------------------------------------------

    def read_dev_bootstrap(self) -> str | None:
        with self._tx() as s:
            row = s.get(m.DevBootstrapRecord, 1)
            return None if row is None else row.document

    def write_dev_bootstrap(self, document: str) -> None:
        with self._tx() as s:
            row = s.get(m.DevBootstrapRecord, 1)
            if row is None:
                s.add(m.DevBootstrapRecord(id=1, document=document, updated_at=m.utcnow()))
            else:
                row.document = document
                row.updated_at = m.utcnow()

    # --- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _get(s: Session, model: type[T], ident: str | int, what: str) -> T:
        row = s.get(model, ident)
        if row is None:
            raise NotFound(f"{what} {ident} not found", code=f"{what.replace(' ', '_')}_not_found")
        return row


def token_active(tok: m.Token, now: dt.datetime) -> bool:
    if tok.revoked_at is not None and tok.revoked_at <= now:
        return False
    return not (tok.expires_at is not None and tok.expires_at <= now)


def _config_dict(row: m.PublisherConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in PUBLISHER_CONFIG_FIELDS:
        value = getattr(row, name)
        if name in _LIST_FIELDS:
            value = [int(v) for v in str(value).split(",") if v]
        out[name] = value
    return out
