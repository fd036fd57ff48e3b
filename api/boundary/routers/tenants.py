"""Control API: tenants (create: operator; read: operator or members)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.boundary import views
from api.boundary.deps import Caller, IdemKey, Runtime, idem_context
from api.boundary.policy import Scope, require_operator, require_read
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(prefix="/v1/tenants", tags=["tenants"], responses=problem_responses(401, 403))


@router.post(
    "",
    operation_id="createTenant",
    status_code=status.HTTP_201_CREATED,
    response_model=w.Tenant,
    responses=problem_responses(409, 422),
)
def create_tenant(
    body: w.TenantCreate, caller: Caller, runtime: Runtime, key: IdemKey, response: Response
) -> w.Tenant:
    require_operator(caller)
    idem = idem_context(caller.token_id, key, "POST /v1/tenants", body)
    row, replayed = runtime.metastore.create_tenant(body.name, idem=idem)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return views.tenant(row)


@router.get("", operation_id="listTenants", response_model=w.TenantList)
def list_tenants(caller: Caller, runtime: Runtime) -> w.TenantList:
    rows = runtime.metastore.list_tenants(None if caller.is_operator else caller.tenant_id)
    return w.TenantList(items=[views.tenant(r) for r in rows])


@router.get(
    "/{tenant_id}", operation_id="getTenant", response_model=w.Tenant, responses=problem_responses(404)
)
def get_tenant(tenant_id: str, caller: Caller, runtime: Runtime) -> w.Tenant:
    require_read(caller, Scope(tenant_id), "tenant", tenant_id)
    return views.tenant(runtime.metastore.get_tenant(tenant_id))
