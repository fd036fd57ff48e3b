"""``POST /v1/query`` behaviour: auth, CORS, budgets, truncation detection, snapshot isolation."""

from __future__ import annotations

import pytest
from coordinator_corpus import commit_private
from coordinator_world import STUDIO_ORIGIN, BoundaryServer, Corpus
from fastapi.testclient import TestClient

from api.coordinator.private_reader import PrivateReader
from api.dataplane.lance_store import LanceStore
from formats import query_output as qo

PUBLIC = "SELECT function_name, count() AS n FROM calls_v1 GROUP BY function_name ORDER BY function_name"
PRIVATE = (
    "SELECT execution_id, call_id, output FROM calls_v1 WHERE is_llm AND started_at_ns > 0 "
    "ORDER BY started_at_ns LIMIT 40"
)


def test_post_query_without_token_is_401_problem(api: TestClient) -> None:
    resp = api.post("/v1/query", json={"sql": PUBLIC})
    assert resp.status_code == 401
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == "token_missing" and resp.json()["request_id"]


def test_post_query_with_a_publisher_token_is_403(api: TestClient, boundary: BoundaryServer) -> None:
    resp = api.post(
        "/v1/query",
        json={"sql": PUBLIC},
        headers={"Authorization": f"Bearer {boundary.boot.publisher_token}"},
    )
    assert resp.status_code == 403 and resp.json()["code"] == "token_not_for_queries"
    bogus = api.post("/v1/query", json={"sql": PUBLIC}, headers={"Authorization": "Bearer bst_usr_nope"})
    assert bogus.status_code == 401


def test_post_query_rejects_ddl_before_running_anything(
    api: TestClient, user_headers: dict[str, str]
) -> None:
    for sql in ("DROP TABLE calls_v1", "INSERT INTO calls_v1 (call_id) VALUES ('x')", "SELECT 1; SELECT 2"):
        resp = api.post("/v1/query", json={"sql": sql}, headers=user_headers)
        assert resp.status_code == 400 and resp.json()["code"] == "statement_not_allowed"
    assert api.post("/v1/query", json={"sql": PUBLIC}, headers=user_headers).status_code == 200


def test_cors_preflight_from_studio_origin(api: TestClient) -> None:
    resp = api.options(
        "/v1/query",
        headers={
            "Origin": STUDIO_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert resp.status_code == 200
    assert resp.headers["access-control-allow-origin"] == STUDIO_ORIGIN
    assert "authorization" in resp.headers["access-control-allow-headers"].lower()


def test_cors_refuses_other_origins(api: TestClient, user_headers: dict[str, str]) -> None:
    resp = api.options(
        "/v1/query",
        headers={"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST"},
    )
    assert resp.status_code == 400 and "access-control-allow-origin" not in resp.headers
    simple = api.post(
        "/v1/query", json={"sql": PUBLIC}, headers={**user_headers, "Origin": "https://evil.example.com"}
    )
    assert "access-control-allow-origin" not in simple.headers


def test_row_budget_exhaustion_ends_with_a_partial_outcome(
    api: TestClient, user_headers: dict[str, str]
) -> None:
    resp = api.post("/v1/query", json={"sql": PUBLIC, "budget": {"rows": 2}}, headers=user_headers)
    result = qo.read_query_bytes(resp.content)
    assert len(result.rows) == 2 and result.outcome.status == "partial"
    assert result.outcome.error is not None and result.outcome.error.code == "budget_exceeded"
    assert result.outcome.budget.rows.limit == 2 and result.outcome.budget.rows.used == 2


def test_private_bytes_budget_exhaustion(api: TestClient, user_headers: dict[str, str]) -> None:
    resp = api.post("/v1/query", json={"sql": PRIVATE, "budget": {"private_bytes": 1}}, headers=user_headers)
    result = qo.read_query_bytes(resp.content)
    assert result.rows == [] and result.outcome.status == "failed"
    assert result.outcome.error is not None and result.outcome.error.code == "budget_exceeded"
    assert result.outcome.private_bytes_read > 1


def test_truncated_response_is_detected(api: TestClient, user_headers: dict[str, str]) -> None:
    body = api.post("/v1/query", json={"sql": PUBLIC}, headers=user_headers).content
    assert qo.read_query_bytes(body).outcome.status == "complete"
    cut = body[: body.rstrip(b"\n").rfind(b"\n") + 1]  # drop the outcome line, as a cut connection would
    with pytest.raises(qo.IncompleteResultError):
        qo.read_query_bytes(cut)


def test_values_come_back_as_json(api: TestClient, user_headers: dict[str, str]) -> None:
    result = qo.read_query_bytes(api.post("/v1/query", json={"sql": PRIVATE}, headers=user_headers).content)
    states = {r["private_state"] for r in result.rows}
    assert states <= {"indexed", "pending"} and "indexed" in states
    assert any(isinstance(r["output"], dict | list) for r in result.rows if r["private_state"] == "indexed")
    assert all(r["output"] is None for r in result.rows if r["private_state"] == "pending")


def test_snapshot_isolation_of_lance_reads(corpus: Corpus, boundary: BoundaryServer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A copy of the private side: bind a reader, commit more executions, the bound reader sees none.
    store = LanceStore(root=tmp_path)
    projections = corpus.projected.projections
    first, later = projections[:20], projections[20:40]
    commit_private(store, boundary.scope, 1, first)
    bound = PrivateReader.bind(store, boundary.scope, 1)
    commit_private(store, boundary.scope, 1, later)
    later_ids = [p.execution_id for p in later]
    assert bound.indexed_executions(later_ids) == set()
    assert bound.indexed_executions([p.execution_id for p in first]) == {p.execution_id for p in first}
    fresh = PrivateReader.bind(store, boundary.scope, 1)
    fresh_leaves = fresh.datasets["value_leaves_v1"]
    assert fresh_leaves is not None
    some = fresh_leaves.to_table(columns=["role", "path"], filter=f"execution_id = '{later_ids[0]}'")
    role, path = some["role"][0].as_py(), some["path"][0].as_py()
    assert fresh.leaves(role, path, later_ids).num_rows > 0
    assert bound.leaves(role, path, later_ids).num_rows == 0
    assert fresh.indexed_executions(later_ids) == set(later_ids)
    assert fresh.lance_version is not None and bound.lance_version is not None
    assert fresh.lance_version > bound.lance_version
