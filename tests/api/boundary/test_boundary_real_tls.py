"""The real server: uvicorn with TLS requiring client certificates, called over the network."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from api.boundary.__main__ import server_configs
from api.boundary.bootstrap import DevBootstrap, bootstrap_development
from api.boundary.control_client import ControlApiError, ControlClient
from api.boundary.settings import BoundarySettings
from api.common.workload_identity import DevPki, ensure_dev_pki
from api.dataplane.boundary_client import BoundaryClient, BoundaryError
from formats import boundary_wire as w


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    control_url: str
    workload_url: str
    boot: DevBootstrap
    pki: DevPki


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    run_dir = tmp_path_factory.mktemp("boundary")
    url = f"sqlite:///{run_dir / 'metastore.sqlite3'}"
    boot = bootstrap_development(url)
    settings = BoundarySettings(
        run_dir=run_dir,
        metastore_url=url,
        control_port=_free_port(),
        workload_port=_free_port(),
        dev_deployment_id=boot.deployment_id,
        dev_cell=boot.cell,
    )
    control_cfg, workload_cfg = server_configs(settings)
    servers = [uvicorn.Server(control_cfg), uvicorn.Server(workload_cfg)]

    def run() -> None:
        async def both() -> None:
            await asyncio.gather(*(s.serve() for s in servers))

        asyncio.run(both())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not all(s.started for s in servers):
        assert time.monotonic() < deadline, "boundary did not start"
        time.sleep(0.05)
    pki = ensure_dev_pki(settings.resolved_tls_dir(), boot.deployment_id, boot.cell)
    try:
        yield Running(
            f"http://127.0.0.1:{settings.control_port}",
            f"https://localhost:{settings.workload_port}",
            boot,
            pki,
        )
    finally:
        for s in servers:
            s.should_exit = True
        thread.join(timeout=10)


def test_without_client_certificate_the_handshake_fails(running: Running) -> None:
    ctx = ssl.create_default_context(cafile=str(running.pki.ca_cert))
    with (
        httpx.Client(verify=ctx) as client,
        pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)),
    ):
        client.post(running.workload_url + "/workload-tokens")


def test_with_certificate_but_no_jwt_is_401(running: Running) -> None:
    ctx = ssl.create_default_context(cafile=str(running.pki.ca_cert))
    ctx.load_cert_chain(str(running.pki.client_cert), str(running.pki.client_key))
    with httpx.Client(verify=ctx) as client:
        resp = client.get(
            running.workload_url + "/projection-schemas/1", headers={"X-Baml-Request-Id": "tls-1"}
        )
        assert resp.status_code == 401 and resp.json()["code"] == "workload_token_missing"
        assert resp.headers["x-baml-request-id"] == "tls-1"
        # The certificate arrives through the TLS layer: a JWT is issued for it.
        tok = client.post(running.workload_url + "/workload-tokens")
        assert tok.status_code == 201 and tok.json()["deployment_id"] == running.boot.deployment_id


def test_boundary_client_end_to_end(running: Running) -> None:
    boot = running.boot
    with BoundaryClient(running.workload_url, running.pki, boot.deployment_id, boot.cell) as client:
        info = client.introspect_token(boot.user_token)
        assert info.active and info.kind == "user" and set(info.permissions) == {"query", "erasure"}
        assert client.introspect_token(boot.user_token) is info  # cached
        assert client.introspect_token(boot.operator_token).active is False
        pub = client.introspect_token(boot.publisher_token)
        assert pub.active and pub.environment_id == boot.environment_id
        assert client.active_generation(boot.environment_id).generation == 1
        assert client.publisher_config(boot.environment_id).flush_interval_seconds == 5
        doc = client.projection_schema(1)
        assert {r.name for r in doc.relations} >= {"calls_v1", "threads_v1", "health_v1"}
        snap = client.query_snapshot(boot.environment_id)
        assert snap.generation == 1 and snap.tenant_id == boot.tenant_id
        with pytest.raises(BoundaryError) as err:
            client.active_generation("env_missing")
        assert err.value.status == 404 and err.value.code == "environment_not_found"


def test_control_client_over_http(running: Running) -> None:
    boot = running.boot
    with ControlClient(running.control_url, boot.operator_token) as op:
        t = op.create_tenant("tls-tenant", idempotency_key="abc")
        assert op.create_tenant("tls-tenant", idempotency_key="abc").tenant_id == t.tenant_id
        assert "tls-tenant" in {x.name for x in op.list_tenants()}
        issued = op.issue_token(
            w.TokenIssue(kind="user", name="u", tenant_id=t.tenant_id, permissions=["admin"])
        )
        assert issued.secret
        rot = op.rotate_token(issued.token_id)
        assert rot.replacement.secret and rot.previous.revoked_at is not None
        assert op.revoke_token(rot.replacement.token_id).revoked_at is not None
    with ControlClient(running.control_url, boot.user_token) as user, pytest.raises(ControlApiError) as err:
        user.create_tenant("nope")
    assert err.value.status == 403


def test_bootstrap_is_idempotent(running: Running, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite3'}"
    first = bootstrap_development(url)
    second = bootstrap_development(url)
    assert first == second
    assert DevBootstrap.model_validate_json(first.model_dump_json()) == first
    with pytest.raises(ValueError):
        bootstrap_development(url, deployment_id="dep_other")
    # A revoked dev token is re-issued; the ids stay.
    from api.boundary.metastore import Metastore

    ms = Metastore(url)
    tok = ms.authenticate(first.user_token)
    assert tok is not None
    ms.revoke_token(tok.id)
    ms.close()
    third = bootstrap_development(url)
    assert third.tenant_id == first.tenant_id and third.user_token != first.user_token
    assert third.operator_token == first.operator_token
