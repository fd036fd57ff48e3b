"""The data-plane gateway's FastAPI app: ``GET /healthz``, the publisher's two endpoints
(``GET /v1/publisher/config``, ``POST /v1/uploads/authorize``) and the erasure endpoints
(docs/erasure.md).

Every error is ``application/problem+json`` (``api.common.errors``). The guide's status table
says a malformed authorize request is a 400, so request validation renders 400 here (not the
422 other services use), naming the fields that failed and never echoing their input.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from api.common.errors import BadRequest, PayloadTooLarge, install_error_handlers, problem_response
from api.common.request_id import RequestIdMiddleware
from api.gateway import routes, routes_erasures
from api.gateway.runtime import GatewayRuntime
from api.gateway.settings import GatewaySettings, get_settings
from formats import boundary_wire as bw

DESCRIPTION = (
    "Data-plane gateway. Publishers (PublisherToken: a bearer token bound to one environment) read "
    "their configuration and authorize uploads; every key is computed from the token's scope and "
    "every upload is a create-only presigned S3 PUT."
)


class Health(BaseModel):
    status: str
    service: str


async def _validation_as_400(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for item in exc.errors():
        loc = ".".join(str(part) for part in item.get("loc", ()))
        problems.append(f"{loc}: {item.get('msg', 'invalid')}")
    err = BadRequest(
        "; ".join(problems) or "request failed validation",
        code="malformed_request",
        remedy="Report a bug in the publisher; drop this request and retry at the next flush.",
    )
    return problem_response(request, err)


class BodyLimitMiddleware:
    """Refuse a declared body larger than ``limit`` before reading it (413)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", []):
                if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                    err = PayloadTooLarge(
                        f"the request body is larger than {self.limit} bytes",
                        code="request_too_large",
                        remedy="Split the objects over several authorize calls.",
                    )
                    await problem_response(Request(scope), err)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _openapi(app: FastAPI) -> Any:
    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes)
        components = schema.setdefault("components", {})
        components.setdefault("schemas", {})["Problem"] = bw.Problem.model_json_schema()
        components["securitySchemes"] = {
            "PublisherToken": {"type": "http", "scheme": "bearer", "description": "bst_pub_ token"},
            "UserToken": {"type": "http", "scheme": "bearer", "description": "bst_usr_ token with erasure"},
        }
        for path, item in schema.get("paths", {}).items():
            if path.startswith("/v1/"):
                scheme = "UserToken" if path.startswith("/v1/erasures") else "PublisherToken"
                for op in item.values():
                    op["security"] = [{scheme: []}]
        app.openapi_schema = schema
        return schema

    return build


def create_app(settings: GatewaySettings | None = None, runtime: GatewayRuntime | None = None) -> FastAPI:
    """The app; ``runtime`` (built from ``settings`` when absent) is closed when the app stops."""
    settings = settings or (runtime.settings if runtime else get_settings())
    holder: dict[str, GatewayRuntime] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        rt = holder.get("runtime")
        if rt is not None:
            rt.close()

    app = FastAPI(title="BAML Studio data-plane gateway", version=bw.API_VERSION, lifespan=lifespan)
    holder["runtime"] = app.state.runtime = runtime or GatewayRuntime(settings)
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_request_bytes)
    app.add_middleware(RequestIdMiddleware)
    install_error_handlers(app)
    app.add_exception_handler(RequestValidationError, _validation_as_400)
    app.openapi = _openapi(app)  # type: ignore[method-assign]

    @app.get("/healthz", operation_id="gateway_healthz", tags=["health"])
    def healthz() -> Health:
        return Health(status="ok", service="gateway")

    app.include_router(routes.router)
    app.include_router(routes_erasures.router)
    return app


def __getattr__(name: str) -> Any:
    # ``python -m api.gateway`` serves ``api.gateway.app:app``; build it on first access so that
    # importing this module (tests, OpenAPI export) does not create S3 clients.
    if name == "app":
        built = create_app()
        globals()["app"] = built
        return built
    raise AttributeError(name)
