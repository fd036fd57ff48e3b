"""ClickHouse DDL generated from the catalog's public schemas (pure: returns SQL text).

Every fact table is a ReplacingMergeTree whose ORDER BY ends in ``row_id``: a duplicate insert
of the same row collapses to one row under ``FINAL`` (and at merges). The key prefix is the
scope and the generation, then the columns the 13 query classes range over (DESIGN.md
section 6, PLATFORM.md "Query floors"). ``execution_id`` carries a bloom-filter skip index, and
the ``by_execution`` projection orders each row's identity by execution, for one-execution lookups
(Q6, Q8: the guard's key set) and erasure.

Tables with a time column in their sort key are partitioned by its day. Every version of a row
has the same sort key, hence the same day, so FINAL need not merge across days
(``do_not_merge_across_partitions_select_final``); and ClickHouse merges a day whose parts are all
older than ``SETTLE_SECONDS`` into one part, which FINAL then reads as it is, without reading and
merging the sort key of every row (docs/boundary-facts.md, "Layout").
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
# The day partition of each table whose sort key holds a time (ns since the epoch, never null).
PARTITION_TIME: dict[str, str] = {
    "calls_v1": "started_at_ns",
    "threads_v1": "started_at_ns",
    "errors_v1": "occurred_at_ns",
    "health_v1": "ended_at_ns",
}
NS_PER_DAY = 86_400 * 1_000_000_000
# A day is settled (merged into one part by ClickHouse) once its newest part is this old.
SETTLE_SECONDS = 3600
# A batch whose rows span more days than ClickHouse's default limit (100) is still one insert.
MAX_PARTITIONS_PER_INSERT = 100_000
EXECUTION_PROJECTION = "by_execution"
# Columns each fact table's row id is derived from (deterministic_row_id in activities/projection),
# outside its ORDER BY: equal on every version of a row. The guard pushes lookups on them into
# the key set (guard.py); the by_execution projection holds them so it can answer that key set.
IDENTITY_COLUMNS: dict[str, frozenset[str]] = {
    "calls_v1": frozenset({"execution_id", "call_id"}),
    "threads_v1": frozenset({"execution_id", "thread_id"}),
    "call_path_stats_v1": frozenset({"execution_id", "call_path_id"}),
    "errors_v1": frozenset({"execution_id"}),
    "health_v1": frozenset({"execution_id"}),
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

REGISTRY_TABLE = "projection_batch_registry_by_root"
# Earlier registry tables, migrated into REGISTRY_TABLE on start: with the kind their rows hold
# (None: a row is a visible batch, and so both its claim and its mark).
EARLIER_REGISTRY_TABLES: tuple[tuple[str, str | None], ...] = (
    ("projection_batches", None),  # one row per visible batch, before claims
    ("projection_batch_claims", "kind"),  # claims and marks by batch id, 8,192-row granules
    ("projection_batch_registry", "kind"),  # the same by batch id, 256-row granules
)
# The registry is sorted and read by root id, not by batch id. Batch ids are hashes: a flush's
# ids each landed in a granule of their own, so its read grew with the registry (23 -> 97 ms per
# 1,000 ids from 0 to 10 M rows). A root's batches are adjacent under its root id, and a root id
# starts with its process's euid, a UUIDv7: a flush of live processes' executions reads a few
# granules at the registry's end, however long its history. The granule stays small for roots
# that are not time-ordered (each then reads its own granule).
REGISTRY_GRANULE_ROWS = 1024
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
    partition_by: str | None = None

    @property
    def execution_projection(self) -> tuple[str, ...] | None:
        """The by_execution projection's columns: scope, generation, execution_id first (its
        order), then the dedup key and the identity columns a key set reads and filters on."""
        names = {n for n, _ in self.columns}
        if "execution_id" not in names:
            return None
        first = (*_SCOPE_KEY, "execution_id")
        rest = sorted(({*self.order_by} | IDENTITY_COLUMNS.get(self.relation, frozenset())) - {*first})
        return (*first, *rest)


def table_spec(relation: str, version: int = catalog.LATEST_CATALOG_VERSION) -> TableSpec:
    schema = catalog.public_schema(relation, version)
    cols = tuple((f.name, clickhouse_type(f.name, f.type, f.nullable)) for f in schema)
    order = (*_SCOPE_KEY, *SORT_KEYS.get(relation, ()), "row_id")
    time = PARTITION_TIME.get(relation)
    return TableSpec(relation, order, cols, f"intDiv({time}, {NS_PER_DAY})" if time else None)


def q(ident: str) -> str:
    """Backquote an identifier we generated (catalog names, database names checked at config)."""
    return "`" + ident.replace("`", "") + "`"


def create_database(database: str) -> str:
    return f"CREATE DATABASE IF NOT EXISTS {q(database)}"


def create_fact_table(database: str, spec: TableSpec) -> str:
    cols = [f"{q(n)} {t}" for n, t in spec.columns]
    settings = [f"non_replicated_deduplication_window = {DEDUP_WINDOW}"]
    projection = spec.execution_projection
    if projection is not None:
        cols.append("INDEX ix_execution_id execution_id TYPE bloom_filter(0.01) GRANULARITY 1")
        listed = ", ".join(projection)
        order = ", ".join((*_SCOPE_KEY, "execution_id"))
        cols.append(f"PROJECTION {EXECUTION_PROJECTION} (SELECT {listed} ORDER BY {order})")
        # A ReplacingMergeTree merge and an erasure's lightweight delete rebuild the projection
        # (ClickHouse refuses both on a table with projections otherwise).
        settings += [
            "deduplicate_merge_projection_mode = 'rebuild'",
            "lightweight_mutation_projection_mode = 'rebuild'",
        ]
    partition = ""
    if spec.partition_by is not None:
        partition = f" PARTITION BY {spec.partition_by}"
        settings += [
            f"min_age_to_force_merge_seconds = {SETTLE_SECONDS}",
            "min_age_to_force_merge_on_partition_only = 1",
        ]
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{q(spec.relation)} (\n  "
        + ",\n  ".join(cols)
        + f"\n) ENGINE = ReplacingMergeTree{partition} ORDER BY ({', '.join(spec.order_by)})"
        + f" SETTINGS {', '.join(settings)}"
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
    kind and digest collapse; rows of different digests stay, so a conflict stays visible. Reads
    look up every row of a flush's roots (``REGISTRY_GRANULE_ROWS``), so the primary index stops
    at ``root_id``.
    """
    return (
        f"CREATE TABLE IF NOT EXISTS {q(database)}.{REGISTRY_TABLE} (\n"
        "  tenant_id LowCardinality(String), project_id LowCardinality(String),\n"
        "  environment_id LowCardinality(String), generation UInt64, batch_id String,\n"
        "  kind LowCardinality(String), relation LowCardinality(String), catalog_version UInt32,\n"
        "  root_id String, content_digest String, rows UInt64, inserted_at DateTime64(6, 'UTC')\n"
        ") ENGINE = ReplacingMergeTree"
        " ORDER BY (tenant_id, project_id, environment_id, generation, root_id, batch_id, kind,"
        " content_digest, relation)"
        " PRIMARY KEY (tenant_id, project_id, environment_id, generation, root_id)"
        f" SETTINGS index_granularity = {REGISTRY_GRANULE_ROWS}"
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
