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

from api.common.auth import bearer_token, user_token_scope
from api.coordinator.runtime import BOUNDARY_FAILURES, BoundaryUnavailable, CoordinatorRuntime
from api.dataplane.boundary_client import BoundaryError
from formats.object_keys import Scope

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
    token_id, scope = user_token_scope(
        info,
        "query",
        refused="querying needs a user token with the query permission",
        refused_code="token_not_for_queries",
        remedy="Use a user token with the query permission.",
    )
    return QueryCaller(token_id, scope)


Caller = Annotated[QueryCaller, Depends(authenticate)]
