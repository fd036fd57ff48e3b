"""Control API: tokens. Secrets are returned once, at issue or rotation, and stored hashed."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.boundary import views
from api.boundary.deps import Caller, IdemKey, Runtime, idem_context
from api.boundary.metastore import Metastore
from api.boundary.models import Token as TokenRow
from api.boundary.models import utcnow
from api.boundary.policy import Principal, Scope, check_grant, require_admin
from api.common.auth import Permission, TokenKind
from api.common.errors import Forbidden, problem_responses
from formats import boundary_wire as w

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], responses=problem_responses(401, 403, 404))

_DEFAULT_PERMISSIONS = {
    TokenKind.PUBLISHER: {Permission.PUBLISH.value},
    TokenKind.USER: {Permission.QUERY.value},
    TokenKind.OPERATOR: {Permission.ADMIN.value},
}


def _target(ms: Metastore, caller: Principal, body: w.TokenIssue) -> Scope | None:
    """The scope the new token will have, resolved from the metastore (ids only select)."""
    if body.environment_id is not None:
        env = ms.get_environment(body.environment_id)
        return Scope(env.tenant_id, env.project_id, env.id)
    if body.project_id is not None:
        prj = ms.get_project(body.project_id)
        return Scope(prj.tenant_id, prj.id)
    if body.tenant_id is not None:
        return Scope(ms.get_tenant(body.tenant_id).id)
    if TokenKind(body.kind) is TokenKind.OPERATOR or caller.is_operator or caller.tenant_id is None:
        return None
    # A user admin issuing without ids gets its own scope.
    return Scope(caller.tenant_id, caller.project_id, caller.environment_id)


def _token_scope(row: TokenRow) -> Scope | None:
    return None if row.tenant_id is None else Scope(row.tenant_id, row.project_id, row.environment_id)


def _require_manage(caller: Principal, row: TokenRow) -> None:
    scope = _token_scope(row)
    if scope is None:
        if not caller.is_operator:
            raise_not_found(row.id)
        return
    require_admin(caller, scope, "token", row.id)


def raise_not_found(token_id: str) -> None:
    from api.common.errors import NotFound

    raise NotFound(f"token {token_id} not found", code="token_not_found")


@router.post(
    "",
    operation_id="issueToken",
    status_code=status.HTTP_201_CREATED,
    response_model=w.IssuedToken,
    responses=problem_responses(409, 422),
)
def issue_token(
    body: w.TokenIssue, caller: Caller, runtime: Runtime, key: IdemKey, response: Response
) -> w.IssuedToken:
    kind = TokenKind(body.kind)
    perms: set[str] = set(body.permissions) or set(_DEFAULT_PERMISSIONS[kind])
    target = _target(runtime.metastore, caller, body)
    check_grant(caller, kind, target, perms)
    expires_at = (
        None if body.expires_in_seconds is None else utcnow() + dt.timedelta(seconds=body.expires_in_seconds)
    )
    idem = idem_context(caller.token_id, key, "POST /v1/tokens", body)
    issued = runtime.metastore.issue_token(
        kind=kind,
        name=body.name,
        tenant_id=None if target is None else target.tenant_id,
        project_id=None if target is None else target.project_id,
        environment_id=None if target is None else target.environment_id,
        permissions=sorted(perms),
        expires_at=expires_at,
        created_by=caller.token_id,
        idem=idem,
    )
    if issued.secret is None:
        response.status_code = status.HTTP_200_OK
    return views.issued_token(issued.token, issued.secret)


@router.get("", operation_id="listTokens", response_model=w.TokenList)
def list_tokens(
    caller: Caller,
    runtime: Runtime,
    tenant_id: Annotated[str | None, Query()] = None,
    environment_id: Annotated[str | None, Query()] = None,
    kind: Annotated[w.TokenKindName | None, Query()] = None,
) -> w.TokenList:
    if caller.is_operator:
        rows = runtime.metastore.list_tokens(tenant_id=tenant_id, environment_id=environment_id, kind=kind)
    else:
        if not caller.has(Permission.ADMIN):
            raise Forbidden("listing tokens needs the admin permission", code="permission_missing")
        # The caller's own scope bounds the listing whatever the query says.
        rows = runtime.metastore.list_tokens(
            tenant_id=caller.tenant_id,
            project_id=caller.project_id,
            environment_id=caller.environment_id or environment_id,
            kind=kind,
        )
    return w.TokenList(items=[views.token(r) for r in rows])


@router.get("/{token_id}", operation_id="getToken", response_model=w.Token)
def get_token(token_id: str, caller: Caller, runtime: Runtime) -> w.Token:
    row = runtime.metastore.get_token(token_id)
    if row.id != caller.token_id:
        _require_manage(caller, row)
    return views.token(row)


@router.post(
    "/{token_id}/rotate",
    operation_id="rotateToken",
    status_code=status.HTTP_201_CREATED,
    response_model=w.TokenRotation,
    responses=problem_responses(409, 422),
)
def rotate_token(
    token_id: str, body: w.TokenRotate, caller: Caller, runtime: Runtime, key: IdemKey, response: Response
) -> w.TokenRotation:
    row = runtime.metastore.get_token(token_id)
    _require_manage(caller, row)
    expires_at = (
        None if body.expires_in_seconds is None else utcnow() + dt.timedelta(seconds=body.expires_in_seconds)
    )
    idem = idem_context(caller.token_id, key, f"POST /v1/tokens/{token_id}/rotate", body)
    issued, previous = runtime.metastore.rotate_token(
        token_id,
        grace_seconds=body.grace_seconds,
        expires_at=expires_at,
        created_by=caller.token_id,
        idem=idem,
    )
    if issued.secret is None:
        response.status_code = status.HTTP_200_OK
    return w.TokenRotation(
        replacement=views.issued_token(issued.token, issued.secret), previous=views.token(previous)
    )


@router.post("/{token_id}/revoke", operation_id="revokeToken", response_model=w.Token)
def revoke_token(token_id: str, caller: Caller, runtime: Runtime) -> w.Token:
    row = runtime.metastore.get_token(token_id)
    if row.id != caller.token_id:  # any token may revoke itself
        _require_manage(caller, row)
    return views.token(runtime.metastore.revoke_token(token_id))
