"""Control API: projects within a tenant."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.boundary import views
from api.boundary.deps import Caller, IdemKey, Runtime, idem_context
from api.boundary.policy import Scope, require_admin, require_read
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(tags=["projects"], responses=problem_responses(401, 403, 404))


@router.post(
    "/v1/tenants/{tenant_id}/projects",
    operation_id="createProject",
    status_code=status.HTTP_201_CREATED,
    response_model=w.Project,
    responses=problem_responses(409, 422),
)
def create_project(
    tenant_id: str, body: w.ProjectCreate, caller: Caller, runtime: Runtime, key: IdemKey, response: Response
) -> w.Project:
    require_admin(caller, Scope(tenant_id), "tenant", tenant_id)
    idem = idem_context(caller.token_id, key, f"POST /v1/tenants/{tenant_id}/projects", body)
    row, replayed = runtime.metastore.create_project(tenant_id, body.name, idem=idem)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return views.project(row)


@router.get("/v1/tenants/{tenant_id}/projects", operation_id="listProjects", response_model=w.ProjectList)
def list_projects(tenant_id: str, caller: Caller, runtime: Runtime) -> w.ProjectList:
    require_read(caller, Scope(tenant_id), "tenant", tenant_id)
    rows = runtime.metastore.list_projects(tenant_id, None if caller.is_operator else caller.project_id)
    return w.ProjectList(items=[views.project(r) for r in rows])


@router.get("/v1/projects/{project_id}", operation_id="getProject", response_model=w.Project)
def get_project(project_id: str, caller: Caller, runtime: Runtime) -> w.Project:
    row = runtime.metastore.get_project(project_id)
    require_read(caller, Scope(row.tenant_id, row.id), "project", project_id)
    return views.project(row)
