# ruff: noqa: F811  (the fact_world fixture is imported by name, then requested by tests)
"""POST /resident-queries: the public halves of the 13 query classes, the guard's rejections,
scope injection, budgets, the generation header and metadata."""

from __future__ import annotations

import pyarrow as pa
import pytest
from boundary_fixtures import World
from facts_fixtures import HOUR_NS, NOW_NS, Facts, fact_world, read_arrow  # noqa: F401

from api.boundary.facts.guard import Scope, SqlRejected, guard_sql
from formats import boundary_wire as w

WINDOW = f"started_at_ns >= {NOW_NS - HOUR_NS} AND started_at_ns < {NOW_NS}"


@pytest.fixture
def loaded(fact_world: World) -> tuple[Facts, Facts, list[str]]:
    fa, fb = Facts(fact_world, "a"), Facts(fact_world, "b")
    roots = [fa.publish_execution(i, failed=(i == 2)) for i in range(5)]
    fa.publish_definitions()
    fb.publish_execution(0)
    fb.publish_execution(1, failed=True)
    return fa, fb, roots


QUERIES = {
    "q1_recent_executions": (
        f"SELECT execution_id, started_at_ns, status FROM threads_v1 WHERE is_root AND {WINDOW}"
        " ORDER BY started_at_ns DESC LIMIT 100"
    ),
    "q2_calls_per_function_per_day": (
        "SELECT function_name, toDate(fromUnixTimestamp64Nano(started_at_ns)) AS day, count() AS calls"
        " FROM calls_v1 GROUP BY function_name, day ORDER BY function_name"
    ),
    "q3_duration_quantiles": (
        "SELECT function_name, quantiles(0.5, 0.95, 0.99)(duration_ns) AS q FROM calls_v1"
        " GROUP BY function_name ORDER BY function_name"
    ),
    "q4_error_rate_per_hour": (
        "SELECT function_name, toStartOfHour(fromUnixTimestamp64Nano(started_at_ns)) AS hour,"
        " countIf(status = 'failed') / count() AS error_rate FROM calls_v1 GROUP BY function_name, hour"
        " ORDER BY function_name"
    ),
    "q5_slowest_llm_calls": (
        f"SELECT execution_id, call_id, function_name, duration_ns FROM calls_v1 WHERE is_llm AND {WINDOW}"
        " ORDER BY duration_ns DESC LIMIT 20"
    ),
    "q7_function_by_parent": (
        "SELECT function_name, parent_function_name, count() AS calls, sum(duration_ns) AS total"
        " FROM calls_v1 GROUP BY function_name, parent_function_name ORDER BY function_name"
    ),
    "q9_public_half": (
        f"SELECT execution_id, call_id, args_cid FROM calls_v1 WHERE function_name = 'ExtractInvoice'"
        f" AND {WINDOW} AND args_state = 'available'"
    ),
    "q10_public_half": "SELECT execution_id, call_id, output_cid FROM calls_v1 WHERE output_state = 'available'",  # noqa: E501
    "q11_public_half": f"SELECT execution_id, call_id FROM calls_v1 WHERE function_name = 'Classify' AND {WINDOW}",  # noqa: E501
    "q12_public_half": "SELECT execution_id, call_id, duration_ns FROM calls_v1 WHERE function_name = 'ExtractInvoice'",  # noqa: E501
    "q13_availability": (
        "SELECT output_state AS state, count() AS n FROM calls_v1 WHERE startsWith(output_state, 'lost:')"
        " GROUP BY state UNION ALL SELECT index_state AS state, count() AS n FROM threads_v1"
        " WHERE index_state != 'complete' OR status = 'abandoned' GROUP BY state"
    ),
}


def test_run_resident_query_classes(loaded: tuple[Facts, Facts, list[str]]) -> None:
    fa, _fb, roots = loaded
    out = {name: read_arrow(fa.query(sql)) for name, sql in QUERIES.items()}
    assert out["q1_recent_executions"].num_rows == 5
    assert out["q1_recent_executions"].column("started_at_ns").to_pylist() == sorted(
        out["q1_recent_executions"].column("started_at_ns").to_pylist(), reverse=True
    )
    q2 = out["q2_calls_per_function_per_day"].to_pylist()
    assert {r["function_name"]: r["calls"] for r in q2} == {"Classify": 5, "ExtractInvoice": 5, "Pipeline": 5}
    q3 = {r["function_name"]: r["q"] for r in out["q3_duration_quantiles"].to_pylist()}
    assert q3["Pipeline"] == [900_000_000.0] * 3
    q4 = {r["function_name"]: r["error_rate"] for r in out["q4_error_rate_per_hour"].to_pylist()}
    assert q4 == {"Classify": 0.2, "ExtractInvoice": 0.0, "Pipeline": 0.0}
    q5 = out["q5_slowest_llm_calls"].to_pylist()
    assert (
        len(q5) == 10 and q5[0]["function_name"] == "ExtractInvoice" and q5[0]["duration_ns"] == 504_000_000
    )
    q7 = {
        (r["function_name"], r["parent_function_name"]): r["calls"]
        for r in out["q7_function_by_parent"].to_pylist()
    }
    assert q7 == {("Classify", "Pipeline"): 5, ("ExtractInvoice", "Pipeline"): 5, ("Pipeline", None): 5}
    assert out["q9_public_half"].num_rows == 5
    assert out["q10_public_half"].num_rows == 13  # 15 calls, 2 with lost:value_too_large output
    assert out["q11_public_half"].num_rows == 5 and out["q12_public_half"].num_rows == 5
    q13 = {r["state"]: r["n"] for r in out["q13_availability"].to_pylist()}
    assert q13 == {"lost:value_too_large": 2}
    # Q6: one execution's call tree.
    q6 = read_arrow(
        fa.query(
            f"SELECT call_id, parent_call_id FROM calls_v1 WHERE execution_id = '{roots[3]}' ORDER BY call_id"
        )
    )
    assert q6.to_pylist() == [
        {"call_id": "c0", "parent_call_id": None}, {"call_id": "c1", "parent_call_id": "c0"},
        {"call_id": "c2", "parent_call_id": "c0"},
    ]  # fmt: skip
    joined = read_arrow(fa.query(
        "SELECT count() AS n FROM calls_v1 AS c JOIN threads_v1 AS t ON c.execution_id = t.execution_id"
        " WHERE t.status = 'failed'"
    ))  # fmt: skip
    assert joined.column("n").to_pylist() == [3]
    defs = read_arrow(fa.query("SELECT count() AS n FROM function_definitions_v1"))
    assert defs.column("n").to_pylist() == [3]


def test_run_resident_query_generation_header_and_metadata(loaded: tuple[Facts, Facts, list[str]]) -> None:
    fa = loaded[0]
    resp = fa.query("SELECT count() AS n FROM calls_v1")
    assert resp.headers["content-type"] == w.ARROW_STREAM_MEDIA_TYPE
    assert resp.headers[w.HEADER_PROJECTION_GENERATION] == "1"
    table = read_arrow(resp)
    assert table.schema.metadata[w.META_PROJECTION_GENERATION.encode()] == b"1"
    snap = fa.client.post(
        "/query-snapshots", json={"environment_id": fa.t.environment_id}, headers=fa.h
    ).json()
    resp = fa.client.post(
        "/resident-queries",
        json={"sql": "SELECT count() AS n FROM calls_v1", "environment_id": fa.t.environment_id,
              "snapshot_id": snap["snapshot_id"]},
        headers=fa.h,
    )  # fmt: skip
    table = read_arrow(resp)
    assert table.column("n").to_pylist() == [15]
    assert table.schema.metadata[w.META_SNAPSHOT_ID.encode()] == snap["snapshot_id"].encode()


def test_run_resident_query_cross_tenant_predicate_sees_only_own_rows(
    loaded: tuple[Facts, Facts, list[str]],
) -> None:
    fa, fb, _ = loaded
    sql = (
        f"SELECT tenant_id, count() AS n FROM calls_v1 WHERE tenant_id = '{fb.t.tenant_id}' OR 1 = 1"
        " GROUP BY tenant_id"
    )
    assert read_arrow(fa.query(sql)).to_pylist() == [{"tenant_id": fa.t.tenant_id, "n": 15}]
    assert read_arrow(
        fa.query(f"SELECT count() AS n FROM calls_v1 WHERE tenant_id = '{fb.t.tenant_id}'")
    ).column("n").to_pylist() == [0]
    # Another tenant's environment is not there at all; another generation holds nothing.
    resp = fa.query("SELECT count() FROM calls_v1", environment_id=fb.t.environment_id)
    assert resp.status_code == 404
    assert read_arrow(fa.query("SELECT count() AS n FROM calls_v1", generation=2)).column(
        "n"
    ).to_pylist() == [0]


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELECT * FROM values_v1", "resident_sql_relation_not_public"),
        ("SELECT * FROM calls", "resident_sql_relation_unknown"),
        ("SELECT * FROM system.tables", "resident_sql_qualified_table_not_allowed"),
        (
            "SELECT count() FROM calls_v1 WHERE call_id IN (SELECT name FROM system.tables)",
            "resident_sql_qualified_table_not_allowed",
        ),
        ("SELECT * FROM url('http://127.0.0.1/x', CSV)", "resident_sql_table_function_not_allowed"),
        ("SELECT * FROM file('/etc/passwd')", "resident_sql_table_function_not_allowed"),
        ("SELECT * FROM remote('127.0.0.1', system.one)", "resident_sql_table_function_not_allowed"),
        ("SELECT * FROM numbers(10)", "resident_sql_table_function_not_allowed"),
        ("SELECT 1; SELECT 2", "resident_sql_multiple_statements"),
        ("DROP TABLE calls_v1", "resident_sql_statement_not_allowed"),
        ("SELECT args FROM calls_v1", "resident_sql_private_column"),
        (
            "SELECT count() FROM calls_v1 WHERE args['invoice']['id'] = 'INV-1042'",
            "resident_sql_private_column",
        ),
        ("SELECT dictGet('d', 'x', 1) FROM calls_v1", "resident_sql_function_not_allowed"),
        ("SELECT count() FROM calls_v1 SETTINGS max_threads = 1", "resident_sql_clause_not_allowed"),
        ("SELECT count() FROM calls_v1 FORMAT JSON", "resident_sql_clause_not_allowed"),
        ("SELECT nope FROM calls_v1", "resident_sql_unknown_column"),
        ("SELECT count() FROM calls_v1 ARRAY JOIN [1, 2] AS x", "resident_sql_construct_not_allowed"),
        ("SELECT 1 INTO OUTFILE 'x'", "resident_sql_sql_parse_error"),
    ],
)
def test_run_resident_query_rejections(fact_world: World, sql: str, code: str) -> None:
    fa = Facts(fact_world, "a")
    resp = fa.query(sql)
    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == code


def test_run_resident_query_row_budget_is_typed_error(loaded: tuple[Facts, Facts, list[str]]) -> None:
    fa = loaded[0]
    resp = fa.query("SELECT call_id FROM calls_v1", budget={"rows": 2})
    assert resp.status_code == 422
    problem = resp.json()
    assert problem["code"] == "resident_budget_exceeded" and problem["retryable"] is False
    assert "query-jobs" in problem["remedy"]
    assert read_arrow(fa.query("SELECT call_id FROM calls_v1 LIMIT 2", budget={"rows": 2})).num_rows == 2


def test_run_resident_query_binding_rules(fact_world: World) -> None:
    fa = Facts(fact_world, "a")
    body = {"sql": "SELECT count() FROM calls_v1", "environment_id": fa.t.environment_id}
    assert (
        fa.client.post("/resident-queries", json=body, headers=fa.h).json()["code"]
        == "resident_binding_missing"
    )
    resp = fa.client.post("/resident-queries", json={**body, "snapshot_id": "snp_nope"}, headers=fa.h)
    assert resp.status_code == 404
    assert fa.query("SELECT count() FROM calls_v1", generation=7).json()["code"] == "generation_not_readable"


def test_guard_wraps_every_table_in_scope() -> None:
    scope = Scope("ten'ant", "p", "e", 3)
    sql = guard_sql(
        "SELECT c.call_id FROM calls_v1 c LEFT JOIN threads_v1 t ON c.execution_id = t.execution_id"
        " WHERE c.execution_id IN (SELECT execution_id FROM errors_v1)",
        scope,
        database="db",
    )
    assert sql.count("FINAL WHERE") == 3 and sql.count("generation = 3") == 3
    assert "tenant_id = 'ten\\'ant'" in sql or "tenant_id = 'ten''ant'" in sql
    with pytest.raises(SqlRejected):
        guard_sql("WITH calls_v1 AS (SELECT 1 AS x) SELECT x FROM calls_v1", scope, database="db")
    assert isinstance(pa.schema([]), pa.Schema)
