"""Metastore tables (the contract's PlanetScale role), SQLAlchemy 2 typed ORM.

Configuration only: the tenant hierarchy, deployments, tokens (hashed), catalog versions, the
active projection generation, publisher config, query snapshots and idempotency records. No
per-object or per-flush state lives here. Timestamps are stored as naive UTC and read back
as aware UTC so SQLite and MySQL behave the same.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

ID_LEN = 40
NAME_LEN = 64


class UtcDateTime(TypeDecorator[dt.datetime]):
    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime())

    def process_bind_param(self, value: dt.datetime | None, dialect: sa.Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the metastore; use UTC-aware datetimes")
        return value.astimezone(dt.UTC).replace(tzinfo=None)

    def process_result_value(self, value: dt.datetime | None, dialect: sa.Dialect) -> dt.datetime | None:
        return None if value is None else value.replace(tzinfo=dt.UTC)


def utcnow() -> dt.datetime:
    # Microsecond precision survives both backends (MySQL DATETIME(6)).
    return dt.datetime.now(dt.UTC)


class Base(DeclarativeBase):
    pass


class Tenant(Base):
    __tablename__ = "tenants"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(NAME_LEN), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (sa.UniqueConstraint("tenant_id", "name", name="uq_projects_tenant_name"),)
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(NAME_LEN))
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class Environment(Base):
    __tablename__ = "environments"
    __table_args__ = (sa.UniqueConstraint("project_id", "name", name="uq_environments_project_name"),)
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("projects.id"), index=True)
    # Denormalised so every scope check is one row read.
    tenant_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(NAME_LEN))
    active_generation: Mapped[int] = mapped_column(sa.Integer, default=1)
    generation_updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class Deployment(Base):
    __tablename__ = "deployments"
    __table_args__ = (sa.UniqueConstraint("tenant_id", "name", name="uq_deployments_tenant_name"),)
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(NAME_LEN))
    cell: Mapped[str] = mapped_column(sa.String(NAME_LEN))
    kind: Mapped[str] = mapped_column(sa.String(16))
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class Token(Base):
    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    name: Mapped[str] = mapped_column(sa.String(NAME_LEN))
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    display_prefix: Mapped[str] = mapped_column(sa.String(32))
    tenant_id: Mapped[str | None] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("tenants.id"), index=True)
    project_id: Mapped[str | None] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("projects.id"))
    environment_id: Mapped[str | None] = mapped_column(sa.String(ID_LEN), sa.ForeignKey("environments.id"))
    permissions: Mapped[str] = mapped_column(sa.String(255))  # comma-separated, sorted
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime())
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime())
    rotated_from: Mapped[str | None] = mapped_column(sa.String(ID_LEN))
    replaced_by: Mapped[str | None] = mapped_column(sa.String(ID_LEN))
    created_by: Mapped[str | None] = mapped_column(sa.String(ID_LEN))


class CatalogVersion(Base):
    __tablename__ = "catalog_versions"
    version: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    digest: Mapped[str] = mapped_column(sa.String(64))
    registered_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class PublisherConfig(Base):
    __tablename__ = "publisher_configs"
    environment_id: Mapped[str] = mapped_column(
        sa.String(ID_LEN), sa.ForeignKey("environments.id"), primary_key=True
    )
    capture_enabled: Mapped[bool] = mapped_column(sa.Boolean, default=True)
    supported_segment_versions: Mapped[str] = mapped_column(sa.String(64), default="2")
    supported_cas_versions: Mapped[str] = mapped_column(sa.String(64), default="1")
    flush_interval_seconds: Mapped[int] = mapped_column(sa.Integer, default=5)
    max_objects_per_authorize: Mapped[int] = mapped_column(sa.Integer, default=100)
    large_value_threshold_bytes: Mapped[int] = mapped_column(sa.BigInteger, default=32768)
    max_object_bytes: Mapped[int] = mapped_column(sa.BigInteger, default=268435456)
    pack_max_entry_bytes: Mapped[int] = mapped_column(sa.BigInteger, default=8388608)
    shipped_value_retention_seconds: Mapped[int] = mapped_column(sa.Integer, default=3600)
    upload_url_ttl_seconds: Mapped[int] = mapped_column(sa.Integer, default=900)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class QuerySnapshot(Base):
    __tablename__ = "query_snapshots"
    id: Mapped[str] = mapped_column(sa.String(ID_LEN), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(sa.String(ID_LEN), index=True)
    project_id: Mapped[str] = mapped_column(sa.String(ID_LEN))
    environment_id: Mapped[str] = mapped_column(sa.String(ID_LEN))
    catalog_version: Mapped[int] = mapped_column(sa.Integer)
    generation: Mapped[int] = mapped_column(sa.Integer)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[dt.datetime] = mapped_column(UtcDateTime(), index=True)


class IdempotencyRecord(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (sa.UniqueConstraint("caller_scope", "operation", "idem_key", name="uq_idempotency"),)
    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    caller_scope: Mapped[str] = mapped_column(sa.String(ID_LEN))
    operation: Mapped[str] = mapped_column(sa.String(64))
    idem_key: Mapped[str] = mapped_column(sa.String(128))
    request_digest: Mapped[str] = mapped_column(sa.String(64))
    resource_type: Mapped[str] = mapped_column(sa.String(32))
    resource_id: Mapped[str] = mapped_column(sa.String(ID_LEN))
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())


class DevBootstrapRecord(Base):
    """Development only: the bootstrap's ids and plaintext tokens, so a second call returns them."""

    __tablename__ = "dev_bootstrap"
    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    document: Mapped[str] = mapped_column(sa.Text)
    updated_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())
