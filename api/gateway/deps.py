"""FastAPI dependencies of the gateway: the runtime and the authenticated, rate-limited publisher."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from api.common.auth import bearer_token, hash_token
from api.common.errors import TooManyRequests
from api.gateway.publisher_auth import PublisherIdentity, authenticate_publisher
from api.gateway.runtime import GatewayRuntime


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
