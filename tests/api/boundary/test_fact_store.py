"""The fact store over chdb: DDL from the catalog, sort keys, skip index, duplicate collapse,
budget mapping, and the pure batch checks."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from facts_fixtures import execution_facts

from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchRejected, BatchScope, check_schema, check_scope
from api.boundary.facts.store import (
    GUARDED_MODES,
    Budget,
    BudgetExceeded,
    FactStore,
    QueryFailed,
    _chdb_client,
)
from formats import catalog


@pytest.fixture(scope="module")
def store(chdb_path: Path, chdb_database: str) -> FactStore:
    s = FactStore(_chdb_client(chdb_path), database=chdb_database)
    s.ensure_schema()
    s.ensure_schema()  # idempotent
    return s


def test_ddl_tables_match_catalog_public_schemas(store: FactStore) -> None:
    for rel in catalog.PUBLIC_RELATIONS:
        cols = store.client.query(
            "SELECT name FROM system.columns WHERE database = {d:String} AND table = {t:String} ORDER BY position",  # noqa: E501
            parameters={"d": store.database, "t": rel},
        ).result_rows
        assert [c[0] for c in cols] == catalog.public_schema(rel).names
        assert "args" not in [c[0] for c in cols]


def test_ddl_sort_keys_and_bloom_index(store: FactStore) -> None:
    rows = store.client.query(
        "SELECT name, sorting_key, engine FROM system.tables WHERE database = {d:String}",
        parameters={"d": store.database},
    ).result_rows
    keys = {r[0]: r[1] for r in rows}
    assert keys["calls_v1"] == (
        "tenant_id, project_id, environment_id, generation, function_name, started_at_ns, row_id"
    )
    assert keys["threads_v1"].endswith("generation, started_at_ns, row_id")
    assert {r[2] for r in rows if r[0] in catalog.PUBLIC_RELATIONS} == {"ReplacingMergeTree"}
    idx = store.client.query(
        "SELECT table, type FROM system.data_skipping_indices WHERE database = {d:String}",
        parameters={"d": store.database},
    ).result_rows
    assert {t for t, typ in idx if typ == "bloom_filter"} == set(ddl.EXECUTION_RELATIONS)


def test_duplicate_inserts_collapse_under_final(store: FactStore) -> None:
    rows = execution_facts("tdup", "p", "e", 1, 0)["calls_v1"]
    table = pa.Table.from_pylist(rows, schema=catalog.public_schema("calls_v1"))
    # Two tokens: the tables' deduplication window would drop an identical repeat by its hash.
    for n in range(2):
        store.client.insert_arrow(
            "calls_v1", table, database=store.database, settings={"insert_deduplication_token": f"dup{n}"}
        )
    q = f"SELECT count() FROM {store.database}.calls_v1 {{final}} WHERE tenant_id = 'tdup'"
    assert store.client.query(q.format(final="")).result_rows[0][0] == 6
    assert store.client.query(q.format(final="FINAL")).result_rows[0][0] == 3


def test_time_tables_are_day_partitioned_and_lookups_read_the_execution_projection(store: FactStore) -> None:
    parts = dict(
        store.client.query(
            "SELECT name, partition_key FROM system.tables WHERE database = {d:String}",
            parameters={"d": store.database},
        ).result_rows
    )
    for relation, column in ddl.PARTITION_TIME.items():
        assert parts[relation] == f"intDiv({column}, {ddl.NS_PER_DAY})"
    assert parts["call_path_stats_v1"] == ""  # no time in its sort key
    rows = execution_facts("tproj", "p", "e", 1, 0)["calls_v1"]
    store.client.insert_arrow(
        "calls_v1",
        pa.Table.from_pylist(rows, schema=catalog.public_schema("calls_v1")),
        database=store.database,
    )
    key_set = (
        f"SELECT function_name, started_at_ns, row_id FROM {store.database}.calls_v1"
        " WHERE tenant_id = 'tproj' AND project_id = 'p' AND environment_id = 'e' AND generation = 1"
        f" AND execution_id = '{rows[0]['execution_id']}' AND call_id = '{rows[0]['call_id']}'"
    )
    plan = "\n".join(r[0] for r in store.client.query("EXPLAIN projections = 1 " + key_set).result_rows)
    # The planner weighs it (a table this small reads one mark either way), and its primary key
    # narrows the lookup by execution: it holds every column the key set reads and filters.
    projection = plan.split(f"Name: {ddl.EXECUTION_PROJECTION}", 1)[1]
    assert f"(execution_id in ['{rows[0]['execution_id']}'" in projection
    assert store.client.query(key_set).result_rows == [
        (rows[0]["function_name"], rows[0]["started_at_ns"], rows[0]["row_id"])
    ]


def test_the_embedded_session_holds_the_modes_guarded_queries_run_with(store: FactStore) -> None:
    """Guarded queries on chdb carry only their limits; the session holds the rest."""
    held = store.run_guarded(
        "SELECT name, value FROM system.settings WHERE name IN"
        " ('do_not_merge_across_partitions_select_final', 'result_overflow_mode', 'timeout_overflow_mode')",
        Budget(wall_ms=5000, rows=100, bytes=1 << 20),
    ).to_pylist()
    assert {r["name"]: r["value"] for r in held} == {k: str(v) for k, v in GUARDED_MODES.items()}


def test_final_collapses_versions_in_a_settled_day_and_after_a_late_repeat(store: FactStore) -> None:
    """A settled day (one merged part) is read without merging; a late version of one of its rows
    makes it two parts again, and FINAL still returns each row once."""
    rows = execution_facts("tsettle", "p", "e", 1, 0)["calls_v1"]
    table = pa.Table.from_pylist(rows, schema=catalog.public_schema("calls_v1"))
    days = {r["started_at_ns"] // ddl.NS_PER_DAY for r in rows}
    budget = Budget(wall_ms=5000, rows=100, bytes=1 << 20)
    final = f"SELECT * FROM {store.database}.calls_v1 FINAL WHERE tenant_id = 'tsettle'"
    q = f"SELECT count() AS n FROM ({final})"
    for n in range(2):
        store.client.insert_arrow(
            "calls_v1", table, database=store.database, settings={"insert_deduplication_token": f"settle{n}"}
        )
    for day in days:
        store.client.command(f"OPTIMIZE TABLE {store.database}.calls_v1 PARTITION ID '{day}' FINAL")
    assert store.run_guarded(q, budget)["n"].to_pylist() == [3]
    store.client.insert_arrow(
        "calls_v1", table, database=store.database, settings={"insert_deduplication_token": "settle-late"}
    )
    assert store.run_guarded(q, budget)["n"].to_pylist() == [3]
    raw = f"SELECT count() FROM {store.database}.calls_v1 WHERE tenant_id = 'tsettle'"
    assert store.client.query(raw).result_rows[0][0] == 6  # the late version is a second part


def test_run_guarded_maps_budget_and_failures(store: FactStore) -> None:
    with pytest.raises(BudgetExceeded) as exc:
        store.run_guarded(
            "SELECT number FROM system.numbers LIMIT 1000", Budget(wall_ms=5000, rows=10, bytes=1 << 20)
        )
    assert exc.value.limit == "rows"
    with pytest.raises(QueryFailed) as failed:
        store.run_guarded("SELECT toInt64('x') + 'y'", Budget(wall_ms=5000, rows=10, bytes=1 << 20))
    assert failed.value.name.isupper() and "'" not in failed.value.name
    # The budget settings do not leak into later calls on the shared chdb session.
    assert (
        store.run_guarded("SELECT number FROM system.numbers LIMIT 50", Budget(5000, 100, 1 << 20)).num_rows
        == 50
    )


def test_check_schema_and_scope_pure() -> None:
    rel = catalog.relation("threads_v1")
    rows = execution_facts("t", "p", "e", 1, 0)["threads_v1"]
    table = pa.Table.from_pylist(rows, schema=catalog.public_schema("threads_v1"))
    shuffled = table.select(list(reversed(table.column_names)))
    assert check_schema(shuffled, rel, 1).schema.names == table.schema.names  # reordered to catalog order
    check_scope(table, BatchScope("t", "p", "e", 1), rel, rows[0]["execution_id"])
    with pytest.raises(BatchRejected) as exc:
        check_scope(table, BatchScope("t", "p", "other", 1), rel, rows[0]["execution_id"])
    assert exc.value.code == "scope_mismatch" and exc.value.status == 403
    nulls = table.set_column(table.schema.get_field_index("status"), "status", pa.array([None], pa.string()))
    with pytest.raises(BatchRejected) as exc:
        check_schema(nulls, rel, 1)
    assert exc.value.code == "null_in_required_column"
