"""Workload API in process: certificate + JWT authentication and every endpoint."""

from __future__ import annotations

import base64

import pyarrow as pa
from boundary_fixtures import World, bearer, workload_client, workload_jwt

from api.common.workload_identity import WorkloadJwtSigner, ensure_dev_pki, issue_client_cert
from formats import catalog


def test_no_client_certificate_is_401(world: World) -> None:
    client = workload_client(world.runtime, None)
    resp = client.post("/workload-tokens")
    assert resp.status_code == 401 and resp.json()["code"] == "client_certificate_missing"


def test_certificate_from_another_ca_is_401(world: World, tmp_path) -> None:  # type: ignore[no-untyped-def]
    foreign = ensure_dev_pki(tmp_path / "other-ca", world.a.deployment_id, world.a.cell)
    resp = workload_client(world.runtime, foreign.client_cert).post("/workload-tokens")
    assert resp.status_code == 401 and resp.json()["code"] == "client_certificate_invalid"


def test_unregistered_deployment_or_wrong_cell_is_403(world: World) -> None:
    cert, _ = issue_client_cert(world.tls_dir, "dep_unknown", "cell-x", stem="unknown")
    assert (
        workload_client(world.runtime, cert).post("/workload-tokens").json()["code"] == "deployment_unknown"
    )
    cert, _ = issue_client_cert(world.tls_dir, world.a.deployment_id, "wrong-cell", stem="wrongcell")
    resp = workload_client(world.runtime, cert).post("/workload-tokens")
    assert resp.status_code == 403


def test_workload_token_and_jwt_required(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    tok = client.post("/workload-tokens").json()
    assert tok["deployment_id"] == world.a.deployment_id and tok["cell"] == world.a.cell
    assert tok["tenant_id"] == world.a.tenant_id and tok["token_type"] == "Bearer"
    resp = client.get("/projection-schemas/1")
    assert resp.status_code == 401 and resp.json()["code"] == "workload_token_missing"
    resp = client.get("/projection-schemas/1", headers=bearer("not.a.jwt"))
    assert resp.status_code == 401 and resp.json()["code"] == "workload_token_invalid"
    assert client.get("/projection-schemas/1", headers=bearer(tok["token"])).status_code == 200


def test_jwt_bound_to_its_certificate(world: World) -> None:
    jwt_a = workload_jwt(workload_client(world.runtime, world.a.pki.client_cert))
    client_b = workload_client(world.runtime, world.b.pki.client_cert)
    resp = client_b.get("/projection-schemas/1", headers=bearer(jwt_a))
    assert resp.status_code == 401 and resp.json()["code"] == "workload_token_mismatch"
    # A second certificate for the same deployment does not inherit the first one's JWT either.
    cert2, _ = issue_client_cert(world.tls_dir, world.a.deployment_id, world.a.cell, stem="second")
    resp = workload_client(world.runtime, cert2).get("/projection-schemas/1", headers=bearer(jwt_a))
    assert resp.status_code == 401


def test_expired_jwt_is_401(world: World) -> None:
    signer = world.runtime.signer
    assert signer is not None
    client = workload_client(world.runtime, world.a.pki.client_cert)
    short = WorkloadJwtSigner(world.runtime.settings.resolved_jwt_key_path(), ttl_seconds=-60)
    peer = world.runtime.verifier.verify(world.a.pki.client_cert.read_text())  # type: ignore[union-attr]
    token, _ = short.issue(peer)
    resp = client.get("/projection-schemas/1", headers=bearer(token))
    assert resp.status_code == 401 and resp.json()["code"] == "workload_token_expired"


def test_projection_schema_document(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    h = bearer(workload_jwt(client))
    resp = client.get("/projection-schemas/1", headers=h)
    doc = resp.json()
    assert doc["catalog_version"] == 1 and doc["digest"] == catalog.catalog_digest(1)
    calls = next(r for r in doc["relations"] if r["name"] == "calls_v1")
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(calls["arrow_schema_ipc_base64"])))
    assert schema.equals(catalog.public_schema("calls_v1"))
    assert "args" not in schema.names
    assert {c["name"]: c["visibility"] for c in calls["columns"]}["args"] == "private"
    assert "immutable" in resp.headers["cache-control"]
    assert client.get("/projection-schemas/2", headers=h).status_code == 404


def test_query_snapshot(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    h = bearer(workload_jwt(client))
    s1 = client.post("/query-snapshots", json={"environment_id": world.a.environment_id}, headers=h)
    assert s1.status_code == 201, s1.text
    body = s1.json()
    assert (body["tenant_id"], body["project_id"], body["catalog_version"], body["generation"]) == (
        world.a.tenant_id,
        world.a.project_id,
        1,
        1,
    )
    s2 = client.post(
        "/query-snapshots", json={"environment_id": world.a.environment_id, "catalog_version": 1}, headers=h
    )
    assert s2.json()["snapshot_id"] == body["snapshot_id"]
    # A body naming another tenant is not authority: it is rejected as unknown.
    bad = client.post(
        "/query-snapshots", json={"environment_id": world.a.environment_id, "tenant_id": "x"}, headers=h
    )
    assert bad.status_code == 422


def test_token_introspection(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    h = bearer(workload_jwt(client))
    user = client.post("/token-introspections", json={"token": world.a.user}, headers=h).json()
    assert user["active"] and user["kind"] == "user" and user["permissions"] == ["query"]
    assert (user["tenant_id"], user["environment_id"]) == (world.a.tenant_id, world.a.environment_id)
    pub = client.post("/token-introspections", json={"token": world.a.publisher}, headers=h).json()
    assert pub["active"] and pub["kind"] == "publisher" and pub["environment_id"] == world.a.environment_id
    op = client.post("/token-introspections", json={"token": world.operator}, headers=h).json()
    assert op["active"] is False
    junk = client.post("/token-introspections", json={"token": "garbage"}, headers=h).json()
    assert junk["active"] is False
    world.runtime.metastore.revoke_token(user["token_id"])
    assert (
        client.post("/token-introspections", json={"token": world.a.user}, headers=h).json()["active"]
        is False
    )


def test_environment_generation_and_config(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    h = bearer(workload_jwt(client))
    world.runtime.metastore.set_active_generation(world.a.environment_id, 4)
    gen = client.get(f"/environments/{world.a.environment_id}/active-generation", headers=h).json()
    assert gen["generation"] == 4
    cfg = client.get(f"/environments/{world.a.environment_id}/publisher-config", headers=h).json()
    assert cfg["max_objects_per_authorize"] == 100 and cfg["upload_url_ttl_seconds"] == 900
    assert client.get("/environments/env_missing/active-generation", headers=h).status_code == 404
