"""Control API: the caller's own token, scope and permissions."""

from __future__ import annotations

from fastapi import APIRouter

from api.boundary import views
from api.boundary.deps import Caller, Runtime
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(prefix="/v1/whoami", tags=["tokens"], responses=problem_responses(401, 403))


@router.get("", operation_id="whoami", response_model=w.Token)
def whoami(caller: Caller, runtime: Runtime) -> w.Token:
    return views.token(runtime.metastore.get_token(caller.token_id))
