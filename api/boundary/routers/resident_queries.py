"""Workload API: ``POST /resident-queries``: the public part of a query plan, run in ClickHouse.

Boundary reparses the SQL, allows only registered public relations, columns, functions and
operations, wraps every table in the caller's scope and the snapshot's generation, applies
its own budget settings and answers an Arrow IPC stream. It never runs the caller's text.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api.boundary.deps import BoundaryRuntime, Runtime, Workload, WorkloadCaller
from api.boundary.facts import access
from api.boundary.facts.guard import Scope, SqlRejected, guard_sql
from api.boundary.facts.store import Budget, BudgetExceeded, QueryFailed
from api.common.errors import ApiError, BadRequest, NotFound, problem_responses
from formats import boundary_wire as w
from formats import catalog

router = APIRouter(
    prefix="/resident-queries", tags=["query"], responses=problem_responses(400, 401, 403, 404, 422)
)


class ResidentBudgetExceeded(ApiError):
    status = 422
    code = "resident_budget_exceeded"
    title = "Resident query budget exceeded"
    retryable = False


def _bind(
    runtime: BoundaryRuntime, caller: WorkloadCaller, body: w.ResidentQueryRequest
) -> tuple[Scope, int, str]:
    """(scope with generation, catalog version, snapshot id or '') for the request."""
    env = access.own_environment(runtime, caller, body.environment_id)
    if body.snapshot_id is not None:
        if body.generation is not None or body.catalog_version is not None:
            raise BadRequest(
                "name either snapshot_id or generation with catalog_version",
                code="resident_binding_ambiguous",
            )
        try:
            snap = runtime.metastore.get_query_snapshot(body.snapshot_id)
        except NotFound:
            snap = None
        if snap is None or snap.tenant_id != caller.tenant_id or snap.environment_id != env.id:
            raise NotFound(f"query snapshot {body.snapshot_id} not found", code="snapshot_not_found")
        expires = snap.expires_at if snap.expires_at.tzinfo else snap.expires_at.replace(tzinfo=dt.UTC)
        if expires <= dt.datetime.now(dt.UTC):
            raise BadRequest(
                f"query snapshot {body.snapshot_id} expired",
                code="snapshot_expired",
                remedy="POST /query-snapshots for a fresh snapshot.",
            )
        generation, version, snapshot_id = snap.generation, snap.catalog_version, snap.id
    else:
        if body.generation is None or body.catalog_version is None:
            raise BadRequest(
                "name snapshot_id, or generation with catalog_version", code="resident_binding_missing"
            )
        access.readable_generation(env, body.generation)
        generation, version, snapshot_id = body.generation, body.catalog_version, ""
    if version not in catalog.CATALOG_VERSIONS:
        raise NotFound(f"catalog version {version} is not registered", code="catalog_version_not_found")
    return Scope(env.tenant_id, env.project_id, env.id, generation), version, snapshot_id


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


@router.post(
    "",
    operation_id="runResidentQuery",
    response_class=Response,
    responses={
        200: {
            "description": "Arrow IPC stream; the generation is in the header and the schema metadata.",
            "content": {w.ARROW_STREAM_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            "headers": {w.HEADER_PROJECTION_GENERATION: {"schema": {"type": "integer"}}},
        }
    },
)
async def run_resident_query(body: w.ResidentQueryRequest, caller: Workload, runtime: Runtime) -> Response:
    scope, version, snapshot_id = _bind(runtime, caller, body)
    store = await run_in_threadpool(runtime.fact_store)
    try:
        sql = guard_sql(body.sql, scope, database=store.database, catalog_version=version)
    except SqlRejected as exc:
        raise BadRequest(
            exc.detail, code=f"resident_sql_{exc.code}", remedy="Send only the public part of the plan."
        ) from None
    s = runtime.settings
    budget = Budget(
        wall_ms=min(body.budget.wall_ms, s.resident_max_wall_ms),
        rows=min(body.budget.rows, s.resident_max_rows),
        bytes=min(body.budget.bytes, s.resident_max_bytes),
    )
    try:
        table = await run_in_threadpool(store.run_guarded, sql, budget)
    except BudgetExceeded as exc:
        raise ResidentBudgetExceeded(
            f"the resident query exceeded its {exc.limit} budget",
            remedy="Narrow the query, or run it as a background query job (POST /v1/query-jobs).",
        ) from None
    except QueryFailed as exc:
        raise BadRequest(f"ClickHouse refused the query: {exc.name}", code="resident_query_failed") from None
    meta = dict(table.schema.metadata or {})
    meta[w.META_PROJECTION_GENERATION.encode()] = str(scope.generation).encode()
    meta[w.META_CATALOG_VERSION.encode()] = str(version).encode()
    if snapshot_id:
        meta[w.META_SNAPSHOT_ID.encode()] = snapshot_id.encode()
    table = table.replace_schema_metadata(meta)
    return Response(
        content=_ipc(table),
        media_type=w.ARROW_STREAM_MEDIA_TYPE,
        headers={w.HEADER_PROJECTION_GENERATION: str(scope.generation), "Cache-Control": "private, no-store"},
    )
