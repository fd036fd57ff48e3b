"""The relation catalog: every projected relation, column by column, public or private.

Catalog version 1 (DESIGN.md section 6). A *public* column is a non-value fact that may cross
into Boundary (ClickHouse); a *private* column holds a value, anything decoded from one, or
source material, and never leaves the data plane (Lance). This module is the one place that
says which is which; Boundary serves :func:`catalog_document` at
``GET /projection-schemas/{catalog_version}`` and accepts only the public columns in batches.

Pure code: no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

CATALOG_VERSIONS: tuple[int, ...] = (1,)
LATEST_CATALOG_VERSION = 1

Visibility = Literal["public", "private"]
Storage = Literal["clickhouse", "lance"]

# --- vocabularies ------------------------------------------------------------------------------------

AVAILABLE = "available"
NOT_CAPTURED = "not_captured"
NOT_APPLICABLE = "not_applicable"
LOST_PREFIX = "lost:"
AVAILABILITY_STATES: tuple[str, ...] = (AVAILABLE, NOT_CAPTURED, NOT_APPLICABLE)
# Known reasons; the vocabulary is open ("lost:<reason>") so a new profiler reason needs no bump.
LOST_REASONS: tuple[str, ...] = (
    "value_too_large",
    "queue_full",
    "publish_failed",
    "transport_exceeded",
    "erased",
)

THREAD_STATUSES: tuple[str, ...] = ("succeeded", "failed", "cancelled", "panicked", "abandoned", "running")
CALL_STATUSES = THREAD_STATUSES
VALUE_STATES: tuple[str, ...] = ("none", "partial", "complete")
INDEX_STATES: tuple[str, ...] = ("complete", "index_corrupt", "root_started_lost", "no_root_ended")
VALUE_ROLES: tuple[str, ...] = ("args", "output", "error")

# The 26 RootEnded health counters, in their encoded order (bex_prof_store's boundary health snapshot).
HEALTH_COUNTERS: tuple[str, ...] = (
    "corrupt_records",
    "active_thread_capacity_exceeded",
    "active_call_capacity_exceeded",
    "join_capacity_exceeded",
    "unmatched_call_facts",
    "unmatched_thread_facts",
    "clock_invalid",
    "cct_segment_publish_failed",
    "evidence_queue_full",
    "evidence_segment_publish_failed",
    "structural_transport_exceeded",
    "value_attempt_transport_exceeded",
    "applicable_error_unwinds",
    "error_captures_queued",
    "error_captures_committed",
    "error_capture_attempt_transport_exceeded",
    "error_capture_missing_structural_join",
    "error_capture_start_uncommitted",
    "error_capture_evidence_queue_full",
    "error_capture_evidence_publish_failed",
    "terminal_error_links_observed",
    "terminal_error_links_queued",
    "terminal_error_links_committed",
    "terminal_error_link_transport_exceeded",
    "terminal_error_link_start_uncommitted",
    "terminal_error_link_evidence_publish_failed",
)
assert len(HEALTH_COUNTERS) == 26


def is_availability_state(value: str) -> bool:
    if value in AVAILABILITY_STATES:
        return True
    reason = value[len(LOST_PREFIX) :] if value.startswith(LOST_PREFIX) else ""
    return bool(reason) and reason.replace("_", "").isalnum() and reason.islower()


def lost(reason: str) -> str:
    state = LOST_PREFIX + reason
    if not is_availability_state(state):
        raise ValueError(f"not a lost reason: {reason!r}")
    return state


VOCABULARIES: dict[str, tuple[str, ...]] = {
    "availability_state": (*AVAILABILITY_STATES, *(LOST_PREFIX + r for r in LOST_REASONS)),
    "thread_status": THREAD_STATUSES,
    "call_status": CALL_STATUSES,
    "value_state": VALUE_STATES,
    "index_state": INDEX_STATES,
    "value_role": VALUE_ROLES,
    "health_counter": HEALTH_COUNTERS,
}

# --- columns and relations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    visibility: Visibility
    description: str
    nullable: bool = False


@dataclass(frozen=True)
class Relation:
    name: str
    storage: Storage
    description: str
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(f"{self.name} has no column {name!r}")


def _pub(name: str, typ: pa.DataType, description: str, *, nullable: bool = False) -> Column:
    return Column(name, typ, "public", description, nullable)


def _priv(name: str, typ: pa.DataType, description: str, *, nullable: bool = True) -> Column:
    return Column(name, typ, "private", description, nullable)


_S = pa.string()
_I64 = pa.int64()
_U64 = pa.uint64()
_U32 = pa.uint32()
_B = pa.bool_()

# Every public relation starts with its scope, its generation and a deterministic row id.
_SCOPE: tuple[Column, ...] = (
    _pub("tenant_id", _S, "Tenant that owns the row; injected from the authenticated scope."),
    _pub("project_id", _S, "Project within the tenant."),
    _pub("environment_id", _S, "Environment within the project."),
    _pub("generation", _U64, "Projection generation the row was written into."),
    _pub("row_id", _S, "Deterministic row id: SHA-256 (hex, 32) of relation, root id and position."),
)


def _availability(role: str) -> Column:
    return _pub(
        f"{role}_state",
        _S,
        f"Availability of the {role} value: available, not_captured, not_applicable or lost:<reason>.",
    )


_CALLS = Relation(
    "calls_v1",
    "clickhouse",
    "One row per span (function call) of a finished execution.",
    (
        *_SCOPE,
        _pub("execution_id", _S, "Hex of the root ThreadRef: the execution this call belongs to."),
        _pub("process_euid", _S, "32-hex id of the profiler stream (process) that wrote the call."),
        _pub("thread_id", _S, "Thread the call ran on."),
        _pub("call_id", _S, "Call identifier, unique within the execution."),
        _pub("parent_call_id", _S, "Calling span; null for the root call.", nullable=True),
        _pub("function_name", _S, "Called function's name."),
        _pub(
            "parent_function_name", _S, "Caller's function name (stored to avoid a self-join).", nullable=True
        ),
        _pub("program_id", _S, "Hex program id of the engine that ran the call."),
        _pub("call_path_id", _S, "Hex CCT context key of the call path.", nullable=True),
        _pub("is_llm", _B, "Whether the function is an LLM function."),
        _pub("started_at_ns", _I64, "Start, nanoseconds since the Unix epoch."),
        _pub(
            "ended_at_ns", _I64, "End, nanoseconds since the Unix epoch; null while running.", nullable=True
        ),
        _pub("duration_ns", _I64, "ended_at_ns - started_at_ns.", nullable=True),
        _pub("status", _S, "succeeded, failed, cancelled, panicked, abandoned or running."),
        _availability("args"),
        _availability("output"),
        _availability("error"),
        _pub("args_cid", _S, "CID of the arguments value when captured.", nullable=True),
        _pub("output_cid", _S, "CID of the output value when captured.", nullable=True),
        _pub("error_cid", _S, "CID of the error value when captured.", nullable=True),
        _priv("args", pa.large_string(), "Arguments in the project's JSON rendering (Lance)."),
        _priv("output", pa.large_string(), "Output in the project's JSON rendering (Lance)."),
        _priv("error", pa.large_string(), "Error in the project's JSON rendering (Lance)."),
    ),
)

_THREADS = Relation(
    "threads_v1",
    "clickhouse",
    "One row per thread; the root thread's row carries the execution's state.",
    (
        *_SCOPE,
        _pub("execution_id", _S, "Hex of the root ThreadRef."),
        _pub("process_euid", _S, "32-hex id of the profiler stream."),
        _pub("thread_id", _S, "Thread identifier."),
        _pub("parent_thread_id", _S, "Spawning thread; null for the root.", nullable=True),
        _pub("is_root", _B, "True for the execution's root thread."),
        _pub("runtime_id", _S, "Host runtime token (baml_id_1_...), opaque.", nullable=True),
        _pub("root_function_name", _S, "Function the thread started in.", nullable=True),
        _pub("status", _S, "succeeded, failed, cancelled, panicked, abandoned or running."),
        _pub("value_state", _S, "none, partial or complete: how many selected values were captured."),
        _pub("index_state", _S, "complete, index_corrupt, root_started_lost or no_root_ended."),
        _pub("started_at_ns", _I64, "Start, nanoseconds since the Unix epoch."),
        _pub("ended_at_ns", _I64, "End, nanoseconds since the Unix epoch.", nullable=True),
        _pub("duration_ns", _I64, "ended_at_ns - started_at_ns.", nullable=True),
    ),
)

_CALL_PATH_STATS = Relation(
    "call_path_stats_v1",
    "clickhouse",
    "Calling-context-tree counters merged per execution and call path.",
    (
        *_SCOPE,
        _pub("execution_id", _S, "Hex of the root ThreadRef."),
        _pub("call_path_id", _S, "Hex CCT context key."),
        _pub("parent_call_path_id", _S, "Parent context key; null at the root.", nullable=True),
        _pub("program_id", _S, "Hex program id (random per engine today)."),
        _pub("function_name", _S, "Function at this call path."),
        _pub("edge_kind", _S, "root, call or spawn."),
        _pub("call_count", _U64, "Calls merged into this path."),
        _pub("error_count", _U64, "Calls on this path that failed."),
        _pub("total_duration_ns", _U64, "Sum of inclusive durations."),
        _pub("min_duration_ns", _U64, "Shortest inclusive duration."),
        _pub("max_duration_ns", _U64, "Longest inclusive duration."),
    ),
)

_ERRORS = Relation(
    "errors_v1",
    "clickhouse",
    "One row per captured error or terminal error link.",
    (
        *_SCOPE,
        _pub("execution_id", _S, "Hex of the root ThreadRef."),
        _pub("call_id", _S, "Call that raised or propagated the error."),
        _pub("thread_id", _S, "Thread of the call."),
        _pub("function_name", _S, "Function of the call."),
        _pub("is_terminal", _B, "Whether this error ended the execution."),
        _pub("occurred_at_ns", _I64, "When the error was recorded, ns since the Unix epoch."),
        _pub("error_state", _S, "Availability of the error value."),
        _pub("error_cid", _S, "CID of the error value.", nullable=True),
        _priv("error", pa.large_string(), "The error value in JSON rendering (Lance)."),
        _priv("source_span", _S, "Source file and span of the raising site (Lance)."),
    ),
)

_FUNCTION_DEFINITIONS = Relation(
    "function_definitions_v1",
    "clickhouse",
    "Function table entries, one row set per program (engine start).",
    (
        *_SCOPE,
        _pub("program_id", _S, "Hex program id."),
        _pub("function_id", _U32, "Function id within the program."),
        _pub("function_name", _S, "Function name."),
        _pub("is_llm", _B, "LLM capture class."),
        _pub("table_cid", _S, "CID of the function table object."),
        _priv("source_path", _S, "Source file path (Lance)."),
        _priv("source_span", _S, "Definition span in the source file (Lance)."),
    ),
)

_HEALTH = Relation(
    "health_v1",
    "clickhouse",
    "The 26 RootEnded health counters of each execution.",
    (
        *_SCOPE,
        _pub("execution_id", _S, "Hex of the root ThreadRef."),
        _pub("process_euid", _S, "32-hex id of the profiler stream."),
        _pub("ended_at_ns", _I64, "RootEnded time, ns since the Unix epoch."),
        *(_pub(name, _U64, f"RootEnded health counter {name}.") for name in HEALTH_COUNTERS),
    ),
)

# Private side: Lance datasets under derived/v1/<scope>/ (scope is in the path, not the rows).
_VALUES = Relation(
    "values_v1",
    "lance",
    "Value bodies addressed by CID.",
    (
        _pub("cid", _S, "64-hex content id (SHA-256 over codec and body)."),
        _pub("codec", pa.uint16(), "Value codec version (1 = protobuf BAML value)."),
        _pub("size_bytes", _U64, "Encoded body size."),
        _priv("body", pa.large_binary(), "Encoded value body.", nullable=False),
        _priv("locator", _S, "Where the body came from: pack key and entry, or large-value key."),
    ),
)

_VALUE_LEAVES = Relation(
    "value_leaves_v1",
    "lance",
    "One row per leaf of a decoded value, for indexed private predicates.",
    (
        _pub("row_id", _S, "Deterministic leaf id."),
        _pub("execution_id", _S, "Hex of the root ThreadRef."),
        _pub("call_id", _S, "Call the value belongs to."),
        _pub("cid", _S, "CID of the whole value."),
        _pub("role", _S, "args, output or error."),
        _pub("function_name", _S, "The call's function (copy of calls_v1, for pruning).", nullable=True),
        _pub("started_at_ns", _I64, "The call's start (copy of calls_v1, for pruning).", nullable=True),
        _pub("status", _S, "The call's status (copy of calls_v1, for pruning).", nullable=True),
        _pub("duration_ns", _I64, "The call's duration (copy of calls_v1, for grouping).", nullable=True),
        _priv("path", _S, "Leaf path, e.g. ['invoice']['id']."),
        _priv("key", _S, "path=value, for exact-match lookups with their own index."),
        _priv("string", pa.large_string(), "String leaf."),
        _priv("number", pa.float64(), "Numeric leaf as its nearest double (every numeric leaf)."),
        _priv("integer", _I64, "Exact integer leaf within int64 (null for floats and wider integers)."),
        _priv("bigint", _S, "Integer leaf beyond int64 as canonical decimal text (exact, any size)."),
        _priv("bool", _B, "Boolean leaf."),
    ),
)

_SOURCE_FILES = Relation(
    "source_files_v1",
    "lance",
    "Source files and paths referenced by function tables.",
    (
        _pub("program_id", _S, "Hex program id."),
        _pub("file_id", _U32, "File id within the program."),
        _priv("path", _S, "Source path."),
        _priv("text", pa.large_string(), "Source text, when shipped."),
    ),
)

_CID_REFS = Relation(
    "cid_refs_v1",
    "lance",
    "Which executions and streams reference a shared CAS object (for erasure reference counts).",
    (
        _pub("cid", _S, "CID of a large value or function table."),
        _pub("root_id", _S, "Execution (root ThreadRef hex) that references it."),
        _pub("process_euid", _S, "Stream that references it."),
    ),
)

_RELATIONS_V1: tuple[Relation, ...] = (
    _CALLS,
    _THREADS,
    _CALL_PATH_STATS,
    _ERRORS,
    _FUNCTION_DEFINITIONS,
    _HEALTH,
    _VALUES,
    _VALUE_LEAVES,
    _SOURCE_FILES,
    _CID_REFS,
)
_CATALOGS: dict[int, dict[str, Relation]] = {1: {r.name: r for r in _RELATIONS_V1}}
PUBLIC_RELATIONS: tuple[str, ...] = tuple(r.name for r in _RELATIONS_V1 if r.storage == "clickhouse")
PRIVATE_RELATIONS: tuple[str, ...] = tuple(r.name for r in _RELATIONS_V1 if r.storage == "lance")


class UnknownCatalogVersion(KeyError):
    pass


def relations(version: int = LATEST_CATALOG_VERSION) -> tuple[Relation, ...]:
    try:
        return tuple(_CATALOGS[version].values())
    except KeyError:
        raise UnknownCatalogVersion(f"catalog version {version} is not registered") from None


def relation(name: str, version: int = LATEST_CATALOG_VERSION) -> Relation:
    for rel in relations(version):
        if rel.name == name:
            return rel
    raise KeyError(f"catalog version {version} has no relation {name!r}")


def public_schema(name: str, version: int = LATEST_CATALOG_VERSION) -> pa.Schema:
    """The Arrow schema Boundary accepts for a public relation: public columns only."""
    rel = relation(name, version)
    if rel.storage != "clickhouse":
        raise KeyError(f"{name} is a private (Lance) relation; it has no public schema")
    fields = [pa.field(c.name, c.type, nullable=c.nullable) for c in rel.columns if c.visibility == "public"]
    return pa.schema(fields, metadata={"baml.relation": name, "baml.catalog_version": str(version)})


def private_columns(name: str, version: int = LATEST_CATALOG_VERSION) -> tuple[Column, ...]:
    return tuple(c for c in relation(name, version).columns if c.visibility == "private")


def deterministic_row_id(relation_name: str, root_id: str, *position: str | int) -> str:
    """Row id from relation, execution root id and the row's position within it."""
    return _hashed(_SHA256, relation_name, root_id, *position).hexdigest()[:32]


_SHA256 = hashlib.sha256()


def _hashed(base: hashlib._Hash, *parts: str | int) -> hashlib._Hash:
    h = base.copy()
    for part in parts:
        data = str(part).encode()
        h.update(len(data).to_bytes(4, "big"))
        h.update(data)
    return h


class RowIds:
    """:func:`deterministic_row_id` of many rows of one relation and root: the relation and root
    id (and any leading ``position`` parts) are hashed once, each row's own parts after them.

    An execution's projection makes a row id for each of its calls and, mostly, of its value
    leaves (about 110 per execution of 10 spans): with the common prefix hashed once, each row
    hashes only its own parts (docs/projection-runtime.md, "2026-12-06 (morning)")."""

    def __init__(self, relation_name: str, root_id: str, *position: str | int) -> None:
        self._prefix = _hashed(_SHA256, relation_name, root_id, *position)

    def __call__(self, *position: str | int) -> str:
        return _hashed(self._prefix, *position).hexdigest()[:32]

    def indexed(self, n: int, *position: str | int) -> list[str]:
        """The row ids of this prefix followed by ``position`` and an index, for index in range(n)."""
        parts = _INDEX_PARTS[:n] if n <= len(_INDEX_PARTS) else map(_index_part, range(n))
        out: list[str] = []
        copy = _hashed(self._prefix, *position).copy
        for part in parts:
            h = copy()
            h.update(part)
            out.append(h.hexdigest()[:32])
        return out


def _index_part(index: int) -> bytes:
    data = str(index).encode()
    return len(data).to_bytes(4, "big") + data


_INDEX_PARTS = tuple(_index_part(i) for i in range(4096))


def _schema_ipc_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def _relations_document(version: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rel in relations(version):
        out.append(
            {
                "name": rel.name,
                "storage": rel.storage,
                "description": rel.description,
                "columns": [
                    {
                        "name": c.name,
                        "arrow_type": str(c.type),
                        "nullable": c.nullable,
                        "visibility": c.visibility,
                        "description": c.description,
                    }
                    for c in rel.columns
                ],
                "arrow_schema_ipc_base64": (
                    _schema_ipc_b64(public_schema(rel.name, version)) if rel.storage == "clickhouse" else None
                ),
            }
        )
    return out


def catalog_digest(version: int = LATEST_CATALOG_VERSION) -> str:
    """SHA-256 over the canonical JSON of the relations and vocabularies (pins the catalog)."""
    rels = _relations_document(version)
    # The IPC bytes are derived from the columns already listed; leave them out of the digest
    # so a pyarrow upgrade that re-encodes schemas does not look like a catalog change.
    for rel in rels:
        rel.pop("arrow_schema_ipc_base64")
    body = {"relations": rels, "vocabularies": {k: list(v) for k, v in VOCABULARIES.items()}}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def catalog_document(version: int = LATEST_CATALOG_VERSION) -> dict[str, Any]:
    """What ``GET /projection-schemas/{catalog_version}`` returns."""
    return {
        "catalog_version": version,
        "digest": catalog_digest(version),
        "relations": _relations_document(version),
        "vocabularies": {k: list(v) for k, v in VOCABULARIES.items()},
    }


def schema_from_document(relation_doc: dict[str, Any]) -> pa.Schema:
    """Rebuild the public Arrow schema a projector received in a catalog document."""
    b64 = relation_doc.get("arrow_schema_ipc_base64")
    if not b64:
        raise KeyError(f"{relation_doc.get('name')} has no public schema")
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(b64)))
