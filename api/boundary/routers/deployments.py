"""Control API: data-plane deployments (each assigned to one tenant, running in one cell)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.boundary import views
from api.boundary.deps import Caller, IdemKey, Runtime, idem_context
from api.boundary.policy import Scope, require_admin, require_operator, require_read
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(tags=["deployments"], responses=problem_responses(401, 403, 404))


@router.post(
    "/v1/tenants/{tenant_id}/deployments",
    operation_id="createDeployment",
    status_code=status.HTTP_201_CREATED,
    response_model=w.Deployment,
    responses=problem_responses(409, 422),
)
def create_deployment(
    tenant_id: str,
    body: w.DeploymentCreate,
    caller: Caller,
    runtime: Runtime,
    key: IdemKey,
    response: Response,
) -> w.Deployment:
    require_operator(caller)  # deployments are assigned by the vendor, not the customer
    idem = idem_context(caller.token_id, key, f"POST /v1/tenants/{tenant_id}/deployments", body)
    row, replayed = runtime.metastore.create_deployment(tenant_id, body.name, body.cell, body.kind, idem=idem)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return views.deployment(row)


@router.get(
    "/v1/tenants/{tenant_id}/deployments", operation_id="listDeployments", response_model=w.DeploymentList
)
def list_deployments(tenant_id: str, caller: Caller, runtime: Runtime) -> w.DeploymentList:
    require_admin(caller, Scope(tenant_id), "tenant", tenant_id)
    return w.DeploymentList(
        items=[views.deployment(d) for d in runtime.metastore.list_deployments(tenant_id)]
    )


@router.get("/v1/deployments/{deployment_id}", operation_id="getDeployment", response_model=w.Deployment)
def get_deployment(deployment_id: str, caller: Caller, runtime: Runtime) -> w.Deployment:
    dep = runtime.metastore.get_deployment(deployment_id)
    require_read(caller, Scope(dep.tenant_id), "deployment", deployment_id)
    return views.deployment(dep)
