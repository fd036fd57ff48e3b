"""A registry written before its layout changed (``projection_batch_registry``, sorted by batch id)
moves into today's table on start: its batches replay and conflict as before, and only today's
table, sorted and read by root id, is left."""

from __future__ import annotations

from pathlib import Path

import clickhouse_connect
import pyarrow as pa
from facts_fixtures import batch_id_for, execution_facts, make_batch

from api.boundary.facts import ddl
from api.boundary.facts.batch_check import BatchRejected, BatchScope
from api.boundary.facts.store import BatchIdentity, BatchState, FactStore


def _item(idx: int, rows: int) -> tuple[BatchIdentity, BatchScope, pa.Table]:
    facts = execution_facts("mig", "p", "e", 1, idx)["calls_v1"][:rows]
    root = facts[0]["execution_id"]
    body, hdr = make_batch("calls_v1", facts, "e", 1, root)
    table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    bid = batch_id_for("calls_v1", root)
    return BatchIdentity(bid, "calls_v1", 1, root, hdr.content_digest), BatchScope("mig", "p", "e", 1), table


def _tables(store: FactStore) -> dict[str, str]:
    rows = store.client.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = {d:String}",
        parameters={"d": store.database},
    ).result_rows
    return {str(name): str(sql) for name, sql in rows}


def test_an_earlier_registry_moves_into_todays_layout_and_keeps_deciding(
    chdb_path: Path, chdb_database: str
) -> None:
    client = clickhouse_connect.get_client(interface="chdb", path=str(chdb_path.resolve()))
    store = FactStore(client, database=chdb_database)
    store.ensure_schema()
    earlier, _ = ddl.EARLIER_REGISTRY_TABLES[-1]
    # The state an earlier deployment left: its batch's claim and mark in the earlier table only.
    ident, scope, table = _item(1, rows=3)
    assert isinstance(store.ingest_many([(ident, scope, table)])[0], BatchState)
    client.command(f"RENAME TABLE {chdb_database}.{ddl.REGISTRY_TABLE} TO {chdb_database}.{earlier}")

    store.ensure_schema()

    tables = _tables(store)
    assert earlier not in tables
    layout = tables[ddl.REGISTRY_TABLE]
    assert f"index_granularity = {ddl.REGISTRY_GRANULE_ROWS}" in layout
    assert "PRIMARY KEY (tenant_id, project_id, environment_id, generation, root_id)" in layout
    state = store.registered_batch(scope, ident.root_id, ident.batch_id)
    assert state is not None and (state.content_digest, state.rows) == (ident.content_digest, 3)
    replay = store.ingest_many([(ident, scope, table)])[0]
    assert isinstance(replay, BatchState) and replay.replayed
    other_ident, _, other_table = _item(1, rows=2)  # the same batch id, another digest
    assert other_ident.batch_id == ident.batch_id and other_ident.content_digest != ident.content_digest
    conflict = store.ingest_many([(other_ident, scope, other_table)])[0]
    assert isinstance(conflict, BatchRejected) and conflict.code == "batch_digest_conflict"
