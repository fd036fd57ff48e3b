"""Each pass of plan_query on its own: what it returns for a statement, without the others' work."""

from __future__ import annotations

import pytest
from sqlglot import exp

from api.coordinator.planner import (
    Conjuncts,
    PrivateRef,
    UnsupportedQuery,
    _leaf_filter,
    _relations_in,
    classify,
    final_select,
    final_tree,
    find_private_reads,
    parse_select,
    query_shape,
    resident_select,
    split_conjuncts,
)


def _reads(sql: str):  # type: ignore[no-untyped-def]
    root = parse_select(sql)
    return root, find_private_reads(root, _relations_in(root))


def _passes(sql: str):  # type: ignore[no-untyped-def]
    root, reads = _reads(sql)
    assert reads is not None and isinstance(root, exp.Select)
    final = final_tree(root, reads)
    return reads, final, split_conjuncts(final), query_shape(final)


def test_find_private_reads_is_none_for_a_public_query() -> None:
    assert _reads("SELECT call_id FROM calls_v1 WHERE function_name = 'f'")[1] is None


def test_find_private_reads_names_each_field_once_in_first_use_order() -> None:
    _, reads = _reads(
        "SELECT output['score'], args['a']['b'] FROM calls_v1 "
        "WHERE args['a']['b'] = 1 AND output['score'] > 2"
    )
    assert reads is not None and reads.relation == "calls_v1"
    assert reads.refs == (PrivateRef("output", ("score",), "__p0"), PrivateRef("args", ("a", "b"), "__p1"))
    assert reads.substrings == ()


def test_find_private_reads_turns_whole_value_like_into_a_substring_column() -> None:
    root, reads = _reads("SELECT call_id FROM calls_v1 WHERE output LIKE '%refund%'")
    assert reads is not None and reads.refs == ()
    assert [(s.role, s.needle, s.column) for s in reads.substrings] == [("output", "refund", "__s0")]
    assert "__s0" in root.sql() and "refund" not in root.sql()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c.call_id FROM calls_v1 c JOIN threads_v1 e USING (execution_id) WHERE c.args['a'] = 1",
        "SELECT a FROM (SELECT output['x'] AS a FROM calls_v1)",
        "SELECT output['x'] FROM calls_v1 UNION ALL SELECT output['y'] FROM calls_v1",
    ],
)
def test_find_private_reads_refuses_shapes_a_private_query_cannot_take(sql: str) -> None:
    with pytest.raises(UnsupportedQuery):
        _reads(sql)


def test_final_tree_replaces_references_and_keeps_written_names() -> None:
    _, final, _, _ = _passes("SELECT output['score'], args['a'] AS a FROM calls_v1 ORDER BY a")
    assert final.tree.sql(dialect="clickhouse") == (
        "SELECT __p0 AS \"output['score']\", __p1 AS a FROM calls_v1 ORDER BY a"
    )  # the name in quotes is the result column's name, not a reference
    assert set(final.by_column) == {"__p0", "__p1"} and final.private_aliases == {"a", "output['score']"}


def test_split_conjuncts_by_whether_they_read_private_data() -> None:
    _, _, conds, _ = _passes(
        "SELECT call_id FROM calls_v1 WHERE function_name = 'f' AND (args['a'] = 1 OR status = 'ok') "
        "AND started_at_ns > 5"
    )
    assert [c.sql() for c in conds.public] == ["function_name = 'f'", "started_at_ns > 5"]
    assert [c.sql() for c in conds.private] == ["(__p0 = 1 OR status = 'ok')"]


def test_query_shape_reads_paging_and_whether_the_order_is_private() -> None:
    _, _, _, public_order = _passes(
        "SELECT output['x'] FROM calls_v1 ORDER BY started_at_ns LIMIT 5 OFFSET 2"
    )
    assert (public_order.limit, public_order.offset, public_order.pushable_order) == (5, 2, True)
    _, _, _, private_order = _passes("SELECT output['x'] AS x FROM calls_v1 ORDER BY x LIMIT 5")
    assert private_order.order_private and not private_order.pushable_order
    _, _, _, grouped = _passes("SELECT output['t'] AS t, count() FROM calls_v1 GROUP BY t ORDER BY t")
    assert grouped.aggregate and not grouped.pushable_order


def test_resident_select_carries_public_columns_filters_and_the_right_bound() -> None:
    reads, final, conds, shape = _passes(
        "SELECT call_id, output FROM calls_v1 WHERE function_name = 'f' ORDER BY started_at_ns LIMIT 3"
    )
    resident = resident_select(reads, final, conds, shape, candidate_cap=10)
    assert resident.columns == (
        "call_id",
        "execution_id",
        "function_name",
        "output_cid",
        "output_state",
        "started_at_ns",
    )
    assert "WHERE function_name = 'f' ORDER BY started_at_ns LIMIT 3" in resident.sql
    assert (resident.early_limit, resident.capped) == (3, False)
    # A private conjunct: the early limit stays the executor's, Boundary is capped at cap + 1.
    reads, final, conds, shape = _passes("SELECT call_id FROM calls_v1 WHERE args['a'] = 'x' LIMIT 3")
    resident = resident_select(reads, final, conds, shape, candidate_cap=10)
    assert resident.sql.endswith("LIMIT 11") and "'x'" not in resident.sql
    assert (resident.early_limit, resident.capped) == (3, True)


def test_resident_select_refuses_unknown_columns() -> None:
    reads, final, conds, shape = _passes("SELECT nope, output['x'] FROM calls_v1")
    with pytest.raises(UnsupportedQuery, match="nope"):
        resident_select(reads, final, conds, shape, candidate_cap=10)


def test_final_select_lets_pending_rows_through_and_marks_json_columns() -> None:
    _, final, conds, shape = _passes("SELECT call_id, output FROM calls_v1 WHERE args['a'] = 1")
    rendered = final_select(final, conds, shape)
    assert rendered.where_sql == "(__p1 = 1 OR private_state = 'pending')"
    assert rendered.sql.startswith('SELECT call_id, __p0 AS "output", private_state FROM')
    assert rendered.json_columns == ("output",)
    _, final, conds, shape = _passes("SELECT count() FROM calls_v1 WHERE args['a'] = 1")
    rendered = final_select(final, conds, shape)
    assert rendered.sql == "SELECT COUNT(*) FROM calls_v1 WHERE __p0 = 1"  # aggregates: no pending pass


@pytest.mark.parametrize(
    ("sql", "klass", "narrowed"),
    [
        (
            "SELECT output['t'] AS t, count() FROM calls_v1 WHERE function_name = 'f' GROUP BY t",
            "private_group",
            True,
        ),
        ("SELECT call_id FROM calls_v1 WHERE args['id'] = 'x' LIMIT 5", "private_exact", True),
        ("SELECT call_id FROM calls_v1 WHERE output LIKE '%x%'", "private_substring", False),
        (
            "SELECT call_id FROM calls_v1 WHERE function_name = 'f' ORDER BY output['s'] LIMIT 5",
            "private_order",
            True,
        ),
        ("SELECT call_id FROM calls_v1 WHERE output['s'] > 3 AND started_at_ns > 1", "private_filter", True),
        ("SELECT output FROM calls_v1 WHERE call_id = 'c'", "value_read", True),
        ("SELECT output['s'] FROM calls_v1", "private_projection", False),
    ],
)
def test_classify(sql: str, klass: str, narrowed: bool) -> None:
    _, final, conds, shape = _passes(sql)
    filters = tuple(f for f in (_leaf_filter(c, final.by_column) for c in conds.private) if f is not None)
    kind = classify(final, conds, filters, shape)
    assert (kind.query_class, kind.narrowed) == (klass, narrowed)
    assert bool(kind.reasons) is not narrowed


def test_classify_without_private_conjuncts_or_filters_is_a_projection() -> None:
    _, final, _, shape = _passes("SELECT output['s'] FROM calls_v1 WHERE status = 'ok'")
    kind = classify(final, Conjuncts((), ()), (), shape)
    assert kind.query_class == "private_projection"
