"""``POST /v1/query``: plan, bind the snapshot, stream NDJSON rows and the final outcome."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.concurrency import iterate_in_threadpool

from api.common.errors import BadRequest
from api.coordinator.planner import PlanError
from api.coordinator.query_wire import QueryRequest
from api.coordinator.runtime import PreparedQuery
from api.coordinator.user_auth import Caller, Runtime
from formats import query_output as qo

router = APIRouter(tags=["query"])
_log = logging.getLogger("baml_studio.coordinator")


class QueryRejected(BadRequest):
    code = "query_invalid"
    title = "Query cannot be planned"


def plan_error(exc: PlanError) -> QueryRejected:
    return QueryRejected(exc.message, code=exc.code, remedy=exc.remedy)


def prepare(runtime: Runtime, caller: Caller, body: QueryRequest, *, interactive: bool) -> PreparedQuery:
    b = body.budget
    budget = runtime.budget(wall_ms=b.wall_ms, rows=b.rows, bytes=b.bytes, private_bytes=b.private_bytes)
    try:
        return runtime.start_query(body.sql, caller.scope, budget, interactive=interactive)
    except PlanError as exc:
        raise plan_error(exc) from None


@router.post(
    "/v1/query",
    operation_id="run_query",
    summary="Run a query; NDJSON rows, then one queryOutcome line",
    responses={
        200: {"content": {qo.NDJSON_MEDIA_TYPE: {}}, "description": "Rows, then the queryOutcome record."},
        400: {"description": "The SQL cannot be planned (problem+json)."},
        401: {"description": "No valid user token."},
        403: {"description": "The token may not query."},
        503: {"description": "Boundary unreachable."},
    },
)
def run_query(body: QueryRequest, runtime: Runtime, caller: Caller) -> StreamingResponse:
    prepared = prepare(runtime, caller, body, interactive=True)
    _log.info(
        "query class=%s environment=%s snapshot=%s",
        prepared.plan.query_class,
        caller.scope.environment_id,
        prepared.snapshot.snapshot_id,
    )
    # The generator runs the Lance and DataFusion work: off the event loop, in the thread pool.
    return StreamingResponse(
        iterate_in_threadpool(prepared.run.lines()),
        media_type=qo.NDJSON_MEDIA_TYPE,
        headers={"Cache-Control": "no-store"},
    )
