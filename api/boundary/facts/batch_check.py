"""Validate one projection batch against the catalog and the authenticated scope (pure).

Contract: :func:`check_batch` returns the table (columns in catalog order) or raises
:class:`BatchRejected` whose ``code`` names the rule and whose detail names the column or
header, never a value.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from formats import catalog

DIGEST_PREFIX = "sha256:"


class BatchRejected(ValueError):
    def __init__(self, code: str, detail: str, *, status: int = 400) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status


@dataclass(frozen=True)
class BatchScope:
    tenant_id: str
    project_id: str
    environment_id: str
    generation: int


@lru_cache(maxsize=64)
def public_schema(relation: str, version: int) -> pa.Schema:
    """The catalog's public schema (immutable per catalog version: built once)."""
    return catalog.public_schema(relation, version)


def body_digest(body: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(body).hexdigest()


def check_digest(body: bytes, claimed: str) -> None:
    if not claimed.startswith(DIGEST_PREFIX) or len(claimed) != len(DIGEST_PREFIX) + 64:
        raise BatchRejected("content_digest_malformed", "X-Baml-Content-Digest must be sha256:<64 hex>")
    if body_digest(body) != claimed.lower():
        raise BatchRejected(
            "content_digest_mismatch", "the body's SHA-256 does not match X-Baml-Content-Digest"
        )


def read_ipc(body: bytes) -> pa.Table:
    try:
        return pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        raise BatchRejected("arrow_stream_invalid", "the body is not a readable Arrow IPC stream") from exc


def relation_of(name: str, version: int) -> catalog.Relation:
    try:
        rel = catalog.relation(name, version)
    except catalog.UnknownCatalogVersion as exc:
        raise BatchRejected(
            "catalog_version_not_found", f"catalog version {version} is not registered", status=404
        ) from exc
    except KeyError as exc:
        raise BatchRejected(
            "relation_unknown", f"relation {name} is not in catalog version {version}"
        ) from exc
    if rel.storage != "clickhouse":
        raise BatchRejected("relation_not_public", f"relation {name} is private and never crosses Boundary")
    return rel


def check_fields(schema: pa.Schema, rel: catalog.Relation, version: int) -> pa.Schema:
    """Exact public schema by field: reject private, unknown and missing columns and wrong types.
    Returns the relation's public schema (the order and nullability rows are conformed to)."""
    expected = public_schema(rel.name, version)
    visibility = {c.name: c.visibility for c in rel.columns}
    seen: set[str] = set()
    for field in schema:
        if field.name in seen:
            raise BatchRejected("column_duplicated", f"column {field.name} appears twice")
        seen.add(field.name)
        vis = visibility.get(field.name)
        if vis == "private":
            raise BatchRejected(
                "private_column", f"column {field.name} of {rel.name} is value-bearing (private)"
            )
        if vis is None:
            raise BatchRejected("unknown_column", f"column {field.name} is not in {rel.name}")
        want = expected.field(field.name)
        if not field.type.equals(want.type):
            raise BatchRejected(
                "column_type_mismatch", f"column {field.name} must be {want.type}, got {field.type}"
            )
    for want in expected:
        if want.name not in seen:
            raise BatchRejected("missing_column", f"column {want.name} of {rel.name} is missing")
    return expected


def check_nulls(table: pa.Table, expected: pa.Schema, rel: catalog.Relation) -> None:
    for want in expected:
        if not want.nullable and table.column(want.name).null_count:
            raise BatchRejected("null_in_required_column", f"column {want.name} of {rel.name} has nulls")


def conform(table: pa.Table, expected: pa.Schema) -> pa.Table:
    """Columns in catalog order with the catalog's nullability (a no-op when already so)."""
    if table.schema.equals(expected):
        return table
    return table.select(expected.names).cast(expected)


def check_schema(table: pa.Table, rel: catalog.Relation, version: int) -> pa.Table:
    """Exact public schema (:func:`check_fields`) and no nulls in required columns."""
    expected = check_fields(table.schema, rel, version)
    check_nulls(table, expected, rel)
    return conform(table, expected)


def _only(table: pa.Table, column: str) -> list[object]:
    return pc.unique(table.column(column)).to_pylist()  # type: ignore[no-any-return]


def check_scope(table: pa.Table, scope: BatchScope, rel: catalog.Relation, root_id: str) -> None:
    """Every row must carry the authenticated scope, the header's generation and root."""
    if table.num_rows == 0:
        return
    for col, want in (
        ("tenant_id", scope.tenant_id),
        ("project_id", scope.project_id),
        ("environment_id", scope.environment_id),
    ):
        if _only(table, col) != [want]:
            raise BatchRejected(
                "scope_mismatch", f"column {col} differs from the authenticated scope", status=403
            )
    if _only(table, "generation") != [scope.generation]:
        raise BatchRejected("generation_mismatch", "column generation differs from X-Baml-Generation")
    root_col = "program_id" if rel.name == "function_definitions_v1" else "execution_id"
    if root_col in table.column_names and _only(table, root_col) != [root_id]:
        raise BatchRejected("root_mismatch", f"column {root_col} differs from X-Baml-Root-Id")
    if pc.count_distinct(table.column("row_id")).as_py() != table.num_rows:
        raise BatchRejected("row_id_duplicated", "row_id repeats within the batch")
