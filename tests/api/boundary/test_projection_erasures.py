# ruff: noqa: F811  (the fact_world fixture is imported by name, then requested by tests)
"""POST /projection-erasures and POST /projection-fact-counts."""

from __future__ import annotations

from boundary_fixtures import World
from facts_fixtures import Facts, batch_id_for, execution_facts, fact_world, make_batch, read_arrow  # noqa: F401


def test_create_projection_erasure_removes_every_relation_and_is_idempotent(fact_world: World) -> None:
    fa, fb = Facts(fact_world, "a"), Facts(fact_world, "b")
    erased = fa.publish_execution(0, failed=True)  # a failed execution has rows in all five relations
    kept = fa.publish_execution(1)
    fa.publish_definitions()
    other = fb.publish_execution(0, failed=True)
    counts = fa.client.post(
        "/projection-fact-counts",
        json={"environment_id": fa.t.environment_id, "root_ids": [erased]},
        headers=fa.h,
    ).json()
    assert counts["counts"] == {
        "calls_v1": 3,
        "threads_v1": 1,
        "call_path_stats_v1": 3,
        "errors_v1": 1,
        "health_v1": 1,
    }
    body = {"environment_id": fa.t.environment_id, "generation": 1, "root_ids": [erased]}
    resp = fa.client.post("/projection-erasures", json=body, headers={**fa.h, "Idempotency-Key": "er-1"})
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert out["deleted"]["calls_v1"] == 3 and out["deleted"]["errors_v1"] == 1
    assert out["deleted"]["function_definitions_v1"] == 0  # the program is still used by `kept`
    assert out["remaining_total"] == 0 and out["state"] == "complete"
    assert set(out["remaining"].values()) == {0}
    # Same key, same body: the same answer. Same key, other body: 409. New key: nothing left to delete.
    again = fa.client.post("/projection-erasures", json=body, headers={**fa.h, "Idempotency-Key": "er-1"})
    assert again.json() == out
    clash = fa.client.post(
        "/projection-erasures", json={**body, "root_ids": [kept]}, headers={**fa.h, "Idempotency-Key": "er-1"}
    )
    assert clash.status_code == 409 and clash.json()["code"] == "idempotency_key_reused"
    repeat = fa.client.post(
        "/projection-erasures", json=body, headers={**fa.h, "Idempotency-Key": "er-2"}
    ).json()
    assert set(repeat["deleted"].values()) == {0} and repeat["remaining_total"] == 0
    # The other execution and the other tenant are untouched; counts prove absence.
    rows = (
        read_arrow(fa.query("SELECT DISTINCT execution_id FROM calls_v1")).column("execution_id").to_pylist()
    )
    assert rows == [kept]
    counts = fa.client.post(
        "/projection-fact-counts",
        json={"environment_id": fa.t.environment_id, "generation": 1, "root_ids": [erased, kept]},
        headers=fa.h,
    ).json()
    assert counts["counts"]["calls_v1"] == 3 and counts["total"] == 3 + 1 + 3 + 0 + 1
    other_counts = fb.client.post(
        "/projection-fact-counts",
        json={"environment_id": fb.t.environment_id, "root_ids": [other]},
        headers=fb.h,
    ).json()
    assert other_counts["total"] == 9


def test_create_projection_erasure_refuses_replayed_batches_and_drops_orphan_programs(
    fact_world: World,
) -> None:
    fa = Facts(fact_world, "a")
    root = fa.publish_execution(0)
    fa.publish_definitions()
    out = fa.client.post(
        "/projection-erasures",
        json={"environment_id": fa.t.environment_id, "generation": 1, "root_ids": [root]},
        headers={**fa.h, "Idempotency-Key": "er-orphan"},
    ).json()
    assert out["deleted"]["function_definitions_v1"] == 3 and out["remaining_total"] == 0
    # An in-flight projector replaying the erased root cannot resurrect it.
    t = fa.t
    rows = execution_facts(t.tenant_id, t.project_id, t.environment_id, 1, 0)["calls_v1"]
    body, hdr = make_batch("calls_v1", rows, t.environment_id, 1, root)
    resp = fa.put(batch_id_for("calls_v1", root), body, hdr)
    assert resp.status_code == 409 and resp.json()["code"] == "root_erased"


def test_create_projection_erasure_needs_key_and_own_environment(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    body = {"environment_id": fa.t.environment_id, "generation": 1, "root_ids": ["abc"]}
    resp = fa.client.post("/projection-erasures", json=body, headers=fa.h)
    assert resp.status_code == 400 and resp.json()["code"] == "idempotency_key_missing"
    resp = fa.client.post(
        "/projection-erasures",
        json={**body, "environment_id": fact_world.b.environment_id},
        headers={**fa.h, "Idempotency-Key": "k"},
    )
    assert resp.status_code == 404
    resp = fa.client.post(
        "/projection-erasures", json={**body, "root_ids": []}, headers={**fa.h, "Idempotency-Key": "k"}
    )
    assert resp.status_code == 422
