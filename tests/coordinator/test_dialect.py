"""Standard SQL spellings rewritten to ClickHouse's: the text, the guard, and the same answers.

The answers are checked by running the rewritten SQL in chdb (what Boundary runs) and the
standard spelling in DataFusion, which reads it natively (percentile_disc, which DataFusion lacks,
against PostgreSQL's definition computed here).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import clickhouse_connect
import datafusion
import pyarrow as pa
import pytest
import sqlglot
from fastapi.testclient import TestClient

from api.boundary.facts import guard
from api.coordinator.dialect import DialectError, to_clickhouse
from api.coordinator.planner import UnsupportedQuery, plan_query
from formats import query_output as qo


def _rewrite(sql: str) -> str:
    return to_clickhouse(sqlglot.parse_one(sql, read="clickhouse")).sql(dialect="clickhouse")


@pytest.mark.parametrize(
    ("standard", "clickhouse"),
    [
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1",
            "SELECT quantileExactInclusive(0.5)(duration_ns) FROM calls_v1",
        ),
        (
            "SELECT approx_percentile_cont(0.9) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1",
            "SELECT quantile(0.9)(duration_ns) FROM calls_v1",
        ),
        (
            "SELECT approx_percentile(duration_ns, 0.5), percentile_approx(duration_ns, 0.99) FROM calls_v1",
            "SELECT quantile(0.5)(duration_ns), quantile(0.99)(duration_ns) FROM calls_v1",
        ),
        (
            "SELECT count(*) FILTER (WHERE status = 'failed') AS f FROM calls_v1",
            "SELECT countIf(status = 'failed') AS f FROM calls_v1",
        ),
        (
            "SELECT sum(duration_ns) FILTER (WHERE is_llm), max(duration_ns) FILTER (WHERE is_llm) "
            "FROM calls_v1",
            "SELECT sumIf(duration_ns, is_llm), maxIf(duration_ns, is_llm) FROM calls_v1",
        ),
        (
            "SELECT count(DISTINCT function_name) FILTER (WHERE is_llm) FROM calls_v1",
            "SELECT uniqExactIf(function_name, is_llm) FROM calls_v1",
        ),
        (
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) FILTER (WHERE is_llm) "
            "FROM calls_v1",
            "SELECT quantileExactInclusiveIf(0.5)(duration_ns, is_llm) FROM calls_v1",
        ),
        ("SELECT duration_ns::Float64 FROM calls_v1", "SELECT CAST(duration_ns AS Float64) FROM calls_v1"),
    ],
)
def test_standard_spellings_become_clickhouse_functions(standard: str, clickhouse: str) -> None:
    assert _rewrite(standard) == clickhouse
    assert plan_query(standard).resident_sql == clickhouse


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1",
        "SELECT function_name, percentile_disc(0.9) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1 "
        "GROUP BY function_name",
        "SELECT approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1",
        "SELECT count(*) FILTER (WHERE status = 'failed'), uniqExactIf(function_name, is_llm) FROM calls_v1",
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) FILTER (WHERE is_llm) FROM calls_v1",
        "SELECT started_at_ns::Int64 AS t FROM calls_v1 WHERE duration_ns::Float64 > 1.5",
    ],
)
def test_boundary_guard_accepts_the_rewritten_query(sql: str) -> None:
    scoped = guard.guard_sql(plan_query(sql).resident_sql, guard.Scope("t", "p", "e", 1), database="db")
    assert "tenant_id = 't'" in scoped


@pytest.mark.parametrize(
    ("sql", "remedy"),
    [
        ("SELECT mode() WITHIN GROUP (ORDER BY status) FROM calls_v1", "quantileExact"),
        ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns DESC) FROM calls_v1", "1 - p"),
        (
            "SELECT percentile_cont(1.5) WITHIN GROUP (ORDER BY duration_ns) FROM calls_v1",
            "percentile_cont(0.5)",
        ),
        ("SELECT stddev_pop(duration_ns) FILTER (WHERE is_llm) FROM calls_v1", "-If combinator"),
    ],
)
def test_what_has_no_translation_is_refused_with_the_clickhouse_spelling(sql: str, remedy: str) -> None:
    with pytest.raises(UnsupportedQuery) as caught:
        plan_query(sql)
    assert caught.value.code == "unsupported_syntax"
    assert caught.value.remedy is not None and remedy in caught.value.remedy
    with pytest.raises(DialectError):
        _rewrite(sql)


def test_private_queries_keep_the_standard_spelling_for_datafusion() -> None:
    plan = plan_query(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY output['score']) FROM calls_v1 "
        "WHERE function_name = 'f'"
    )
    assert plan.final_sql is not None and "PERCENTILE_CONT(0.5) WITHIN GROUP" in plan.final_sql


def _disc(values: list[int], p: float) -> int | None:
    """PostgreSQL's percentile_disc: the first value whose cumulative share reaches p."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(p * len(ordered))) - 1]


@pytest.fixture(scope="module")
def clickhouse(chdb_path: Path, chdb_database: str) -> Any:
    """ClickHouse as Boundary runs it: chdb in this process, on the suite's one engine path."""
    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path.resolve()))
    client.command(f"CREATE DATABASE IF NOT EXISTS {chdb_database}")
    return client


@pytest.mark.parametrize("seed", range(6))
def test_rewritten_queries_answer_what_the_standard_spelling_answers(
    seed: int, clickhouse: Any, chdb_database: str
) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    table = pa.table(
        {
            "x": [None if rng.random() < 0.1 else rng.randint(0, 1000) for _ in range(n)],
            "g": [rng.choice(["a", "b", "c"]) for _ in range(n)],
        }
    )
    ctx = datafusion.SessionContext()
    ctx.register_record_batches("t", [table.to_batches()])
    name = f"{chdb_database}.dialect_{seed}"
    rows = ", ".join(
        f"({'NULL' if x is None else x}, '{g}')"
        for x, g in zip(table["x"].to_pylist(), table["g"].to_pylist(), strict=True)
    )
    clickhouse.command(f"DROP TABLE IF EXISTS {name}")
    clickhouse.command(f"CREATE TABLE {name} (x Nullable(Int64), g String) ENGINE = Memory")
    clickhouse.command(f"INSERT INTO {name} VALUES {rows}")

    def run(standard: str) -> dict[str, Any]:
        rewritten = _rewrite(standard.replace("FROM t", f"FROM {name}"))
        (row,) = clickhouse.query(rewritten).named_results()
        return dict(row)

    for p in (0.0, 0.1, 0.25, 0.5, 0.9, 1.0):
        standard = (
            f"SELECT percentile_cont({p}) WITHIN GROUP (ORDER BY x) AS c, "
            f"count(*) FILTER (WHERE g = 'a') AS k, "
            f"sum(x) FILTER (WHERE g = 'b') AS s, count(x) FILTER (WHERE g = 'c') AS m FROM t"
        )
        expected = ctx.sql(standard).to_pylist()[0]
        answer = run(standard)
        assert answer["k"] == expected["k"] and answer["m"] == expected["m"]
        assert (answer["s"] or 0) == (expected["s"] or 0)  # ClickHouse's sumIf of nothing is 0, standard NULL
        if expected["c"] is None:
            assert answer["c"] is None or math.isnan(answer["c"])
        else:
            assert math.isclose(answer["c"], expected["c"], rel_tol=1e-6)  # DataFusion rounds in float
        disc = run(f"SELECT percentile_disc({p}) WITHIN GROUP (ORDER BY x) AS d FROM t")["d"]
        assert disc == _disc(table["x"].to_pylist(), p)


def test_the_query_api_answers_a_standard_percentile(api: TestClient, user_headers: dict[str, str]) -> None:
    sql = (
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ns) AS p50, "
        "count(*) FILTER (WHERE is_llm) AS llm, count(*) AS n FROM calls_v1"
    )
    result = qo.read_query_bytes(api.post("/v1/query", json={"sql": sql}, headers=user_headers).content)
    assert result.outcome.status == "complete", result.outcome
    (row,) = result.rows
    assert row["n"] > 0 and 0 < row["llm"] <= row["n"] and row["p50"] > 0
