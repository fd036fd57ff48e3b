"""Fixtures: metastores on SQLite and MariaDB, the two apps over one runtime, a seeded world
with two tenants, and a client-certificate injector for in-process workload calls."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from api.boundary.app import build_runtime, create_control_app, create_workload_app
from api.boundary.deps import BoundaryRuntime
from api.boundary.metastore import Metastore
from api.boundary.settings import BoundarySettings
from api.common.auth import TokenKind
from api.common.workload_identity import DevPki, ensure_dev_pki

MYSQL_URL = os.environ.get("BAML_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
REQUIRE_MYSQL = os.environ.get("BAML_TEST_REQUIRE_MYSQL") == "1"


def _mysql_server_url() -> sa.URL | None:
    url = sa.make_url(MYSQL_URL)
    try:
        eng = sa.create_engine(url)
        with eng.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        eng.dispose()
        return url
    except Exception as exc:
        if REQUIRE_MYSQL:
            raise RuntimeError(f"BAML_TEST_REQUIRE_MYSQL=1 but MySQL at {MYSQL_URL} is unreachable") from exc
        return None


@pytest.fixture(scope="session")
def mysql_server() -> sa.URL | None:
    return _mysql_server_url()


def fresh_mysql_database(server: sa.URL) -> tuple[str, str]:
    name = f"baml_test_{uuid.uuid4().hex[:12]}"
    eng = sa.create_engine(server)
    with eng.begin() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    eng.dispose()
    return server.set(database=name).render_as_string(hide_password=False), name


def drop_mysql_database(server: sa.URL, name: str) -> None:
    eng = sa.create_engine(server)
    with eng.begin() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
    eng.dispose()


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def metastore_url(
    request: pytest.FixtureRequest, tmp_path: Path, mysql_server: sa.URL | None
) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'metastore.sqlite3'}"
        return
    if mysql_server is None:
        pytest.skip(f"MySQL at {MYSQL_URL} unreachable")
    url, name = fresh_mysql_database(mysql_server)
    try:
        yield url
    finally:
        drop_mysql_database(mysql_server, name)


@pytest.fixture
def metastore(metastore_url: str) -> Iterator[Metastore]:
    ms = Metastore(metastore_url)
    ms.register_catalog_versions()
    yield ms
    ms.close()


@dataclass
class TenantWorld:
    tenant_id: str
    project_id: str
    environment_id: str
    deployment_id: str
    cell: str
    admin: str  # user token, tenant-wide admin + query + erasure
    user: str  # user token, environment scope, query only
    publisher: str
    pki: DevPki


@dataclass
class World:
    runtime: BoundaryRuntime
    control: TestClient
    operator: str
    a: TenantWorld
    b: TenantWorld
    tls_dir: Path


def _seed_tenant(ms: Metastore, name: str, tls_dir: Path) -> TenantWorld:
    t, _ = ms.create_tenant(name)
    p, _ = ms.create_project(t.id, "proj")
    e, _ = ms.create_environment(p.id, "prod")
    d, _ = ms.create_deployment(t.id, "dep", f"cell-{name}", "byoc")
    admin = ms.issue_token(
        kind=TokenKind.USER,
        name="admin",
        tenant_id=t.id,
        project_id=None,
        environment_id=None,
        permissions=["admin", "query", "erasure"],
        expires_at=None,
    ).secret
    user = ms.issue_token(
        kind=TokenKind.USER,
        name="user",
        tenant_id=t.id,
        project_id=p.id,
        environment_id=e.id,
        permissions=["query"],
        expires_at=None,
    ).secret
    pub = ms.issue_token(
        kind=TokenKind.PUBLISHER,
        name="pub",
        tenant_id=t.id,
        project_id=p.id,
        environment_id=e.id,
        permissions=["publish"],
        expires_at=None,
    ).secret
    assert admin and user and pub
    pki = ensure_dev_pki(tls_dir, d.id, d.cell)
    return TenantWorld(t.id, p.id, e.id, d.id, d.cell, admin, user, pub, pki)


def make_world(metastore_url: str, tmp_path: Path) -> World:
    tls_dir = tmp_path / "tls"
    settings = BoundarySettings(run_dir=tmp_path, metastore_url=metastore_url, tls_dir=tls_dir)
    runtime = build_runtime(settings)
    ms = runtime.metastore
    op = ms.issue_token(
        kind=TokenKind.OPERATOR,
        name="op",
        tenant_id=None,
        project_id=None,
        environment_id=None,
        permissions=["admin"],
        expires_at=None,
    ).secret
    assert op
    a = _seed_tenant(ms, "tenant-a", tls_dir)
    b = _seed_tenant(ms, "tenant-b", tls_dir)
    control = TestClient(create_control_app(runtime), raise_server_exceptions=False)
    return World(runtime, control, op, a, b, tls_dir)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = make_world(f"sqlite:///{tmp_path / 'metastore.sqlite3'}", tmp_path)
    yield w
    w.control.close()
    w.runtime.metastore.close()


@pytest.fixture
def world_any(metastore_url: str, tmp_path: Path) -> Iterator[World]:
    """The same world on SQLite and on MariaDB."""
    w = make_world(metastore_url, tmp_path)
    yield w
    w.control.close()
    w.runtime.metastore.close()


class _InjectClientCert:
    """Stands in for the TLS layer in in-process tests: puts a PEM into the ASGI tls extension,
    as ClientCertH11Protocol does for a real TLS connection (tested separately over real TLS)."""

    def __init__(self, app, pem: str | None) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.pem = pem

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            scope.setdefault("extensions", {})["tls"] = {"client_cert_chain": [self.pem] if self.pem else []}
        await self.app(scope, receive, send)


def workload_client(runtime: BoundaryRuntime, cert_path: Path | None) -> TestClient:
    pem = cert_path.read_text() if cert_path is not None else None
    return TestClient(_InjectClientCert(create_workload_app(runtime), pem), raise_server_exceptions=False)


def workload_jwt(client: TestClient) -> str:
    resp = client.post("/workload-tokens")
    assert resp.status_code == 201, resp.text
    return str(resp.json()["token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
