"""Every metastore operation, on SQLite and on MariaDB."""

from __future__ import annotations

import datetime as dt

import pytest

from api.boundary.metastore import IdempotencyContext, Metastore, permissions_of
from api.boundary.models import utcnow
from api.common.auth import TokenKind, hash_token, token_kind
from api.common.errors import Conflict, IdempotencyConflict, NotFound, Unprocessable
from formats import catalog


def _scope(ms: Metastore) -> tuple[str, str, str]:
    t, _ = ms.create_tenant("acme")
    p, _ = ms.create_project(t.id, "billing")
    e, _ = ms.create_environment(p.id, "prod")
    return t.id, p.id, e.id


def test_migrations_are_idempotent(metastore_url: str) -> None:
    first = Metastore(metastore_url)
    first.close()
    again = Metastore(metastore_url)  # upgrade head on an up-to-date schema is a no-op
    assert again.list_tenants() == []
    again.close()


def test_create_and_read_hierarchy(metastore: Metastore) -> None:
    t_id, p_id, e_id = _scope(metastore)
    assert [t.name for t in metastore.list_tenants()] == ["acme"]
    assert metastore.get_tenant(t_id).name == "acme"
    assert [p.id for p in metastore.list_projects(t_id)] == [p_id]
    assert metastore.get_project(p_id).tenant_id == t_id
    env = metastore.get_environment(e_id)
    assert (env.tenant_id, env.project_id, env.active_generation) == (t_id, p_id, 1)
    assert [e.id for e in metastore.list_environments(p_id)] == [e_id]
    assert env.created_at.tzinfo is not None


def test_duplicate_names_conflict(metastore: Metastore) -> None:
    t_id, p_id, _ = _scope(metastore)
    with pytest.raises(Conflict):
        metastore.create_tenant("acme")
    with pytest.raises(Conflict):
        metastore.create_project(t_id, "billing")
    with pytest.raises(Conflict):
        metastore.create_environment(p_id, "prod")


def test_missing_parents_are_not_found(metastore: Metastore) -> None:
    with pytest.raises(NotFound):
        metastore.create_project("ten_missing", "x")
    with pytest.raises(NotFound):
        metastore.create_environment("prj_missing", "x")
    with pytest.raises(NotFound):
        metastore.get_environment("env_missing")


def test_deployments(metastore: Metastore) -> None:
    t_id, _, _ = _scope(metastore)
    d, _ = metastore.create_deployment(t_id, "us-east", "cell-1", "byoc")
    assert metastore.get_deployment(d.id).cell == "cell-1"
    assert [x.id for x in metastore.list_deployments(t_id)] == [d.id]
    assert metastore.find_deployment("dep_nope") is None


def test_tokens_are_stored_hashed_and_authenticate(metastore: Metastore) -> None:
    t_id, p_id, e_id = _scope(metastore)
    issued = metastore.issue_token(
        kind=TokenKind.PUBLISHER,
        name="svc",
        tenant_id=None,
        project_id=None,
        environment_id=e_id,
        permissions=["publish"],
        expires_at=None,
    )
    assert issued.secret is not None and token_kind(issued.secret) is TokenKind.PUBLISHER
    row = metastore.get_token(issued.token.id)
    assert row.token_hash == hash_token(issued.secret)
    assert issued.secret not in (row.token_hash, row.display_prefix)
    # Scope is completed from the environment, not taken from the caller.
    assert (row.tenant_id, row.project_id, row.environment_id) == (t_id, p_id, e_id)
    auth = metastore.authenticate(issued.secret)
    assert auth is not None and auth.id == row.id and permissions_of(auth) == ["publish"]
    other_last = "b" if issued.secret[-1] != "b" else "c"
    assert metastore.authenticate(issued.secret[:-1] + other_last) is None


def test_token_scope_mismatch_rejected(metastore: Metastore) -> None:
    _, _, e_id = _scope(metastore)
    other, _ = metastore.create_tenant("other")
    with pytest.raises(Unprocessable):
        metastore.issue_token(
            kind=TokenKind.USER,
            name="x",
            tenant_id=other.id,
            project_id=None,
            environment_id=e_id,
            permissions=["query"],
            expires_at=None,
        )


def test_expired_and_revoked_tokens_do_not_authenticate(metastore: Metastore) -> None:
    t_id, _, _ = _scope(metastore)
    past = utcnow() - dt.timedelta(seconds=1)
    expired = metastore.issue_token(
        kind=TokenKind.USER,
        name="e",
        tenant_id=t_id,
        project_id=None,
        environment_id=None,
        permissions=["query"],
        expires_at=past,
    )
    assert expired.secret and metastore.authenticate(expired.secret) is None
    live = metastore.issue_token(
        kind=TokenKind.USER,
        name="l",
        tenant_id=t_id,
        project_id=None,
        environment_id=None,
        permissions=["query"],
        expires_at=None,
    )
    assert live.secret and metastore.authenticate(live.secret) is not None
    revoked = metastore.revoke_token(live.token.id)
    assert revoked.revoked_at is not None
    assert metastore.authenticate(live.secret) is None


def test_rotation_with_and_without_grace(metastore: Metastore) -> None:
    _, _, e_id = _scope(metastore)
    old = metastore.issue_token(
        kind=TokenKind.PUBLISHER,
        name="p",
        tenant_id=None,
        project_id=None,
        environment_id=e_id,
        permissions=["publish"],
        expires_at=None,
    )
    assert old.secret
    new, prev = metastore.rotate_token(old.token.id, grace_seconds=3600, expires_at=None)
    assert new.secret and new.token.rotated_from == old.token.id and prev.replaced_by == new.token.id
    assert new.token.environment_id == e_id
    # Within the grace period both work; the old one stops at the cutoff.
    assert metastore.authenticate(old.secret) is not None
    assert metastore.authenticate(old.secret, now=utcnow() + dt.timedelta(seconds=3601)) is None
    assert metastore.authenticate(new.secret, now=utcnow() + dt.timedelta(seconds=3601)) is not None
    with pytest.raises(Conflict):
        metastore.rotate_token(old.token.id, grace_seconds=0, expires_at=None)
    newer, _ = metastore.rotate_token(new.token.id, grace_seconds=0, expires_at=None)
    assert metastore.authenticate(new.secret) is None
    assert newer.secret and metastore.authenticate(newer.secret) is not None


def test_list_tokens_filters(metastore: Metastore) -> None:
    t_id, _, e_id = _scope(metastore)
    other, _ = metastore.create_tenant("other")
    for tenant in (t_id, other.id):
        metastore.issue_token(
            kind=TokenKind.USER,
            name="u",
            tenant_id=tenant,
            project_id=None,
            environment_id=None,
            permissions=["query"],
            expires_at=None,
        )
    assert {t.tenant_id for t in metastore.list_tokens(tenant_id=t_id)} == {t_id}
    assert len(metastore.list_tokens()) == 2
    assert metastore.list_tokens(environment_id=e_id) == []


def test_catalog_versions_registered_and_pinned(metastore: Metastore) -> None:
    rows = metastore.list_catalog_versions()
    assert [r.version for r in rows] == list(catalog.CATALOG_VERSIONS)
    assert metastore.get_catalog_version(1).digest == catalog.catalog_digest(1)
    metastore.register_catalog_versions()  # idempotent
    with pytest.raises(NotFound):
        metastore.get_catalog_version(99)


def test_active_generation(metastore: Metastore) -> None:
    _, _, e_id = _scope(metastore)
    assert metastore.get_environment(e_id).active_generation == 1
    env = metastore.set_active_generation(e_id, 2)
    assert env.active_generation == 2
    assert metastore.get_environment(e_id).active_generation == 2


def test_publisher_config_defaults_and_update(metastore: Metastore) -> None:
    _, _, e_id = _scope(metastore)
    cfg = metastore.get_publisher_config(e_id)
    assert cfg == {
        "capture_enabled": True,
        "supported_segment_versions": [2],
        "supported_cas_versions": [1],
        "flush_interval_seconds": 5,
        "max_objects_per_authorize": 100,
        "large_value_threshold_bytes": 32768,
        "max_object_bytes": 268435456,
        "pack_max_entry_bytes": 8388608,
        "shipped_value_retention_seconds": 3600,
        "upload_url_ttl_seconds": 900,
    }
    out = metastore.update_publisher_config(
        e_id, {"flush_interval_seconds": 10, "supported_segment_versions": [3, 2]}
    )
    assert out["flush_interval_seconds"] == 10 and out["supported_segment_versions"] == [2, 3]
    assert metastore.get_publisher_config(e_id)["flush_interval_seconds"] == 10
    with pytest.raises(Unprocessable):
        metastore.update_publisher_config(e_id, {"bogus": 1})


def test_query_snapshots_shared_within_window_and_follow_generation(metastore: Metastore) -> None:
    t_id, _, e_id = _scope(metastore)
    now = utcnow()
    s1 = metastore.query_snapshot(e_id, 1, window_seconds=60, ttl_seconds=300, now=now)
    s2 = metastore.query_snapshot(e_id, 1, window_seconds=60, ttl_seconds=300, now=now)
    assert s1.id == s2.id and s1.generation == 1 and s1.tenant_id == t_id
    assert s1.expires_at > now
    metastore.set_active_generation(e_id, 2)
    s3 = metastore.query_snapshot(e_id, 1, window_seconds=60, ttl_seconds=300, now=now)
    assert s3.id != s1.id and s3.generation == 2
    assert metastore.get_query_snapshot(s1.id).generation == 1
    with pytest.raises(NotFound):
        metastore.query_snapshot(e_id, 7, window_seconds=60, ttl_seconds=300)
    assert metastore.purge_expired_snapshots(now=now + dt.timedelta(hours=1)) == 2


def test_idempotency_same_key_same_resource(metastore: Metastore) -> None:
    idem = IdempotencyContext("tok_x", "POST /v1/tenants", "k1", "d1")
    a, replay_a = metastore.create_tenant("acme", idem=idem)
    b, replay_b = metastore.create_tenant("acme", idem=idem)
    assert a.id == b.id and (replay_a, replay_b) == (False, True)
    assert len(metastore.list_tenants()) == 1
    with pytest.raises(IdempotencyConflict):
        metastore.create_tenant("acme2", idem=IdempotencyContext("tok_x", "POST /v1/tenants", "k1", "d2"))
    # The same key from another caller is a different record.
    c, _ = metastore.create_tenant("acme3", idem=IdempotencyContext("tok_y", "POST /v1/tenants", "k1", "d3"))
    assert c.id != a.id


def test_idempotent_token_issue_replay_has_no_secret(metastore: Metastore) -> None:
    t_id, _, _ = _scope(metastore)
    idem = IdempotencyContext("tok_x", "POST /v1/tokens", "k", "d")
    kw = dict(
        kind=TokenKind.USER,
        name="u",
        tenant_id=t_id,
        project_id=None,
        environment_id=None,
        permissions=["query"],
        expires_at=None,
        idem=idem,
    )
    first = metastore.issue_token(**kw)  # type: ignore[arg-type]
    second = metastore.issue_token(**kw)  # type: ignore[arg-type]
    assert first.token.id == second.token.id
    assert first.secret is not None and second.secret is None
    assert len(metastore.list_tokens(tenant_id=t_id)) == 1


def test_dev_bootstrap_record(metastore: Metastore) -> None:
    assert metastore.read_dev_bootstrap() is None
    metastore.write_dev_bootstrap('{"a": 1}')
    metastore.write_dev_bootstrap('{"a": 2}')
    assert metastore.read_dev_bootstrap() == '{"a": 2}'
