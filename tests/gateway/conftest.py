"""Real servers for the gateway tests: moto over HTTP, Boundary (``python -m api.boundary``, its
workload API on mTLS) over a SQLite metastore, and the gateway app in-process per test.

One Boundary and one moto per test session of this area; tenants, environments and tokens are
created through the metastore the Boundary process serves from.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient
from gateway_requests import BUCKET, free_port
from moto.server import ThreadedMotoServer

from api.boundary.bootstrap import DevBootstrap, bootstrap_development
from api.boundary.metastore import Metastore
from api.common.auth import TokenKind
from api.common.workload_identity import ensure_dev_pki
from api.gateway.app import create_app
from api.gateway.runtime import GatewayRuntime
from api.gateway.settings import GatewaySettings

REGION = "us-east-1"


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"boundary exited: {log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"boundary did not open port {port}: {log.read_text()[-3000:]}")


@dataclass
class Tenancy:
    """The development tenant (served by the gateway's deployment) plus what tests need besides."""

    boot: DevBootstrap
    metastore_url: str
    workload_url: str
    tls_dir: Path
    env2_id: str
    env2_token: str
    other_tenant_token: str

    def metastore(self) -> Metastore:
        return Metastore(self.metastore_url)

    def issue_publisher(
        self, *, environment_id: str | None = None, expires_at: dt.datetime | None = None, name: str = "t"
    ) -> tuple[str, str]:
        ms = self.metastore()
        try:
            issued = ms.issue_token(
                kind=TokenKind.PUBLISHER,
                name=f"{name}-{secrets.token_hex(3)}",
                tenant_id=self.boot.tenant_id,
                project_id=self.boot.project_id,
                environment_id=environment_id or self.boot.environment_id,
                permissions=["publish"],
                expires_at=expires_at,
            )
        finally:
            ms.close()
        assert issued.secret is not None
        return issued.token.id, issued.secret

    def revoke(self, token_id: str) -> None:
        ms = self.metastore()
        try:
            ms.revoke_token(token_id)
        finally:
            ms.close()

    def new_environment(self, name: str, **config: Any) -> tuple[str, str]:
        """A fresh environment of the dev project (optionally with config changes) and its token."""
        ms = self.metastore()
        try:
            env, _ = ms.create_environment(self.boot.project_id, f"{name}-{secrets.token_hex(3)}")
            if config:
                ms.update_publisher_config(env.id, config)
        finally:
            ms.close()
        return env.id, self.issue_publisher(environment_id=env.id)[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    s3_client(url).create_bucket(Bucket=BUCKET)
    try:
        yield url
    finally:
        server.stop()


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture(scope="session")
def s3(s3_endpoint: str) -> Any:
    return s3_client(s3_endpoint)


@pytest.fixture(scope="session")
def tenancy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenancy]:
    root = tmp_path_factory.mktemp("gateway-boundary")
    metastore_url = f"sqlite:///{root / 'metastore.db'}"
    boot = bootstrap_development(metastore_url)
    tls_dir = root / "tls"
    ensure_dev_pki(tls_dir, boot.deployment_id, boot.cell)

    ms = Metastore(metastore_url)
    try:
        env2, _ = ms.create_environment(boot.project_id, "staging")
        env2_token = ms.issue_token(
            kind=TokenKind.PUBLISHER,
            name="staging-publisher",
            tenant_id=boot.tenant_id,
            project_id=boot.project_id,
            environment_id=env2.id,
            permissions=["publish"],
            expires_at=None,
        ).secret
        other, _ = ms.create_tenant("other-tenant")
        other_project, _ = ms.create_project(other.id, "p")
        other_env, _ = ms.create_environment(other_project.id, "prod")
        other_token = ms.issue_token(
            kind=TokenKind.PUBLISHER,
            name="other-publisher",
            tenant_id=other.id,
            project_id=other_project.id,
            environment_id=other_env.id,
            permissions=["publish"],
            expires_at=None,
        ).secret
    finally:
        ms.close()
    assert env2_token and other_token

    control_port, workload_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAML_STUDIO_")}
    env |= {
        "BAML_STUDIO_BOUNDARY_METASTORE_URL": metastore_url,
        "BAML_STUDIO_BOUNDARY_CONTROL_PORT": str(control_port),
        "BAML_STUDIO_BOUNDARY_WORKLOAD_PORT": str(workload_port),
        "BAML_STUDIO_BOUNDARY_RUN_DIR": str(root / "boundary"),
        "BAML_STUDIO_BOUNDARY_TLS_DIR": str(tls_dir),
        "BAML_STUDIO_BOUNDARY_CLICKHOUSE_PATH": str(root / "chdb"),
        "BAML_STUDIO_BOUNDARY_DEVELOPMENT": "true",
        "BAML_STUDIO_BOUNDARY_DEV_DEPLOYMENT_ID": boot.deployment_id,
        "BAML_STUDIO_BOUNDARY_DEV_CELL": boot.cell,
    }
    log = root / "boundary.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "api.boundary"], env=env, stdout=out, stderr=out)
    try:
        wait_port(workload_port, proc, log)
        yield Tenancy(
            boot=boot,
            metastore_url=metastore_url,
            workload_url=f"https://127.0.0.1:{workload_port}",
            tls_dir=tls_dir,
            env2_id=env2.id,
            env2_token=env2_token,
            other_tenant_token=other_token,
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def gateway(tenancy: Tenancy, s3_endpoint: str) -> Iterator[Callable[..., Any]]:
    """``gateway(**settings_overrides)`` -> a context manager yielding (TestClient, runtime)."""

    @contextmanager
    def make(**overrides: Any) -> Iterator[tuple[TestClient, GatewayRuntime]]:
        values: dict[str, Any] = {
            "s3_endpoint_url": s3_endpoint,
            "bucket": BUCKET,
            "boundary_workload_url": tenancy.workload_url,
            "tls_dir": tenancy.tls_dir,
            "deployment_id": tenancy.boot.deployment_id,
            "boundary_attempts": 1,
            "rate_limit_per_second": 1000.0,
            "rate_limit_burst": 1000,
        }
        values.update(overrides)
        runtime = GatewayRuntime(GatewaySettings(**values))
        with TestClient(create_app(runtime=runtime), raise_server_exceptions=False) as client:
            yield client, runtime

    yield make
