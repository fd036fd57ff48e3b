"""Validate one group of a binary batch set: the batches of one relation that share a schema
message (``formats.batch_set_body``), checked once per group where the rule allows (pure).

Per batch, the outcome is exactly the PUT's (``batch_check``), in the PUT's order: digest,
relation, readable Arrow, exact schema, required columns, row count, scope. What is done once per
group instead of once per batch: hashing the schema message, resolving the relation, reading and
checking the schema, and the null and scope checks over all rows at once. When a group-wide check
fails, the same check runs batch by batch, so only the batches that break a rule are refused, with
the code the PUT would have answered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from api.boundary.facts.batch_check import (
    BatchRejected,
    BatchScope,
    check_fields,
    check_nulls,
    check_scope,
    conform,
    relation_of,
)
from formats import catalog
from formats.batch_set_body import CONTINUATION, END_OF_STREAM, DecodedGroup


@dataclass(frozen=True, slots=True)
class GroupChecked:
    """Batch ``k`` of the group passed every check; its rows are ``table[offset : offset + rows]``."""

    k: int
    offset: int
    rows: int


@dataclass
class GroupResult:
    table: pa.Table | None  # every passing batch's rows, catalog schema, one chunk
    checked: list[GroupChecked]
    rejected: dict[int, BatchRejected]


_ARROW_INVALID = ("arrow_stream_invalid", "the body is not a readable Arrow IPC stream")


def _digest_ok(group: DecodedGroup, k: int, schema_hash: hashlib._Hash) -> bool:
    h = schema_hash.copy()
    h.update(group.messages(k))
    h.update(END_OF_STREAM)
    return "sha256:" + h.hexdigest() == group.group.batches[k].content_digest


def _record_batches(buf: pa.Buffer, schema: pa.Schema) -> list[pa.RecordBatch] | None:
    """The record-batch messages that fill ``buf`` exactly, or None if it holds anything else."""
    out = []
    reader = pa.BufferReader(buf)
    view = memoryview(buf).cast("B")  # pyarrow exports signed bytes ('b')
    try:
        while (start := reader.tell()) < buf.size:
            # The reader also accepts the legacy prefix-less format; the set carries only the
            # continuation-marked one (the PUT body it reconstructs starts with one too).
            if buf.size - start < 8 or view[start : start + 4] != CONTINUATION:
                return None
            msg = pa.ipc.read_message(reader)
            if msg.type != "record batch":
                return None
            out.append(pa.ipc.read_record_batch(msg, schema))
    except (pa.ArrowInvalid, pa.ArrowException, OSError, EOFError):
        return None
    return out


def _root_column(relation: str) -> str:
    return "program_id" if relation == "function_definitions_v1" else "execution_id"


def _scope_all(
    table: pa.Table, scope: BatchScope, rel: catalog.Relation, roots: list[str], counts: list[int]
) -> bool:
    """True when every row carries the scope, the generation and its own batch's root, and no
    row_id repeats in the group (which implies none repeats within a batch)."""
    if table.num_rows == 0:
        return True
    for col, want in (
        ("tenant_id", scope.tenant_id),
        ("project_id", scope.project_id),
        ("environment_id", scope.environment_id),
        ("generation", scope.generation),
    ):
        if pc.unique(table.column(col)).to_pylist() != [want]:
            return False
    root_col = _root_column(rel.name)
    if root_col in table.column_names:
        col = table.column(root_col)
        ends = pa.array([start + n for start, n in zip(_starts(counts), counts, strict=True)], pa.int32())
        # Each batch's root repeated over its rows, without a Python loop over rows.
        expected = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(roots, col.type)))
        if not pc.all(pc.fill_null(pc.equal(col, expected), False)).as_py():
            return False
    return bool(pc.count_distinct(table.column("row_id")).as_py() == table.num_rows)


def check_group(group: DecodedGroup, candidates: Sequence[int], scope: BatchScope) -> GroupResult:
    """Check batches ``candidates`` (indices into the group's batches) of one group."""
    g = group.group
    rejected: dict[int, BatchRejected] = {}
    schema_hash = hashlib.sha256(group.schema)
    alive = []
    for k in candidates:
        if _digest_ok(group, k, schema_hash):
            alive.append(k)
        else:
            rejected[k] = BatchRejected(
                "content_digest_mismatch", "the body's SHA-256 does not match X-Baml-Content-Digest"
            )
    if not alive:
        return GroupResult(None, [], rejected)

    def refuse_all(exc: BatchRejected) -> GroupResult:
        rejected.update({k: exc for k in alive})
        return GroupResult(None, [], rejected)

    try:
        rel = relation_of(g.relation, g.catalog_version)
    except BatchRejected as exc:
        return refuse_all(exc)
    stream = pa.py_buffer(group.stream)
    try:
        schema = pa.ipc.read_schema(stream.slice(0, g.schema_length))
    except (pa.ArrowInvalid, pa.ArrowException, OSError):
        return refuse_all(BatchRejected(*_ARROW_INVALID))
    try:
        expected = check_fields(schema, rel, g.catalog_version)
    except BatchRejected as exc:
        return refuse_all(exc)

    per_batch: list[tuple[int, list[pa.RecordBatch]]] = []
    for k in alive:
        rbs = _record_batches(stream.slice(group.offsets[k], g.batches[k].length), schema)
        if rbs is None:
            rejected[k] = BatchRejected(*_ARROW_INVALID)
            continue
        rows = sum(rb.num_rows for rb in rbs)
        declared = g.batches[k].row_count
        if declared is not None and declared != rows:
            rejected[k] = BatchRejected(
                "row_count_mismatch", "X-Baml-Row-Count differs from the rows in the body"
            )
            continue
        per_batch.append((k, rbs))
    if not per_batch:
        return GroupResult(None, [], rejected)

    def rows_of(batches: list[tuple[int, list[pa.RecordBatch]]]) -> tuple[pa.Table, list[int]]:
        # One chunk, not one per message: every check below runs once over the group instead of
        # once per batch's chunk, and chdb's insert (which costs per chunk) gets it as it is.
        table = pa.Table.from_batches([rb for _, rbs in batches for rb in rbs], schema).combine_chunks()
        return table, [sum(rb.num_rows for rb in rbs) for _, rbs in batches]

    raw, counts = rows_of(per_batch)
    try:
        check_nulls(raw, expected, rel)
    except BatchRejected:  # attribute: only the batches with nulls in required columns go
        keep = []
        for (k, rbs), n, offset in zip(per_batch, counts, _starts(counts), strict=True):
            try:
                check_nulls(raw.slice(offset, n), expected, rel)
                keep.append((k, rbs))
            except BatchRejected as exc:
                rejected[k] = exc
        if not keep:
            return GroupResult(None, [], rejected)
        per_batch = keep
        raw, counts = rows_of(per_batch)
    table = conform(raw, expected)
    roots = [g.batches[k].root_id for k, _ in per_batch]
    fast = _scope_all(table, scope, rel, roots, counts)
    checked: list[GroupChecked] = []
    for (k, _), n, root, offset in zip(per_batch, counts, roots, _starts(counts), strict=True):
        if not fast:  # attribute the failure: the PUT's scope checks on this batch's rows alone
            try:
                check_scope(table.slice(offset, n), scope, rel, root)
            except BatchRejected as exc:
                rejected[k] = exc
                continue
        checked.append(GroupChecked(k, offset, n))
    return GroupResult(table, checked, rejected)


def _starts(counts: list[int]) -> list[int]:
    out, at = [], 0
    for n in counts:
        out.append(at)
        at += n
    return out
