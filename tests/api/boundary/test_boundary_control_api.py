"""Control API: routes, permissions, problem+json, request ids and idempotency."""

from __future__ import annotations

import datetime as dt

from boundary_fixtures import World, bearer

from api.common.auth import TokenKind, generate_token
from api.common.errors import PROBLEM_MEDIA_TYPE


def _problem(resp, status: int, code: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith(PROBLEM_MEDIA_TYPE)
    body = resp.json()
    assert {"type", "title", "status", "detail", "code", "request_id", "retryable", "remedy"} <= set(body)
    assert body["status"] == status
    assert body["request_id"] == resp.headers["x-baml-request-id"]
    if code is not None:
        assert body["code"] == code, body
    return body


def test_healthz(world: World) -> None:
    resp = world.control.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok", "service": "boundary-control"}


def test_request_id_is_echoed_or_generated(world: World) -> None:
    resp = world.control.get("/healthz", headers={"X-Baml-Request-Id": "req-123"})
    assert resp.headers["x-baml-request-id"] == "req-123"
    generated = world.control.get("/healthz").headers["x-baml-request-id"]
    assert len(generated) == 26  # a ULID
    # A malformed id is replaced, never echoed back.
    bad = world.control.get("/healthz", headers={"X-Baml-Request-Id": "x" * 200})
    assert bad.headers["x-baml-request-id"] != "x" * 200
    err = world.control.get("/v1/tenants", headers={"X-Baml-Request-Id": "req-err"})
    assert _problem(err, 401)["request_id"] == "req-err"


def test_missing_malformed_unknown_tokens_are_401(world: World) -> None:
    _problem(world.control.get("/v1/tenants"), 401, "token_missing")
    _problem(world.control.get("/v1/tenants", headers={"Authorization": "Basic abc"}), 401, "token_malformed")
    _problem(world.control.get("/v1/tenants", headers=bearer("bst_usr_short")), 401, "token_malformed")
    _problem(
        world.control.get("/v1/tenants", headers=bearer(generate_token(TokenKind.USER))),
        401,
        "token_inactive",
    )


def test_publisher_token_refused_on_control_api(world: World) -> None:
    _problem(
        world.control.get("/v1/tenants", headers=bearer(world.a.publisher)), 403, "token_kind_not_allowed"
    )


def test_expired_and_revoked_tokens_are_401(world: World) -> None:
    ms = world.runtime.metastore
    exp = ms.issue_token(
        kind=TokenKind.USER,
        name="x",
        tenant_id=world.a.tenant_id,
        project_id=None,
        environment_id=None,
        permissions=["admin"],
        expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1),
    )
    assert exp.secret
    _problem(world.control.get("/v1/tenants", headers=bearer(exp.secret)), 401, "token_inactive")
    resp = world.control.post(
        f"/v1/tokens/{_whoami(world, world.a.user)}/revoke", headers=bearer(world.a.user)
    )
    assert resp.status_code == 200 and resp.json()["revoked_at"] is not None
    _problem(world.control.get("/v1/tenants", headers=bearer(world.a.user)), 401, "token_inactive")


def _whoami(world: World, token: str) -> str:
    resp = world.control.get("/v1/whoami", headers=bearer(token))
    assert resp.status_code == 200, resp.text
    return str(resp.json()["token_id"])


def test_operator_creates_tenant_hierarchy(world: World) -> None:
    op = bearer(world.operator)
    t = world.control.post("/v1/tenants", json={"name": "newco"}, headers=op)
    assert t.status_code == 201, t.text
    tid = t.json()["tenant_id"]
    p = world.control.post(f"/v1/tenants/{tid}/projects", json={"name": "p1"}, headers=op)
    assert p.status_code == 201
    e = world.control.post(
        f"/v1/projects/{p.json()['project_id']}/environments", json={"name": "e1"}, headers=op
    )
    assert e.status_code == 201 and e.json()["active_generation"] == 1 and e.json()["tenant_id"] == tid
    d = world.control.post(f"/v1/tenants/{tid}/deployments", json={"name": "d1", "cell": "c1"}, headers=op)
    assert d.status_code == 201 and d.json()["kind"] == "byoc"
    names = {x["name"] for x in world.control.get("/v1/tenants", headers=op).json()["items"]}
    assert names == {"tenant-a", "tenant-b", "newco"}
    _problem(world.control.post("/v1/tenants", json={"name": "newco"}, headers=op), 409, "tenant_exists")


def test_user_cannot_create_tenants_or_deployments(world: World) -> None:
    admin = bearer(world.a.admin)
    _problem(world.control.post("/v1/tenants", json={"name": "x"}, headers=admin), 403, "operator_required")
    _problem(
        world.control.post(
            f"/v1/tenants/{world.a.tenant_id}/deployments", json={"name": "d", "cell": "c"}, headers=admin
        ),
        403,
        "operator_required",
    )


def test_validation_errors_are_problem_json_without_values(world: World) -> None:
    resp = world.control.post(
        "/v1/tenants", json={"name": "has spaces and secret-ish"}, headers=bearer(world.operator)
    )
    body = _problem(resp, 422, "invalid_request")
    assert "body.name" in body["detail"] and "secret-ish" not in body["detail"]
    _problem(
        world.control.post("/v1/tenants", json={"name": "x", "extra": 1}, headers=bearer(world.operator)), 422
    )


def test_admin_manages_own_tenant(world: World) -> None:
    admin = bearer(world.a.admin)
    p = world.control.post(f"/v1/tenants/{world.a.tenant_id}/projects", json={"name": "p2"}, headers=admin)
    assert p.status_code == 201
    e = world.control.post(
        f"/v1/projects/{p.json()['project_id']}/environments", json={"name": "e"}, headers=admin
    )
    assert e.status_code == 201
    listing = world.control.get(f"/v1/tenants/{world.a.tenant_id}/projects", headers=admin).json()["items"]
    assert {x["name"] for x in listing} == {"proj", "p2"}
    deps = world.control.get(f"/v1/tenants/{world.a.tenant_id}/deployments", headers=admin)
    assert [d["deployment_id"] for d in deps.json()["items"]] == [world.a.deployment_id]


def test_query_user_cannot_administer(world: World) -> None:
    user = bearer(world.a.user)
    _problem(
        world.control.post(f"/v1/tenants/{world.a.tenant_id}/projects", json={"name": "x"}, headers=user), 403
    )
    _problem(
        world.control.put(
            f"/v1/environments/{world.a.environment_id}/active-generation",
            json={"generation": 2},
            headers=user,
        ),
        403,
        "permission_missing",
    )
    _problem(world.control.get("/v1/tokens", headers=user), 403, "permission_missing")
    # ...but reads its own environment.
    assert world.control.get(f"/v1/environments/{world.a.environment_id}", headers=user).status_code == 200


def test_issue_list_rotate_revoke_tokens(world: World) -> None:
    admin = bearer(world.a.admin)
    body = {"kind": "publisher", "name": "svc", "environment_id": world.a.environment_id}
    issued = world.control.post("/v1/tokens", json=body, headers=admin)
    assert issued.status_code == 201, issued.text
    tok = issued.json()
    assert tok["secret"].startswith("bst_pub_") and tok["permissions"] == ["publish"]
    assert tok["tenant_id"] == world.a.tenant_id and tok["project_id"] == world.a.project_id
    listing = world.control.get("/v1/tokens", headers=admin).json()["items"]
    assert tok["token_id"] in {t["token_id"] for t in listing}
    assert all("secret" not in t for t in listing)
    assert all(t["tenant_id"] == world.a.tenant_id for t in listing)
    rot = world.control.post(
        f"/v1/tokens/{tok['token_id']}/rotate", json={"grace_seconds": 60}, headers=admin
    )
    assert rot.status_code == 201, rot.text
    new = rot.json()["replacement"]
    assert new["secret"].startswith("bst_pub_") and new["secret"] != tok["secret"]
    assert rot.json()["previous"]["replaced_by"] == new["token_id"]
    assert world.runtime.metastore.authenticate(tok["secret"]) is not None  # grace period
    rev = world.control.post(f"/v1/tokens/{tok['token_id']}/revoke", headers=admin)
    assert rev.status_code == 200
    assert world.runtime.metastore.authenticate(tok["secret"]) is None
    assert world.runtime.metastore.authenticate(new["secret"]) is not None


def test_token_grants_are_bounded(world: World) -> None:
    admin = bearer(world.a.admin)
    _problem(world.control.post("/v1/tokens", json={"kind": "operator", "name": "x"}, headers=admin), 403)
    _problem(
        world.control.post(
            "/v1/tokens",
            json={"kind": "publisher", "name": "x", "tenant_id": world.a.tenant_id},
            headers=admin,
        ),
        422,
        "scope_missing",
    )
    _problem(
        world.control.post(
            "/v1/tokens",
            json={
                "kind": "publisher",
                "name": "x",
                "permissions": ["query"],
                "environment_id": world.a.environment_id,
            },
            headers=admin,
        ),
        422,
        "permission_invalid",
    )
    # An environment-scoped admin cannot mint a tenant-wide token.
    env_admin = world.runtime.metastore.issue_token(
        kind=TokenKind.USER,
        name="ea",
        tenant_id=None,
        project_id=None,
        environment_id=world.a.environment_id,
        permissions=["admin", "query"],
        expires_at=None,
    ).secret
    assert env_admin
    _problem(
        world.control.post(
            "/v1/tokens",
            json={"kind": "user", "name": "x", "tenant_id": world.a.tenant_id},
            headers=bearer(env_admin),
        ),
        403,
        "scope_insufficient",
    )
    _problem(
        world.control.post(
            "/v1/tokens",
            json={"kind": "user", "name": "x", "permissions": ["erasure"]},
            headers=bearer(env_admin),
        ),
        403,
        "grant_exceeds_caller",
    )
    ok = world.control.post(
        "/v1/tokens", json={"kind": "user", "name": "x", "permissions": ["query"]}, headers=bearer(env_admin)
    )
    assert ok.status_code == 201 and ok.json()["environment_id"] == world.a.environment_id


def test_idempotency_key_same_body_same_resource(world_any: World) -> None:
    world = world_any
    op = {**bearer(world.operator), "Idempotency-Key": "key-1"}
    first = world.control.post("/v1/tenants", json={"name": "idem"}, headers=op)
    second = world.control.post("/v1/tenants", json={"name": "idem"}, headers=op)
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["tenant_id"] == second.json()["tenant_id"]
    _problem(
        world.control.post("/v1/tenants", json={"name": "other"}, headers=op), 409, "idempotency_key_reused"
    )
    _problem(
        world.control.post("/v1/tenants", json={"name": "x"}, headers={**op, "Idempotency-Key": "bad key!"}),
        400,
    )


def test_idempotent_token_issue_returns_secret_once(world: World) -> None:
    h = {**bearer(world.a.admin), "Idempotency-Key": "tok-1"}
    body = {"kind": "user", "name": "ci", "permissions": ["query"]}
    first = world.control.post("/v1/tokens", json=body, headers=h)
    again = world.control.post("/v1/tokens", json=body, headers=h)
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["token_id"] == again.json()["token_id"]
    assert first.json()["secret"] and again.json()["secret"] is None


def test_generation_and_publisher_config(world: World) -> None:
    admin = bearer(world.a.admin)
    env = world.a.environment_id
    got = world.control.get(f"/v1/environments/{env}/active-generation", headers=bearer(world.a.user))
    assert got.json()["generation"] == 1
    put = world.control.put(
        f"/v1/environments/{env}/active-generation", json={"generation": 3}, headers=admin
    )
    assert put.status_code == 200 and put.json()["generation"] == 3
    _problem(
        world.control.put(f"/v1/environments/{env}/active-generation", json={"generation": 0}, headers=admin),
        422,
    )
    cfg = world.control.get(f"/v1/environments/{env}/publisher-config", headers=bearer(world.a.user)).json()
    assert cfg["flush_interval_seconds"] == 5 and cfg["supported_segment_versions"] == [2]
    patched = world.control.patch(
        f"/v1/environments/{env}/publisher-config", json={"capture_enabled": False}, headers=admin
    )
    assert patched.status_code == 200 and patched.json()["capture_enabled"] is False
    assert patched.json()["flush_interval_seconds"] == 5
    _problem(
        world.control.patch(
            f"/v1/environments/{env}/publisher-config", json={"flush_interval_seconds": 0}, headers=admin
        ),
        422,
    )


def test_catalog_versions(world: World) -> None:
    resp = world.control.get("/v1/catalog-versions", headers=bearer(world.a.user))
    assert [c["version"] for c in resp.json()["items"]] == [1]
    _problem(world.control.get("/v1/catalog-versions/9", headers=bearer(world.a.user)), 404)
