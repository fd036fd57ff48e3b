"""The guard's identity lookups: which WHERE conjuncts reach a relation's key set (rendering), and
that deduplication still returns the newest version of a row (chdb)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot
from facts_fixtures import execution_facts
from sqlglot import exp

from api.boundary.facts.batch_check import BatchScope
from api.boundary.facts.guard import MAX_LOOKUP_VALUES, Scope, guard_sql
from api.boundary.facts.store import Budget, FactStore, _chdb_client
from formats import catalog

SCOPE = Scope("tk", "p", "e", 1)
_SCOPE_COLUMNS = {"tenant_id", "project_id", "environment_id", "generation"}


def key_sets(sql: str, database: str = "db", tenant: str = "tk") -> dict[str, set[str]]:
    """Per aliased relation: the columns its key set filters on (beyond the scope), if it has one."""
    out: dict[str, set[str]] = {}
    for sub in sqlglot.parse_one(sql, read="clickhouse").find_all(exp.Subquery):
        inner = sub.this
        if not sub.alias or not isinstance(inner, exp.Select) or inner.find(exp.Final) is None:
            continue
        for keys in inner.args["where"].find_all(exp.Select):
            table = keys.args["from_"].this
            assert isinstance(table, exp.Table) and table.text("db") == database
            where = keys.args["where"]
            assert f"tenant_id = '{tenant}'" in where.sql() and "generation = 1" in where.sql()
            out[sub.alias] = {c.name for c in where.find_all(exp.Column)} - _SCOPE_COLUMNS
    return out


def guard(sql: str) -> str:
    return guard_sql(sql, SCOPE, database="db")


def test_identity_lookup_pushes_identity_conjuncts_only() -> None:
    sql = guard(
        "SELECT args_cid FROM calls_v1 WHERE execution_id = 'x' AND call_id = 'c' AND status = 'failed'"
        " AND started_at_ns > 5"
    )
    assert key_sets(sql) == {"calls_v1": {"execution_id", "call_id", "started_at_ns"}}
    # The caller's whole WHERE still applies to the deduplicated rows.
    outer = sqlglot.parse_one(sql, read="clickhouse").args["where"].sql()
    assert "calls_v1.status = 'failed'" in outer and "calls_v1.call_id = 'c'" in outer
    # One execution (Q6) and an IN list of ids are lookups too.
    assert key_sets(guard("SELECT call_id FROM calls_v1 WHERE execution_id = 'x'")) == {
        "calls_v1": {"execution_id"}
    }
    assert key_sets(guard("SELECT status FROM threads_v1 WHERE execution_id IN ('x', 'y')")) == {
        "threads_v1": {"execution_id"}
    }


@pytest.mark.parametrize(
    "where",
    [
        "status = 'failed'",  # mutable column
        "function_name = 'Classify' AND started_at_ns > 5",  # key columns: the primary index serves them
        "execution_id = 'x' OR status = 'failed'",  # an OR branch on a mutable column
        "execution_id = 'x' OR started_at_ns > 5",  # one OR branch is no lookup
        "execution_id != 'x'",
        "execution_id LIKE 'x%'",
        "call_id = 'c0' AND thread_id = 't0'",  # identities, but they repeat across executions
        "execution_id IN (SELECT execution_id FROM threads_v1 WHERE status = 'failed')",
        "execution_id IN (" + ", ".join(f"'{i}'" for i in range(MAX_LOOKUP_VALUES + 1)) + ")",
    ],
)
def test_no_key_set_without_an_identity_lookup(where: str) -> None:
    assert key_sets(guard(f"SELECT call_id FROM calls_v1 WHERE {where}")) == {}


def test_or_of_lookups_is_pushed_whole() -> None:
    sql = guard(
        "SELECT call_id FROM calls_v1 WHERE (execution_id = 'x' AND call_id = 'c')"
        " OR (execution_id = 'y' AND call_id IN ('d', 'e'))"
    )
    assert key_sets(sql) == {"calls_v1": {"execution_id", "call_id"}}


def test_select_alias_is_not_taken_for_the_column() -> None:
    # ClickHouse resolves WHERE execution_id to the SELECT alias, i.e. to status: not an identity.
    assert key_sets(guard("SELECT status AS execution_id FROM calls_v1 WHERE execution_id = 'x'")) == {}


def test_joins_push_only_into_relations_whose_rows_are_kept() -> None:
    where = "WHERE t.execution_id = 'x' AND c.execution_id = 'x'"
    on = "ON c.execution_id = t.execution_id"
    assert key_sets(guard(f"SELECT c.call_id FROM calls_v1 c JOIN threads_v1 t {on} {where}")) == {
        "c": {"execution_id"},
        "t": {"execution_id"},
    }
    # The right side of a LEFT join is null-extended: a filter there must stay above the join.
    assert key_sets(guard(f"SELECT c.call_id FROM calls_v1 c LEFT JOIN threads_v1 t {on} {where}")) == {
        "c": {"execution_id"}
    }
    assert key_sets(guard(f"SELECT c.call_id FROM calls_v1 c RIGHT JOIN threads_v1 t {on} {where}")) == {}
    assert key_sets(guard(f"SELECT c.call_id FROM calls_v1 c FULL JOIN threads_v1 t {on} {where}")) == {}
    # A conjunct that reads two relations belongs to neither.
    assert (
        key_sets(
            guard(f"SELECT c.call_id FROM calls_v1 c JOIN threads_v1 t {on} WHERE c.call_id = t.thread_id")
        )
        == {}
    )


@pytest.mark.parametrize("join", ["LEFT SEMI JOIN", "LEFT ANTI JOIN", "SEMI JOIN", "ANTI JOIN"])
def test_semi_and_anti_joined_relations_are_scoped(join: str) -> None:
    # A SEMI/ANTI joined relation selects no column, yet it is read: it gets the scope like any other.
    sql = guard(f"SELECT c.call_id FROM calls_v1 c {join} threads_v1 t ON c.execution_id = t.execution_id")
    scoped = {
        sub.alias
        for sub in sqlglot.parse_one(sql, read="clickhouse").find_all(exp.Subquery)
        if isinstance(sub.this, exp.Select) and "tenant_id = 'tk'" in sub.this.args["where"].sql()
    }
    assert scoped == {"c", "t"}


def test_subqueries_and_unions_push_per_level() -> None:
    sql = guard(
        "SELECT call_id FROM calls_v1 WHERE execution_id IN"
        " (SELECT execution_id FROM errors_v1 WHERE execution_id = 'z')"
        " UNION ALL SELECT thread_id AS call_id FROM threads_v1 WHERE thread_id = 't0' AND execution_id = 'z'"
    )
    assert key_sets(sql) == {"errors_v1": {"execution_id"}, "threads_v1": {"thread_id", "execution_id"}}


# --- chdb: the newest version wins ---------------------------------------------------------------


@pytest.fixture(scope="module")
def store(chdb_path: Path, chdb_database: str) -> FactStore:
    s = FactStore(_chdb_client(chdb_path), database=chdb_database)
    s.ensure_schema()
    return s


def _insert(store: FactStore, rows: list[dict[str, object]]) -> None:
    # One insert per version: separate parts, merged only by FINAL (the last insert wins).
    table = pa.Table.from_pylist(rows, schema=catalog.public_schema("calls_v1"))
    store.client.insert_arrow("calls_v1", table, database=store.database)


def test_lookup_sees_only_the_newest_version(store: FactStore) -> None:
    scope = Scope("tver", "p", "e", 1)
    old = execution_facts(scope.tenant_id, "p", "e", 1, 0)["calls_v1"]
    ex = str(old[0]["execution_id"])
    new = [
        {**r, "status": "failed", "output_state": "lost:erased"} if r["call_id"] == "c1" else r for r in old
    ]
    # The same row id and sort key with another execution id: FINAL keeps it, so must the lookup.
    moved = [{**r, "execution_id": "moved"} if r["call_id"] == "c2" else r for r in new]
    store.client.command(f"SYSTEM STOP MERGES {store.database}.calls_v1")  # keep both versions apart
    _insert(store, old)
    _insert(store, moved)
    unmerged = f"SELECT count() FROM {store.database}.calls_v1 WHERE tenant_id = 'tver'"
    assert store.client.query(unmerged).result_rows[0][0] == 6

    def run(where: str) -> list[dict[str, object]]:
        sql = guard_sql(
            f"SELECT call_id, status, output_state FROM calls_v1 WHERE {where} ORDER BY call_id",
            scope,
            database=store.database,
        )
        assert key_sets(sql, store.database, scope.tenant_id)  # the path under test
        return store.run_guarded(sql, Budget(wall_ms=10_000, rows=100, bytes=1 << 20)).to_pylist()

    assert run(f"execution_id = '{ex}' AND call_id = 'c1'") == [
        {"call_id": "c1", "status": "failed", "output_state": "lost:erased"}
    ]
    assert run(f"execution_id = '{ex}' AND call_id = 'c1' AND status = 'succeeded'") == []
    assert run(f"execution_id = '{ex}' AND call_id = 'c1' AND output_state = 'available'") == []
    assert [r["call_id"] for r in run(f"execution_id = '{ex}'")] == ["c0", "c1"]
    assert run(f"execution_id = '{ex}' AND call_id = 'c2'") == []
    assert [r["call_id"] for r in run("execution_id = 'moved'")] == ["c2"]
    # The key set (three keys here) is no result: it does not count against the row budget.
    counted = guard_sql(
        f"SELECT count() AS n FROM calls_v1 WHERE execution_id = '{ex}'", scope, database=store.database
    )
    assert store.run_guarded(counted, Budget(wall_ms=10_000, rows=1, bytes=1 << 20)).to_pylist() == [{"n": 2}]
    # An erased execution stays invisible to the lookup (the DELETE mutation needs merges on).
    store.client.command(f"SYSTEM START MERGES {store.database}.calls_v1")
    store.erase(BatchScope(scope.tenant_id, "p", "e", 1), [ex])
    assert run(f"execution_id = '{ex}'") == []
