"""Who is querying: a Boundary user token, introspected through the workload API and cached briefly.

401 for a missing, malformed or inactive token (unknown, expired, revoked and foreign tokens look
alike); 403 for an active token that is not a user token with the ``query`` permission or that
names no environment; 503 when Boundary cannot be reached.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request

from api.common.auth import TokenKind, bearer_token
from api.common.boundary_client import BoundaryError
from api.common.errors import Forbidden, Unauthenticated
from api.coordinator.runtime import BOUNDARY_FAILURES, BoundaryUnavailable, CoordinatorRuntime
from formats.object_keys import InvalidKeyError, Scope

_log = logging.getLogger("baml_studio.coordinator")


@dataclass(frozen=True)
class QueryCaller:
    token_id: str
    scope: Scope


def runtime_of(request: Request) -> CoordinatorRuntime:
    rt: CoordinatorRuntime = request.app.state.runtime
    return rt


Runtime = Annotated[CoordinatorRuntime, Depends(runtime_of)]


def authenticate(runtime: Runtime, authorization: Annotated[str | None, Header()] = None) -> QueryCaller:
    token = bearer_token(authorization)
    try:
        info = runtime.boundary.introspect_token(token)
    except BOUNDARY_FAILURES as exc:
        code = exc.code if isinstance(exc, BoundaryError) else type(exc).__name__
        _log.warning("token introspection failed error=%s", code)
        raise BoundaryUnavailable(
            "the control plane could not be reached to validate the token", remedy="Back off and retry."
        ) from None
    if not info.active:
        raise Unauthenticated(
            "token is unknown, expired or revoked",
            code="token_inactive",
            remedy="Sign in again or issue a new user token.",
        )
    if info.kind != TokenKind.USER.value or "query" not in info.permissions:
        raise Forbidden(
            "querying needs a user token with the query permission",
            code="token_not_for_queries",
            remedy="Use a user token with the query permission.",
        )
    if not (info.tenant_id and info.project_id and info.environment_id):
        raise Forbidden(
            "the token is not bound to one environment",
            code="token_without_environment",
            remedy="Issue a user token for the environment you want to query.",
        )
    try:
        scope = Scope(info.tenant_id, info.project_id, info.environment_id)
    except InvalidKeyError:
        raise Forbidden("the token's scope has no data here", code="scope_invalid") from None
    return QueryCaller(info.token_id or "", scope)


Caller = Annotated[QueryCaller, Depends(authenticate)]
