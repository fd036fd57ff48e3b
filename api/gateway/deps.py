"""FastAPI dependencies of the gateway: the runtime, the authenticated, rate-limited publisher,
the erasure caller (a user token with the ``erasure`` permission) and the Temporal client."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from temporalio.client import Client as TemporalClient

from api.common.auth import bearer_token, hash_token, user_token_scope
from api.common.errors import ServiceUnavailable, TooManyRequests
from api.gateway.publisher_auth import (
    _BOUNDARY_FAILURES,
    PublisherIdentity,
    _boundary_failed,
    authenticate_publisher,
)
from api.gateway.runtime import GatewayRuntime
from formats.object_keys import Scope

_log = logging.getLogger(__name__)


class RateLimited(TooManyRequests):
    def __init__(self, retry_after: str) -> None:
        super().__init__(
            "this token sent more requests than its rate limit allows",
            remedy=f"Back off with jitter; retry after {retry_after} s.",
        )
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": self.retry_after}


def get_runtime(request: Request) -> GatewayRuntime:
    runtime: GatewayRuntime = request.app.state.runtime
    return runtime


Runtime = Annotated[GatewayRuntime, Depends(get_runtime)]


def get_publisher(
    runtime: Runtime, authorization: Annotated[str | None, Header(include_in_schema=False)] = None
) -> PublisherIdentity:
    token = bearer_token(authorization)
    # Limit before asking Boundary, so a flood of requests never becomes a flood of introspections.
    decision = runtime.limiter.acquire(hash_token(token))
    if not decision.allowed:
        raise RateLimited(decision.retry_after_header)
    return authenticate_publisher(runtime.boundary, token)


Publisher = Annotated[PublisherIdentity, Depends(get_publisher)]


# --- erasures ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErasureCaller:
    """A user token with the ``erasure`` permission, bound to one environment."""

    token_id: str
    scope: Scope


def get_erasure_caller(
    runtime: Runtime, authorization: Annotated[str | None, Header(include_in_schema=False)] = None
) -> ErasureCaller:
    token = bearer_token(authorization)
    decision = runtime.limiter.acquire(hash_token(token))
    if not decision.allowed:
        raise RateLimited(decision.retry_after_header)
    try:
        info = runtime.boundary.introspect_token(token)
    except _BOUNDARY_FAILURES as exc:
        raise _boundary_failed("validate the token", exc) from None
    token_id, scope = user_token_scope(
        info,
        "erasure",
        refused="erasures need a user token with the erasure permission",
        refused_code="token_not_for_erasure",
        remedy="Ask an admin of the environment for a user token with the erasure permission.",
    )
    return ErasureCaller(token_id, scope)


EraseCaller = Annotated[ErasureCaller, Depends(get_erasure_caller)]


async def get_temporal(request: Request) -> TemporalClient:
    """The process's Temporal client, connected on first use (the gateway starts without Temporal)."""
    state = request.app.state
    lock: asyncio.Lock = state.__dict__.setdefault("_temporal_lock", asyncio.Lock())
    async with lock:
        client: TemporalClient | None = getattr(state, "temporal_client", None)
        if client is None:
            settings = get_runtime(request).settings
            try:
                client = await TemporalClient.connect(
                    settings.temporal_address, namespace=settings.temporal_namespace
                )
            except Exception as exc:  # connection refused, TLS, DNS: all mean "not reachable now"
                _log.warning("temporal connect failed error=%s", type(exc).__name__)
                raise ServiceUnavailable(
                    "the workflow engine could not be reached",
                    code="temporal_unavailable",
                    remedy="Retry later.",
                ) from None
            state.temporal_client = client
        return client


Temporal = Annotated[TemporalClient, Depends(get_temporal)]
