"""ClickHouse DDL generated from the catalog's public schemas (pure: returns SQL text).

Every fact table is a ReplacingMergeTree whose ORDER BY ends in ``row_id``: a duplicate insert
of the same row collapses to one row under ``FINAL`` (and at merges). The key prefix is the
scope and the generation, then the columns the 13 query classes range over (DESIGN.md
section 6, PLATFORM.md "Query floors"). ``execution_id`` carries a bloom-filter skip index for
one-execution lookups (Q6) and erasure.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from formats import catalog

SCOPE_COLUMNS: tuple[str, ...] = ("tenant_id", "project_id", "environment_id")
_SCOPE_KEY = (*SCOPE_COLUMNS, "generation")

# Query-class driven sort keys (after scope + generation); row_id always last.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "calls_v1": ("function_name", "started_at_ns"),  # Q2-Q5, Q9, Q11, Q12: function, then time
    "threads_v1": ("started_at_ns",),  # Q1: newest roots in a time range
    "call_path_stats_v1": ("function_name", "execution_id"),  # Q7
    "errors_v1": ("function_name", "occurred_at_ns"),  # Q4, Q13
    "function_definitions_v1": ("program_id", "function_id"),
    "health_v1": ("ended_at_ns",),  # Q13
}
# Relations whose rows belong to one execution (erasure by root id works on these).
EXECUTION_RELATIONS: tuple[str, ...] = tuple(
    r for r in catalog.PUBLIC_RELATIONS if "execution_id" in catalog.public_schema(r).names
)
# Low-cardinality strings: cheaper storage and faster group-by; the Arrow type stays string.
_LOW_CARDINALITY = frozenset(
    {"tenant_id", "project_id", "environment_id", "status", "args_state", "output_state", "error_state"}
    | {"value_state", "index_state", "edge_kind", "error_state"}
)

REGISTRY_TABLE = "projection_batch_claims"
LEGACY_REGISTRY_TABLE = "projection_batches"  # one row per visible batch, before claims (migrated)
# Blocks whose insert_deduplication_token (or data hash) a fact table remembers: a repeated insert
# of the same rows (a retried batch on another replica) is dropped by ClickHouse itself.
DEDUP_WINDOW = 10_000
TOMBSTONE_TABLE = "erased_roots"
ERASURE_LOG_TABLE = "projection_erasures"


def clickhouse_type(name: str, typ: pa.DataType, nullable: bool) -> str:
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        base = "LowCardinality(String)" if name in _LOW_CARDINALITY and not nullable else "String"
    elif pa.types.is_boolean(typ):
        base = "Bool"
    elif pa.types.is_int64(typ):
        base = "Int64"
    elif pa.types.is_uint64(typ):
        base = "UInt64"
    elif pa.types.is_uint32(typ):
        base = "UInt32"
    elif pa.types.is_uint16(typ):
        base = "UInt16"
    elif pa.types.is_float64(typ):
        base = "Float64"
    else:
        raise ValueError(f"column {name}: Arrow type {typ} has no ClickHouse mapping")
    return f"Nullable({base})" if nullable else base


@dataclass(frozen=True)
class TableSpec:
    relation: str
    order_by: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]  # (name, ClickHouse type)


def table_spec(relation: str, version: int = catalog.LATEST_CATALOG_VERSION) -> TableSpec:
    schema = catalog.public_schema(relation, version)
    cols = tuple((f.name, clickhouse_type(f.name, f.type, f.nullable)) for f in schema)
    order = (*_SCOPE_KEY, *SORT_KEYS.get(relation, ()), "row_id")
    return TableSpec(relation, order, cols)


def q(ident: str) -> str:
    """Backquote an identifier we generated (catalog names, database names checked at config)."""
    return "`" + ident.replace("`", "") + "`"


def create_database(database: str) -> str:
    return f"CREATE DATABASE IF NOT EXISTS {q(database)}"


def create_fact_table(database: str, spec: TableSpec) -> str:
    cols = [f"{q(n)} {t}" for n, t in spec.columns]
    if any(n == "execution_id" for n, _ in spec.columns):
        cols.append("INDEX ix_execution_id execution_id TYPE bloom_filter(0.01) GRANULARITY 1")
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{q(spec.relation)} (\n  "
        + ",\n  ".join(cols)
        + f"\n) ENGINE = ReplacingMergeTree ORDER BY ({', '.join(spec.order_by)})"
        + f" SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}"
    )


def dedup_window(database: str, relation: str) -> str:
    """Tables created before the window existed get it on the next start (idempotent)."""
    return (
        f"ALTER TABLE {q(database)}.{q(relation)}"
        f" MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}"
    )


def create_registry(database: str) -> str:
    """Claims and visibility marks of projection batches (``kind`` = ``claim`` | ``visible``).

    Rows are only ever added (erasure deletes a root's rows): a batch's winning digest is decided
    by reading them back, never by a lock (docs/boundary-facts.md, "Replicas"). Rows equal in key,
    kind and digest collapse; rows of different digests stay, so a conflict stays visible.
    """
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{REGISTRY_TABLE} (\n"
        "  tenant_id LowCardinality(String), project_id LowCardinality(String),\n"
        "  environment_id LowCardinality(String), generation UInt64, batch_id String,\n"
        "  kind LowCardinality(String), relation LowCardinality(String), catalog_version UInt32,\n"
        "  root_id String, content_digest String, rows UInt64, inserted_at DateTime64(6, 'UTC')\n"
        ") ENGINE = ReplacingMergeTree"
        " ORDER BY (tenant_id, project_id, environment_id, generation, batch_id, kind, content_digest,"
        " relation)"
    )


def create_tombstones(database: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{TOMBSTONE_TABLE} (\n"
        "  tenant_id LowCardinality(String), project_id LowCardinality(String),\n"
        "  environment_id LowCardinality(String), root_id String, erased_at DateTime64(6, 'UTC')\n"
        ") ENGINE = ReplacingMergeTree ORDER BY (tenant_id, project_id, environment_id, root_id)"
    )


def create_erasure_log(database: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{ERASURE_LOG_TABLE} (\n"
        "  tenant_id LowCardinality(String), idem_key String, request_digest String,\n"
        "  result_json String, created_at DateTime64(6, 'UTC')\n"
        ") ENGINE = ReplacingMergeTree ORDER BY (tenant_id, idem_key)"
    )


def all_ddl(database: str, version: int = catalog.LATEST_CATALOG_VERSION) -> list[str]:
    stmts = [create_database(database)]
    stmts += [create_fact_table(database, table_spec(r, version)) for r in catalog.PUBLIC_RELATIONS]
    stmts += [dedup_window(database, r) for r in catalog.PUBLIC_RELATIONS]
    stmts += [create_registry(database), create_tombstones(database), create_erasure_log(database)]
    return stmts
