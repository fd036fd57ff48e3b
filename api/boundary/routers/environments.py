"""Control API: environments within a project."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.boundary import views
from api.boundary.deps import Caller, IdemKey, Runtime, idem_context
from api.boundary.policy import Scope, require_admin, require_read
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(tags=["environments"], responses=problem_responses(401, 403, 404))


@router.post(
    "/v1/projects/{project_id}/environments",
    operation_id="createEnvironment",
    status_code=status.HTTP_201_CREATED,
    response_model=w.Environment,
    responses=problem_responses(409, 422),
)
def create_environment(
    project_id: str,
    body: w.EnvironmentCreate,
    caller: Caller,
    runtime: Runtime,
    key: IdemKey,
    response: Response,
) -> w.Environment:
    prj = runtime.metastore.get_project(project_id)
    require_admin(caller, Scope(prj.tenant_id, prj.id), "project", project_id)
    idem = idem_context(caller.token_id, key, f"POST /v1/projects/{project_id}/environments", body)
    row, replayed = runtime.metastore.create_environment(project_id, body.name, idem=idem)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return views.environment(row)


@router.get(
    "/v1/projects/{project_id}/environments",
    operation_id="listEnvironments",
    response_model=w.EnvironmentList,
)
def list_environments(project_id: str, caller: Caller, runtime: Runtime) -> w.EnvironmentList:
    prj = runtime.metastore.get_project(project_id)
    require_read(caller, Scope(prj.tenant_id, prj.id), "project", project_id)
    rows = runtime.metastore.list_environments(
        project_id, None if caller.is_operator else caller.environment_id
    )
    return w.EnvironmentList(items=[views.environment(r) for r in rows])


@router.get("/v1/environments/{environment_id}", operation_id="getEnvironment", response_model=w.Environment)
def get_environment(environment_id: str, caller: Caller, runtime: Runtime) -> w.Environment:
    env = runtime.metastore.get_environment(environment_id)
    require_read(caller, Scope(env.tenant_id, env.project_id, env.id), "environment", environment_id)
    return views.environment(env)
