"""Workload API: bind a query to one generation and catalog version until ``expires_at``."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.boundary import views
from api.boundary.deps import Runtime, Workload, WorkloadCaller
from api.common.errors import NotFound, problem_responses
from formats import boundary_wire as w
from formats.catalog import LATEST_CATALOG_VERSION

router = APIRouter(prefix="/query-snapshots", tags=["query"], responses=problem_responses(401, 403, 404, 422))


def require_own_environment(runtime: Runtime, caller: WorkloadCaller, environment_id: str) -> None:
    """The environment must belong to the calling deployment's tenant (else it does not exist)."""
    try:
        env = runtime.metastore.get_environment(environment_id)
    except NotFound:
        env = None
    if env is None or env.tenant_id != caller.tenant_id:
        raise NotFound(f"environment {environment_id} not found", code="environment_not_found")


@router.post(
    "",
    operation_id="createQuerySnapshot",
    status_code=status.HTTP_201_CREATED,
    response_model=w.QuerySnapshot,
)
def create_query_snapshot(
    body: w.QuerySnapshotRequest, caller: Workload, runtime: Runtime, response: Response
) -> w.QuerySnapshot:
    require_own_environment(runtime, caller, body.environment_id)
    snap = runtime.metastore.query_snapshot(
        body.environment_id,
        body.catalog_version or LATEST_CATALOG_VERSION,
        window_seconds=runtime.settings.snapshot_window_seconds,
        ttl_seconds=runtime.settings.snapshot_ttl_seconds,
    )
    response.headers["Cache-Control"] = "private, no-store"
    return views.snapshot(snap)
