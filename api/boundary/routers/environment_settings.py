"""Control API: an environment's active projection generation and publisher config."""

from __future__ import annotations

from fastapi import APIRouter

from api.boundary import views
from api.boundary.deps import Caller, Runtime
from api.boundary.policy import Scope, require_admin, require_read
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(
    prefix="/v1/environments", tags=["environments"], responses=problem_responses(401, 403, 404)
)


def _scope(runtime: Runtime, environment_id: str) -> Scope:
    env = runtime.metastore.get_environment(environment_id)
    return Scope(env.tenant_id, env.project_id, env.id)


@router.get(
    "/{environment_id}/active-generation",
    operation_id="getActiveGeneration",
    response_model=w.ActiveGeneration,
)
def get_active_generation(environment_id: str, caller: Caller, runtime: Runtime) -> w.ActiveGeneration:
    require_read(caller, _scope(runtime, environment_id), "environment", environment_id)
    return views.active_generation(runtime.metastore.get_environment(environment_id))


@router.put(
    "/{environment_id}/active-generation",
    operation_id="setActiveGeneration",
    response_model=w.ActiveGeneration,
    responses=problem_responses(422),
)
def set_active_generation(
    environment_id: str, body: w.ActiveGenerationUpdate, caller: Caller, runtime: Runtime
) -> w.ActiveGeneration:
    require_admin(caller, _scope(runtime, environment_id), "environment", environment_id)
    return views.active_generation(runtime.metastore.set_active_generation(environment_id, body.generation))


@router.get(
    "/{environment_id}/publisher-config", operation_id="getPublisherConfig", response_model=w.PublisherConfig
)
def get_publisher_config(environment_id: str, caller: Caller, runtime: Runtime) -> w.PublisherConfig:
    require_read(caller, _scope(runtime, environment_id), "environment", environment_id)
    return w.PublisherConfig(**runtime.metastore.get_publisher_config(environment_id))


@router.patch(
    "/{environment_id}/publisher-config",
    operation_id="updatePublisherConfig",
    response_model=w.PublisherConfig,
    responses=problem_responses(422),
)
def update_publisher_config(
    environment_id: str, body: w.PublisherConfigUpdate, caller: Caller, runtime: Runtime
) -> w.PublisherConfig:
    require_admin(caller, _scope(runtime, environment_id), "environment", environment_id)
    changes = body.model_dump(exclude_none=True)
    return w.PublisherConfig(**runtime.metastore.update_publisher_config(environment_id, changes))
