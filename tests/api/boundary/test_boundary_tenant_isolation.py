"""A token (or workload) of tenant A never reads or changes tenant B, whatever the path or body says."""

from __future__ import annotations

import pytest
from boundary_fixtures import World, bearer, workload_client, workload_jwt


def _control_attempts(world: World) -> list[tuple[str, str, dict | None]]:
    b = world.b
    return [
        ("GET", f"/v1/tenants/{b.tenant_id}", None),
        ("POST", f"/v1/tenants/{b.tenant_id}/projects", {"name": "evil"}),
        ("GET", f"/v1/tenants/{b.tenant_id}/projects", None),
        ("GET", f"/v1/projects/{b.project_id}", None),
        ("POST", f"/v1/projects/{b.project_id}/environments", {"name": "evil"}),
        ("GET", f"/v1/projects/{b.project_id}/environments", None),
        ("GET", f"/v1/environments/{b.environment_id}", None),
        ("GET", f"/v1/environments/{b.environment_id}/active-generation", None),
        ("PUT", f"/v1/environments/{b.environment_id}/active-generation", {"generation": 9}),
        ("GET", f"/v1/environments/{b.environment_id}/publisher-config", None),
        ("PATCH", f"/v1/environments/{b.environment_id}/publisher-config", {"capture_enabled": False}),
        ("POST", f"/v1/tenants/{b.tenant_id}/deployments", {"name": "evil", "cell": "c"}),
        ("GET", f"/v1/tenants/{b.tenant_id}/deployments", None),
        ("GET", f"/v1/deployments/{b.deployment_id}", None),
        ("POST", "/v1/tokens", {"kind": "user", "name": "evil", "tenant_id": b.tenant_id}),
        ("POST", "/v1/tokens", {"kind": "publisher", "name": "evil", "environment_id": b.environment_id}),
        ("POST", "/v1/tokens", {"kind": "user", "name": "evil", "project_id": b.project_id}),
    ]


def _b_tokens(world: World) -> list[str]:
    return [t.id for t in world.runtime.metastore.list_tokens(tenant_id=world.b.tenant_id)]


@pytest.mark.parametrize("who", ["admin", "user"])
def test_control_api_isolation(world_any: World, who: str) -> None:
    world = world_any
    token = getattr(world.a, who)
    before_env = world.runtime.metastore.get_environment(world.b.environment_id)
    before_cfg = world.runtime.metastore.get_publisher_config(world.b.environment_id)
    before_tokens = _b_tokens(world)
    for method, path, body in _control_attempts(world):
        resp = world.control.request(method, path, json=body, headers=bearer(token))
        assert resp.status_code in (403, 404), (method, path, resp.status_code, resp.text)
        assert world.b.tenant_id not in resp.text or (resp.status_code == 404 and "not found" in resp.text)
    b_token_ids = _b_tokens(world)
    for tid in b_token_ids:
        for method, suffix in (("GET", ""), ("POST", "/revoke"), ("POST", "/rotate")):
            resp = world.control.request(
                method,
                f"/v1/tokens/{tid}{suffix}",
                json={} if suffix == "/rotate" else None,
                headers=bearer(token),
            )
            assert resp.status_code in (403, 404), (method, suffix, resp.text)
    # Nothing of B changed.
    after_env = world.runtime.metastore.get_environment(world.b.environment_id)
    assert after_env.active_generation == before_env.active_generation
    assert world.runtime.metastore.get_publisher_config(world.b.environment_id) == before_cfg
    assert _b_tokens(world) == before_tokens
    assert all(t.revoked_at is None for t in world.runtime.metastore.list_tokens(tenant_id=world.b.tenant_id))
    assert [p.name for p in world.runtime.metastore.list_projects(world.b.tenant_id)] == ["proj"]
    # Listings only show A.
    tenants = world.control.get("/v1/tenants", headers=bearer(token)).json()["items"]
    assert [t["tenant_id"] for t in tenants] == [world.a.tenant_id]


def test_token_listing_ignores_foreign_filters(world: World) -> None:
    resp = world.control.get(
        "/v1/tokens", params={"tenant_id": world.b.tenant_id}, headers=bearer(world.a.admin)
    )
    assert resp.status_code == 200
    assert {t["tenant_id"] for t in resp.json()["items"]} == {world.a.tenant_id}
    resp = world.control.get(
        "/v1/tokens", params={"environment_id": world.b.environment_id}, headers=bearer(world.a.admin)
    )
    assert resp.json()["items"] == []


def test_workload_api_isolation(world: World) -> None:
    client = workload_client(world.runtime, world.a.pki.client_cert)
    h = bearer(workload_jwt(client))
    b_env = world.b.environment_id
    for method, path, body in [
        ("GET", f"/environments/{b_env}/active-generation", None),
        ("GET", f"/environments/{b_env}/publisher-config", None),
        ("POST", "/query-snapshots", {"environment_id": b_env}),
    ]:
        resp = client.request(method, path, json=body, headers=h)
        assert resp.status_code == 404, (path, resp.text)
    # B's tokens look unknown to A's deployment.
    for token in (world.b.user, world.b.publisher, world.b.admin):
        resp = client.post("/token-introspections", json={"token": token}, headers=h)
        assert resp.status_code == 200 and resp.json() == {
            "active": False,
            "kind": None,
            "token_id": None,
            "tenant_id": None,
            "project_id": None,
            "environment_id": None,
            "permissions": [],
            "expires_at": None,
        }
    # A's own environment works with the same credentials.
    own = client.get(f"/environments/{world.a.environment_id}/active-generation", headers=h)
    assert own.status_code == 200 and own.json()["generation"] == 1
