"""The pure planner: splitting, no private literal in resident SQL, classification, rejections."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from api.coordinator.planner import (
    LeafFilter,
    LeafPrune,
    PlanError,
    StatementNotAllowed,
    UnknownRelation,
    UnsupportedQuery,
    plan_query,
)
from api.coordinator.query_classes import PRIVATE_CLASSES, PUBLIC_CLASSES, ClassParams, class_sql

PARAMS = ClassParams(
    now_ns=1_800_000_000_000_000_000,
    window_start_ns=1_799_000_000_000_000_000,
    window_end_ns=1_800_000_000_000_000_001,
    root_function="invoices.ProcessInvoice",
    llm_function="support.llm.ClassifyTicket",
    execution_id="ab" * 32,
    call_id="baml_call_1_x",
    invoice_id="INV-1042",
    needle="返金",
)
SQL = class_sql(PARAMS)


def test_q9_resident_sql_carries_no_private_literal_or_column() -> None:
    plan = plan_query(SQL["Q9"])
    assert plan.query_class == "private_exact"
    assert "INV-1042" not in plan.resident_sql
    assert "['invoice']" not in plan.resident_sql and "args[" not in plan.resident_sql
    tree = sqlglot.parse_one(plan.resident_sql, read="clickhouse")
    assert {c.name for c in tree.find_all(exp.Column)} <= {
        "args_state", "call_id", "execution_id", "function_name", "started_at_ns"
    }  # fmt: skip
    assert "invoices.ProcessInvoice" in plan.resident_sql  # public filters do go to Boundary
    assert plan.leaf_filters == (LeafFilter("args", "invoice.id", "eq", "INV-1042"),)
    # The private conjunct stays in the coordinator's final SQL, and pending rows pass it.
    assert plan.final_sql is not None and "'INV-1042'" in plan.final_sql
    assert "private_state = 'pending'" in plan.final_sql


@pytest.mark.parametrize("name", PRIVATE_CLASSES)
def test_no_private_literal_reaches_boundary(name: str) -> None:
    plan = plan_query(SQL[name])
    for secret in ("INV-1042", "返金", "score", "tier", "args[", "output[", "error,"):
        assert secret not in plan.resident_sql
    assert plan.private and plan.interactive


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_public_classes_go_to_boundary_whole(name: str) -> None:
    plan = plan_query(SQL[name])
    assert plan.query_class == "public" and not plan.private and plan.final_sql is None


@pytest.mark.parametrize(
    ("name", "klass"),
    [("Q8", "value_read"), ("Q9", "private_exact"), ("Q10", "private_substring"),
     ("Q11", "private_order"), ("Q12", "private_group")],
)  # fmt: skip
def test_classification(name: str, klass: str) -> None:
    assert plan_query(SQL[name]).query_class == klass


def test_substring_search_stops_early_in_public_order() -> None:
    plan = plan_query(SQL["Q10"])
    assert plan.early_limit == 50
    assert "ORDER BY started_at_ns DESC" in plan.resident_sql
    assert plan.leaf_filters == (LeafFilter("output", None, "contains", "返金"),)


def test_private_order_reads_every_candidate_under_a_cap() -> None:
    plan = plan_query(SQL["Q11"], candidate_cap=1000)
    assert plan.early_limit is None and plan.resident_capped
    assert plan.resident_sql.endswith("LIMIT 1001")


def test_unbounded_private_query_is_not_interactive() -> None:
    plan = plan_query("SELECT call_id FROM calls_v1 WHERE output LIKE '%refund%'")
    assert not plan.interactive and plan.reasons


def test_subscripts_build_leaf_paths() -> None:
    plan = plan_query(
        "SELECT output['items'][1]['sku'] AS sku, args['odd key'] FROM calls_v1 WHERE call_id = 'c'"
    )
    assert {r.path_text for r in plan.refs} == {"items[0].sku", '["odd key"]'}
    assert plan.query_class == "value_read"


@pytest.mark.parametrize(
    ("sql", "error", "code"),
    [
        ("DROP TABLE calls_v1", StatementNotAllowed, "statement_not_allowed"),
        ("INSERT INTO calls_v1 (call_id) VALUES ('x')", StatementNotAllowed, "statement_not_allowed"),
        ("ALTER TABLE calls_v1 DELETE WHERE 1", StatementNotAllowed, "statement_not_allowed"),
        ("SET max_threads = 1", StatementNotAllowed, "statement_not_allowed"),
        ("SELECT 1; SELECT 2", StatementNotAllowed, "statement_not_allowed"),
        ("SELECT * FROM system.tables", UnknownRelation, "unknown_relation"),
        ("SELECT * FROM url('http://x', CSV)", UnknownRelation, "unknown_relation"),
        ("SELECT * FROM nowhere", UnknownRelation, "unknown_relation"),
        ("SELECT body FROM values_v1", UnknownRelation, "unknown_relation"),
        ("SELECT source_span FROM errors_v1", UnsupportedQuery, "unsupported_query"),
        ("SELECT args FROM calls_v1 c JOIN threads_v1 t ON c.execution_id = t.execution_id", UnsupportedQuery,
         "unsupported_query"),
        ("SELECT args FROM calls_v1 UNION ALL SELECT output FROM calls_v1", UnsupportedQuery,
         "unsupported_query"),
        ("SELECT args[x] FROM calls_v1", UnsupportedQuery, "unsupported_query"),
        ("SELECT (", PlanError, "sql_syntax"),
        ("SELECT output['items'][0] FROM calls_v1", UnsupportedQuery, "unsupported_query"),
        ("", PlanError, "query_invalid"),
    ],
)  # fmt: skip
def test_rejections(sql: str, error: type[PlanError], code: str) -> None:
    with pytest.raises(error) as info:
        plan_query(sql)
    assert info.value.code == code
    assert "x'" not in info.value.message or "url" in sql  # messages name constructs, not values


def test_public_conjuncts_become_a_leaf_prune_filter() -> None:
    plan = plan_query(SQL["Q11"])
    assert plan.leaf_prune is not None
    assert plan.leaf_prune.sql().startswith(
        "function_name = 'support.llm.ClassifyTicket' AND started_at_ns >= "
    )
    assert "started_at_ns < " in plan.leaf_prune.sql()
    quoted = plan_query(
        "SELECT output['score'] AS s FROM calls_v1 WHERE function_name IN ('a''b', 'c') "
        "AND status = 'failed' AND call_id != 'x' ORDER BY s LIMIT 3"
    )
    assert quoted.leaf_prune is not None
    assert quoted.leaf_prune.sql() == "function_name IN ('a''b', 'c') AND status = 'failed'"
    # Without a function or a time bound the scan would not be narrow: no prune.
    assert plan_query("SELECT output['s'] FROM calls_v1 WHERE call_id = 'c'").leaf_prune is None


def test_a_leaf_prune_can_keep_its_window_from_the_zone_map() -> None:
    plan = plan_query(
        "SELECT output['s'] AS s FROM calls_v1 WHERE function_name = 'f' "
        "AND started_at_ns BETWEEN 10 AND 20 AND started_at_ns > 5 ORDER BY s LIMIT 3"
    )
    assert plan.leaf_prune is not None
    assert plan.leaf_prune.sql() == (
        "function_name = 'f' AND started_at_ns >= 10 AND started_at_ns <= 20 AND started_at_ns > 5"
    )
    assert plan.leaf_prune.sql(zone_map=False) == (
        "function_name = 'f' AND started_at_ns + 0 >= 10 AND started_at_ns + 0 <= 20"
        " AND started_at_ns + 0 > 5"
    )
    assert plan.leaf_prune.window() == (10, 20)


@pytest.mark.parametrize(
    ("where", "window"),
    [
        ("started_at_ns > 5 AND started_at_ns < 9", (6, 8)),
        ("started_at_ns >= 5", (5, None)),
        ("started_at_ns <= 5", (None, 5)),
        ("started_at_ns = 7", (7, 7)),
        ("started_at_ns IN (9, 3, 4)", (3, 9)),
        ("started_at_ns IN (9, 3) AND started_at_ns > 3", (4, 9)),
    ],
)
def test_a_leaf_prune_knows_its_window(where: str, window: tuple[int | None, int | None]) -> None:
    plan = plan_query(f"SELECT output['s'] AS s FROM calls_v1 WHERE function_name = 'f' AND {where}")
    assert plan.leaf_prune is not None
    assert plan.leaf_prune.window() == window
    assert LeafPrune((("function_name", "=", ("f",)),)).window() == (None, None)


def test_whole_value_substring_becomes_a_string_leaf_column() -> None:
    plan = plan_query(SQL["Q10"])
    assert plan.refs == () and plan.private and plan.roles == ("output",)
    assert [(s.role, s.needle, s.column) for s in plan.substrings] == [("output", "返金", "__s0")]
    assert plan.final_sql is not None and "__s0 OR private_state = 'pending'" in plan.final_sql
    assert "返金" not in plan.resident_sql and "output_state" in plan.resident_sql


def test_typed_sql_makes_literals_exact_for_exact_columns_only() -> None:
    from api.coordinator.planner import typed_sql

    plan = plan_query(
        "SELECT call_id FROM calls_v1 WHERE function_name = 'f' AND output['n'] > 1180591620717411303425"
        " AND output['n'] < 9223372036854775807.5 AND output['n'] <> 7 AND output['n'] IN (1.5, 2e3)"
    )
    assert plan.final_sql is not None
    exact = typed_sql(plan.final_sql, {"__p0"})
    assert "CAST('1180591620717411303425' AS DECIMAL(22, 0))" in exact
    assert "CAST('9223372036854775807.5' AS DECIMAL(20, 1))" in exact
    assert "CAST('1.5' AS DECIMAL(2, 1))" in exact
    assert "__p0 <> 7" in exact and "2e3" in exact.lower()  # int64 and exponent literals stay
    assert typed_sql(plan.final_sql, set()) == plan.final_sql  # float columns: double literals


def test_an_integral_decimal_literal_looks_up_the_integer_key() -> None:
    plan = plan_query(
        "SELECT call_id FROM calls_v1 WHERE function_name = 'f' AND output['n'] = 9223372036854775807.0"
    )
    (eq,) = [f for f in plan.leaf_filters if f.op == "eq"]
    assert eq.value == 9223372036854775807 and isinstance(eq.value, int)
