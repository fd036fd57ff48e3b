"""The query coordinator's FastAPI app: ``GET /healthz``, ``POST /v1/query`` (NDJSON) and the
background query jobs (``/v1/query-jobs``).

Callers present Boundary user tokens (``api.coordinator.user_auth``); CORS admits the configured
Studio origins only. Errors before the first byte of a response are ``application/problem+json``;
once a query streams, its status is 200 and every failure is reported in the final
``queryOutcome`` record (formats/query_output.py), never by cutting the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from pydantic import BaseModel

from api.common.errors import install_error_handlers
from api.common.request_id import REQUEST_ID_HEADER, RequestIdMiddleware
from api.coordinator import routes_jobs, routes_query
from api.coordinator.runtime import CoordinatorRuntime
from api.coordinator.settings import CoordinatorSettings, get_settings


class Health(BaseModel):
    status: str
    service: str


def create_app(
    settings: CoordinatorSettings | None = None, runtime: CoordinatorRuntime | None = None
) -> FastAPI:
    """The app; ``runtime`` (built from ``settings`` when absent) is closed when the app stops."""
    settings = settings or (runtime.settings if runtime else get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await routes_jobs.close_temporal(app)
        app.state.runtime.close()

    app = FastAPI(title="BAML Studio query coordinator", version="0.3.0", lifespan=lifespan)
    app.state.runtime = runtime or CoordinatorRuntime(settings)
    app.add_middleware(RequestIdMiddleware)
    # Added last, so it runs first: preflights are answered before anything else.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.cors_origins),
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", REQUEST_ID_HEADER],
        expose_headers=[REQUEST_ID_HEADER, "Location"],
        max_age=600,
    )
    install_error_handlers(app)

    @app.get("/healthz", operation_id="coordinator_healthz", tags=["health"])
    def healthz() -> Health:
        return Health(status="ok", service="coordinator")

    app.include_router(routes_query.router)
    app.include_router(routes_jobs.router)
    return app


def __getattr__(name: str) -> Any:
    # ``python -m api.coordinator`` serves ``api.coordinator.app:app``; built on first access.
    if name == "app":
        built = create_app()
        globals()["app"] = built
        return built
    raise AttributeError(name)
