"""Arrow batches per relation: deterministic ids, canonical order, content digests, privacy guard.

Public side: :func:`build_batches` turns an :class:`ExecutionProjection` into one
:class:`ProjectionBatch` per public relation (and partition) whose Arrow IPC stream has
exactly ``catalog.public_schema(relation)`` as its schema. Rows are sorted by ``row_id`` so
the same execution always gives byte-identical IPC bytes, and ``content_digest`` is
``sha256:`` + SHA-256 of those bytes.

``batch_id`` = 32 hex of SHA-256 over (``"projection_batch"``, root key, relation,
partition), length-prefixed like :func:`formats.catalog.deterministic_row_id`. The root key
is the execution id, except for ``function_definitions_v1``, whose rows belong to the
engine's program: its key is the program id, so every execution of one engine sends the
same batch and Boundary's digest check collapses them. The generation is not part of the
id: it travels in the header, and a rebuild reuses the ids.

Private side: :func:`private_tables` gives the Lance rows as pyarrow Tables with
deterministic keys (docs/projection.md, "Private layout").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import lru_cache
from operator import itemgetter

import pyarrow as pa

from activities.projection.model import BatchHeader, ExecutionProjection, ProjectionBatch, Row
from formats import catalog
from formats.object_keys import Scope

DEFAULT_MAX_ROWS = 100_000
DIGEST_PREFIX = "sha256:"


class PrivacyViolation(ValueError):
    """A batch bound for Boundary carries a column the catalog does not mark public."""


def batch_id(root_key: str, relation: str, partition: int) -> str:
    return catalog.deterministic_row_id("projection_batch", root_key, relation, partition)


def ipc_stream_bytes(table: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        if isinstance(table, pa.RecordBatch):
            writer.write_batch(table)
        else:
            writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _record_batch(columns: Mapping[str, list[object]], schema: pa.Schema) -> pa.RecordBatch:
    # Typed arrays per column: about twice as fast as pa.table(dict, schema=...).
    return pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in schema], schema=schema)


def content_digest(ipc: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(ipc).hexdigest()


@lru_cache(maxsize=64)
def _public_schema(relation: str, version: int) -> pa.Schema:
    return catalog.public_schema(relation, version)


@lru_cache(maxsize=256)
def _stable_batch(
    relation: str, root_key: str, partition: int, generation: int, version: int, table_key: tuple[tuple, ...]
) -> ProjectionBatch:
    # Rows owned by a program (function_definitions_v1) are the same for every execution of
    # its engine: build their batch once per process.
    schema = _public_schema(relation, version)
    batch = _record_batch({name: list(values) for name, values in table_key}, schema)
    return _make_batch(relation, root_key, partition, generation, version, batch)


def _columns(rows: list[Row], schema: pa.Schema) -> pa.Table:
    batch = _record_batch({name: [r.get(name) for r in rows] for name in schema.names}, schema)
    return pa.Table.from_batches([batch])


def _make_batch(
    relation: str, root_key: str, partition: int, generation: int, version: int, table: pa.RecordBatch
) -> ProjectionBatch:
    _check_schema(relation, version, table.schema)
    ipc = ipc_stream_bytes(table)
    header = BatchHeader(
        batch_id=batch_id(root_key, relation, partition),
        generation=generation,
        catalog_version=version,
        relation=relation,
        root_id=root_key,
        partition=partition,
        content_digest=content_digest(ipc),
        row_count=table.num_rows,
    )
    return ProjectionBatch(header, ipc)


def read_ipc(ipc: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(ipc)).read_all()


def _root_key(projection: ExecutionProjection, relation: str, rows: list[Row]) -> str:
    if relation == "function_definitions_v1":
        programs = {r["program_id"] for r in rows}
        if len(programs) != 1:
            raise ValueError(f"function_definitions_v1 rows span {len(programs)} programs")
        return str(programs.pop())
    return projection.execution_id


def build_batches(
    projection: ExecutionProjection,
    scope: Scope,
    generation: int,
    catalog_version: int = catalog.LATEST_CATALOG_VERSION,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> list[ProjectionBatch]:
    """One batch per public relation with rows (split into partitions of ``max_rows``), in catalog order."""
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    stamp = {
        "tenant_id": scope.tenant_id,
        "project_id": scope.project_id,
        "environment_id": scope.environment_id,
        "generation": generation,
    }
    out: list[ProjectionBatch] = []
    for rel in catalog.relations(catalog_version):
        if rel.storage != "clickhouse":
            continue
        rows = projection.public.get(rel.name) or []
        if not rows:
            continue
        schema = _public_schema(rel.name, catalog_version)
        allowed = set(schema.names)
        ordered = sorted(rows, key=itemgetter("row_id"))
        root_key = _root_key(projection, rel.name, ordered)
        extra = set().union(*map(dict.keys, ordered)) - allowed
        if extra:
            raise PrivacyViolation(f"{rel.name} rows have non-public columns: {sorted(extra)}")
        for partition, start in enumerate(range(0, len(ordered), max_rows)):
            chunk = ordered[start : start + max_rows]
            columns = {name: [r.get(name) for r in chunk] for name in schema.names}
            for name, value in stamp.items():
                columns[name] = [value] * len(chunk)
            if rel.name == "function_definitions_v1":
                key = tuple((name, tuple(values)) for name, values in columns.items())
                out.append(_stable_batch(rel.name, root_key, partition, generation, catalog_version, key))
                continue
            batch = _record_batch(columns, schema)
            out.append(_make_batch(rel.name, root_key, partition, generation, catalog_version, batch))
    return out


def assert_public_only(batch: ProjectionBatch) -> None:
    """Raise :class:`PrivacyViolation` unless the batch's schema is exactly the relation's public schema."""
    relation = batch.header.relation
    try:
        rel = catalog.relation(relation, batch.header.catalog_version)
    except KeyError as exc:
        raise PrivacyViolation(f"unknown relation {relation!r}") from exc
    if rel.storage != "clickhouse":
        raise PrivacyViolation(f"{relation} is a private (Lance) relation and never leaves the data plane")
    try:
        schema = pa.ipc.open_stream(pa.py_buffer(batch.ipc)).schema
    except pa.ArrowInvalid as exc:
        raise PrivacyViolation(f"{relation} batch is not an Arrow IPC stream") from exc
    _check_schema(relation, batch.header.catalog_version, schema)


def _check_schema(relation: str, version: int, schema: pa.Schema) -> None:
    rel = catalog.relation(relation, version)
    visibility = {c.name: c.visibility for c in rel.columns}
    for name in schema.names:
        if visibility.get(name) != "public":
            raise PrivacyViolation(f"{relation} batch carries column {name!r}, which is not public")
    if not schema.equals(_public_schema(relation, version), check_metadata=True):
        raise PrivacyViolation(f"{relation} batch schema differs from the catalog's public schema")


# --- private (Lance) side --------------------------------------------------------------------------

# Private parts of public relations: the key columns, then the catalog's private columns.
_PRIVATE_PART_KEYS: dict[str, tuple[tuple[str, pa.DataType], ...]] = {
    "calls_v1": (("row_id", pa.string()), ("execution_id", pa.string()), ("call_id", pa.string())),
    "errors_v1": (("row_id", pa.string()), ("execution_id", pa.string())),
    "function_definitions_v1": (("row_id", pa.string()), ("program_id", pa.string())),
}
_SORT_KEYS: dict[str, tuple[str, ...]] = {
    "values_v1": ("cid",),
    "source_files_v1": ("program_id", "file_id"),
    "cid_refs_v1": ("cid", "root_id"),
}


def private_schema(dataset: str, version: int = catalog.LATEST_CATALOG_VERSION) -> pa.Schema:
    """Schema of a Lance dataset: a Lance relation's columns, or a public relation's private part."""
    rel = catalog.relation(dataset, version)
    if rel.storage == "lance":
        fields = [pa.field(c.name, c.type, nullable=c.nullable) for c in rel.columns]
    else:
        keys = _PRIVATE_PART_KEYS.get(dataset)
        if keys is None:
            raise KeyError(f"{dataset} has no private part")
        fields = [pa.field(n, t, nullable=False) for n, t in keys]
        fields += [pa.field(c.name, c.type, nullable=True) for c in catalog.private_columns(dataset, version)]
    return pa.schema(fields, metadata={"baml.dataset": dataset, "baml.catalog_version": str(version)})


@lru_cache(maxsize=64)
def _private_schema(dataset: str, version: int) -> pa.Schema:
    return private_schema(dataset, version)


def _sort_key(dataset: str) -> tuple[str, ...]:
    return _SORT_KEYS.get(dataset, ("row_id",))


def private_tables(
    projection: ExecutionProjection, version: int = catalog.LATEST_CATALOG_VERSION
) -> Mapping[str, pa.Table]:
    """Lance rows per dataset, sorted by their deterministic key (empty datasets omitted)."""
    out: dict[str, pa.Table] = {}
    for dataset in sorted(projection.private):
        rows = projection.private[dataset]
        if not rows:
            continue
        keys = _sort_key(dataset)
        ordered = sorted(rows, key=lambda r: tuple(r[k] for k in keys))
        out[dataset] = _columns(ordered, _private_schema(dataset, version))
    return out
