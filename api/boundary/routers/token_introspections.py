"""Workload API: the data plane validates a publisher or user token it received."""

from __future__ import annotations

from fastapi import APIRouter

from api.boundary.deps import Runtime, Workload
from api.boundary.metastore import permissions_of
from api.common.auth import TokenKind, token_kind
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(
    prefix="/token-introspections", tags=["workload identity"], responses=problem_responses(401, 403)
)

_INACTIVE = w.TokenIntrospection(active=False)


@router.post("", operation_id="introspectToken", response_model=w.TokenIntrospection)
def introspect_token(
    body: w.TokenIntrospectionRequest, caller: Workload, runtime: Runtime
) -> w.TokenIntrospection:
    # Operator tokens never authorize data-plane calls; tokens of other tenants look unknown.
    if token_kind(body.token) not in (TokenKind.PUBLISHER, TokenKind.USER):
        return _INACTIVE
    row = runtime.metastore.authenticate(body.token)
    if row is None or row.tenant_id != caller.tenant_id:
        return _INACTIVE
    return w.TokenIntrospection.model_validate(
        {
            "active": True,
            "kind": row.kind,
            "token_id": row.id,
            "tenant_id": row.tenant_id,
            "project_id": row.project_id,
            "environment_id": row.environment_id,
            "permissions": permissions_of(row),
            "expires_at": row.expires_at,
        }
    )
