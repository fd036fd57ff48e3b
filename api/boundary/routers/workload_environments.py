"""Workload API: what the data plane reads about one of its tenant's environments."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.boundary import views
from api.boundary.deps import Runtime, Workload
from api.boundary.routers.query_snapshots import require_own_environment
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(
    prefix="/environments", tags=["workload environments"], responses=problem_responses(401, 403, 404)
)


@router.get(
    "/{environment_id}/active-generation",
    operation_id="workloadGetActiveGeneration",
    response_model=w.ActiveGeneration,
)
def workload_active_generation(environment_id: str, caller: Workload, runtime: Runtime) -> w.ActiveGeneration:
    require_own_environment(runtime, caller, environment_id)
    return views.active_generation(runtime.metastore.get_environment(environment_id))


@router.get(
    "/{environment_id}/publisher-config",
    operation_id="workloadGetPublisherConfig",
    response_model=w.PublisherConfig,
)
def workload_publisher_config(
    environment_id: str, caller: Workload, runtime: Runtime, response: Response
) -> w.PublisherConfig:
    require_own_environment(runtime, caller, environment_id)
    response.headers["Cache-Control"] = "private, max-age=60"
    return w.PublisherConfig(**runtime.metastore.get_publisher_config(environment_id))
