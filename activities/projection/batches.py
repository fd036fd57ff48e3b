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

The sweep's batches for an execution it closes as ``abandoned`` add ``"abandoned"`` to the id:
if the stream was not dead after all and the RootEnded arrives, its projection sends the
ordinary ids (no digest conflict with the sweep's) and its rows, which share the sweep's row
ids, replace them (ReplacingMergeTree keeps the newest insert; Lance merges on row_id): the
RootEnded wins.

Private side: :func:`private_tables` gives the Lance rows as pyarrow Tables with
deterministic keys (docs/projection.md, "Private layout").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from activities.projection.model import BatchHeader, ExecutionProjection, ProjectionBatch, Row
from activities.projection.private_rows import LeafRows
from formats import catalog
from formats.lance_schemas import private_schema
from formats.object_keys import Scope

DEFAULT_MAX_ROWS = 100_000
# Columns every public batch gets from its scope and generation, not from the rows.
_STAMP_NAMES = frozenset({"tenant_id", "project_id", "environment_id", "generation"})
DIGEST_PREFIX = "sha256:"


class PrivacyViolation(ValueError):
    """A batch bound for Boundary carries a column the catalog does not mark public."""


def batch_id(root_key: str, relation: str, partition: int, *, abandoned: bool = False) -> str:
    if abandoned:
        return catalog.deterministic_row_id("projection_batch", root_key, relation, partition, "abandoned")
    return catalog.deterministic_row_id("projection_batch", root_key, relation, partition)


def ipc_stream_bytes(table: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        if isinstance(table, pa.RecordBatch):
            writer.write_batch(table)
        else:
            writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


_IPC_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # the stream's end-of-stream marker


@lru_cache(maxsize=64)
def _schema_message(relation: str, version: int) -> bytes:
    """The IPC stream's schema message of a public relation: what a one-batch stream has before its batch."""
    empty = ipc_stream_bytes(pa.Table.from_batches([], schema=_public_schema(relation, version)))
    assert empty.endswith(_IPC_END)
    return empty[: -len(_IPC_END)]


def _batch_stream_bytes(relation: str, version: int, batch: pa.RecordBatch) -> bytes:
    """:func:`ipc_stream_bytes` of one batch of a public relation without a stream writer per batch.

    A one-batch stream is the schema message, the batch message and the end marker; the schema
    message is the same for every batch of a relation. Equal bytes (tests/projection/test_batch_identity.py).
    """
    return _schema_message(relation, version) + batch.serialize().to_pybytes() + _IPC_END


_Stamp = tuple[tuple[str, object], ...]


@lru_cache(maxsize=256)
def _row_layout(
    schema: pa.Schema, stamp_names: tuple[str, ...]
) -> tuple[tuple[str, ...], pa.StructType, tuple[int, ...]]:
    """Columns the rows carry; a struct type of them then the stamp; each schema column's place in it."""
    own = tuple(n for n in schema.names if n not in stamp_names)
    order = own + stamp_names
    struct = pa.struct([schema.field(n).with_nullable(True) for n in order])
    return own, struct, tuple(order.index(n) for n in schema.names)


def _rows_batch(rows: Sequence[Row], schema: pa.Schema, stamp: _Stamp = ()) -> pa.RecordBatch:
    """Rows (dicts; a missing column is null) plus per-batch constant columns as one RecordBatch.

    One struct-array conversion of row tuples, then its children as the columns: about half
    the cost of one typed pa.array per column, and the same arrays (so the same IPC bytes).
    """
    stamp_names = tuple(name for name, _ in stamp)
    own, struct, positions = _row_layout(schema, stamp_names)
    tail = tuple(value for _, value in stamp)
    data: list[tuple[object, ...]]
    try:
        if len(own) == 1:
            data = [(r[own[0]], *tail) for r in rows]
        elif tail:
            get = itemgetter(*own)
            data = [get(r) + tail for r in rows]
        else:
            data = list(map(itemgetter(*own), rows))
    except KeyError:
        data = [tuple(r.get(n) for n in own) + tail for r in rows]
    children = pa.array(data, struct).flatten()
    return pa.RecordBatch.from_arrays([children[i] for i in positions], schema=schema)


def content_digest(ipc: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(ipc).hexdigest()


@lru_cache(maxsize=64)
def _public_schema(relation: str, version: int) -> pa.Schema:
    return catalog.public_schema(relation, version)


@lru_cache(maxsize=256)
def _stable_batch(
    relation: str,
    root_key: str,
    partition: int,
    generation: int,
    version: int,
    stamp: _Stamp,
    names: tuple[str, ...],
    rows_key: tuple[tuple[object, ...], ...],
) -> ProjectionBatch:
    # Rows owned by a program (function_definitions_v1) are the same for every execution of
    # its engine: build their batch once per process.
    schema = _public_schema(relation, version)
    rows = [dict(zip(names, values, strict=True)) for values in rows_key]
    batch = _rows_batch(rows, schema, stamp)
    return _make_batch(relation, root_key, partition, generation, version, batch)


def _columns(rows: Sequence[Row], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches([_rows_batch(rows, schema)])


def _make_batch(
    relation: str,
    root_key: str,
    partition: int,
    generation: int,
    version: int,
    table: pa.RecordBatch,
    abandoned: bool = False,
) -> ProjectionBatch:
    _check_schema(relation, version, table.schema)
    ipc = _batch_stream_bytes(relation, version, table)
    header = BatchHeader(
        batch_id=batch_id(root_key, relation, partition, abandoned=abandoned),
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


def _scope_stamp(scope: Scope, generation: int, max_rows: int) -> _Stamp:
    """The scope columns every public row carries (the arguments checked once, for both builders)."""
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    return (
        ("tenant_id", scope.tenant_id),
        ("project_id", scope.project_id),
        ("environment_id", scope.environment_id),
        ("generation", generation),
    )


def build_batches(
    projection: ExecutionProjection,
    scope: Scope,
    generation: int,
    catalog_version: int = catalog.LATEST_CATALOG_VERSION,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> list[ProjectionBatch]:
    """One batch per public relation with rows (split into partitions of ``max_rows``), in catalog order."""
    stamp = _scope_stamp(scope, generation, max_rows)
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
            if rel.name == "function_definitions_v1":
                names = tuple(n for n in schema.names if n not in _STAMP_NAMES)
                key = tuple(tuple(r.get(n) for n in names) for r in chunk)
                out.append(
                    _stable_batch(
                        rel.name, root_key, partition, generation, catalog_version, stamp, names, key
                    )
                )
                continue
            batch = _rows_batch(chunk, schema, stamp)
            out.append(
                _make_batch(
                    rel.name, root_key, partition, generation, catalog_version, batch, projection.swept
                )
            )
    return out


def _compact(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A slice with buffers of its own, so its IPC bytes equal those of the same rows built alone.

    The IPC writer does not write a sliced column as a fresh one: string values, bitmaps at an
    offset that is not a multiple of 8, and even fixed-width values of short slices come out with
    other buffer sizes. A one-batch concatenation copies every column compactly, as a fresh
    conversion lays it out (tests/projection/test_batch_identity.py), in one call: four times
    cheaper than concatenating column by column."""
    return pa.concat_batches([batch])


def build_batch_set(
    projections: Sequence[ExecutionProjection],
    scope: Scope,
    generation: int,
    catalog_version: int = catalog.LATEST_CATALOG_VERSION,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> list[ProjectionBatch]:
    """Every public batch of a meta object's executions: :func:`build_batches` of each, in order,
    a batch equal to an earlier one (one program's function_definitions_v1) given once.

    The same batches (ids, digests, IPC bytes) as the per-execution path, built with one Arrow
    conversion per relation for all the executions, then sliced per execution and partition:
    the per-call cost of a conversion, and the schema checks, are paid once per relation.
    """
    stamp = _scope_stamp(scope, generation, max_rows)
    # per execution: its batches by relation, so the output keeps build_batches' order
    per: list[dict[str, list[ProjectionBatch]]] = [{} for _ in projections]
    for rel in catalog.relations(catalog_version):
        if rel.storage != "clickhouse":
            continue
        schema = _public_schema(rel.name, catalog_version)
        allowed = set(schema.names)
        if rel.name == "function_definitions_v1":
            for i, projection in enumerate(projections):
                rows = projection.public.get(rel.name)
                if rows:
                    per[i][rel.name] = build_batches(
                        _only(projection, rel.name), scope, generation, catalog_version, max_rows=max_rows
                    )
            continue
        ordered: list[Row] = []
        spans: list[tuple[int, int, int]] = []  # (execution index, first row, row count)
        for i, projection in enumerate(projections):
            rows = projection.public.get(rel.name)
            if not rows:
                continue
            spans.append((i, len(ordered), len(rows)))
            ordered += sorted(rows, key=itemgetter("row_id"))
        if not spans:
            continue
        extra = set().union(*map(dict.keys, ordered)) - allowed
        if extra:
            raise PrivacyViolation(f"{rel.name} rows have non-public columns: {sorted(extra)}")
        whole = _rows_batch(ordered, schema, stamp)
        _check_schema(rel.name, catalog_version, whole.schema)
        for i, first, count in spans:
            projection = projections[i]
            out = per[i][rel.name] = []
            for partition, start in enumerate(range(0, count, max_rows)):
                part = _compact(whole.slice(first + start, min(max_rows, count - start)))
                ipc = _batch_stream_bytes(rel.name, catalog_version, part)
                header = BatchHeader(
                    batch_id=batch_id(
                        projection.execution_id, rel.name, partition, abandoned=projection.swept
                    ),
                    generation=generation,
                    catalog_version=catalog_version,
                    relation=rel.name,
                    root_id=projection.execution_id,
                    partition=partition,
                    content_digest=content_digest(ipc),
                    row_count=part.num_rows,
                )
                out.append(ProjectionBatch(header, ipc))
    batches: dict[tuple[str, str], ProjectionBatch] = {}
    for by_relation in per:
        for rel in catalog.relations(catalog_version):
            for b in by_relation.get(rel.name, ()):
                batches.setdefault((b.header.batch_id, b.header.content_digest), b)
    return list(batches.values())


def _only(projection: ExecutionProjection, relation: str) -> ExecutionProjection:
    return ExecutionProjection(
        projection.execution_id,
        projection.process_euid,
        projection.status,
        projection.index_state,
        projection.value_state,
        {relation: projection.public[relation]},
        swept=projection.swept,
    )


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
_SORT_KEYS: dict[str, tuple[str, ...]] = {
    "values_v1": ("cid",),
    "source_files_v1": ("program_id", "file_id"),
    "cid_refs_v1": ("cid", "root_id"),
}


@lru_cache(maxsize=64)
def _private_schema(dataset: str, version: int) -> pa.Schema:
    return private_schema(dataset, version)


def _sort_key(dataset: str) -> tuple[str, ...]:
    return _SORT_KEYS.get(dataset, ("row_id",))


def _leaf_table(parts: list[LeafRows], schema: pa.Schema) -> pa.Table:
    """The leaf rows of several executions as one table: each execution's rows in row_id order,
    the executions in the given order (missing columns null).

    The columns are converted as they were appended and put in order by one Arrow sort and take,
    instead of reordering every column of every execution in Python first (a third of this
    function's cost at 107 leaves per execution, docs/projection-runtime.md)."""
    names = schema.names
    columns: list[list[object]] = [[] for _ in names]
    ordinal: list[int] = []
    for i, part in enumerate(parts):
        n = len(part)
        for into, name in zip(columns, names, strict=True):
            column = part.columns.get(name)
            into += column if column is not None else [None] * n
        ordinal += [i] * n
    table = _arrays_table(columns, schema)
    keys = pa.table({"execution": pa.array(ordinal, pa.int32()), "row_id": table["row_id"]})
    order = pc.sort_indices(keys, sort_keys=[("execution", "ascending"), ("row_id", "ascending")])
    return table.take(order)


def _ordered_rows(dataset: str, rows: Sequence[Row]) -> list[Row]:
    # itemgetter of one key gives the value, of several a tuple: the same order either way.
    return sorted(rows, key=itemgetter(*_sort_key(dataset)))


def _arrays_table(columns: list[list[object]], schema: pa.Schema) -> pa.Table:
    arrays = [pa.array(values, f.type) for values, f in zip(columns, schema, strict=True)]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


def private_tables(
    projection: ExecutionProjection, version: int = catalog.LATEST_CATALOG_VERSION
) -> Mapping[str, pa.Table]:
    """Lance rows per dataset, sorted by their deterministic key (empty datasets omitted)."""
    return private_tables_of([projection], version)


def private_tables_of(
    projections: Sequence[ExecutionProjection], version: int = catalog.LATEST_CATALOG_VERSION
) -> Mapping[str, pa.Table]:
    """:func:`private_tables` of several executions concatenated per dataset, in the given order.

    The same rows in the same order as concatenating each execution's tables, converted to
    Arrow once per dataset instead of once per execution."""
    rows: dict[str, list[Row]] = {}
    leaves: dict[str, list[LeafRows]] = {}
    for projection in projections:
        for dataset, part in projection.private.items():
            if not part:
                continue
            if isinstance(part, LeafRows):
                leaves.setdefault(dataset, []).append(part)
            else:
                rows.setdefault(dataset, []).extend(_ordered_rows(dataset, part))
    out: dict[str, pa.Table] = {}
    for dataset in sorted({*rows, *leaves}):
        schema = _private_schema(dataset, version)
        if dataset in leaves and dataset in rows:
            raise TypeError(f"{dataset} rows are both columnar and dicts")
        if dataset in leaves:
            out[dataset] = _leaf_table(leaves[dataset], schema)
        else:
            out[dataset] = _columns(rows[dataset], schema)
    return out
