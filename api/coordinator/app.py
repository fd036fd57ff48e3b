"""The query coordinator's FastAPI app. Today it answers ``GET /healthz`` only; ``/v1/query`` and
the query-job endpoints arrive in a later issue."""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel


class Health(BaseModel):
    status: str
    service: str


def create_app() -> FastAPI:
    app = FastAPI(title="BAML Studio query coordinator", version="0.1.0")

    @app.get("/healthz", operation_id="coordinator_healthz", tags=["health"])
    def healthz() -> Health:
        return Health(status="ok", service="coordinator")

    return app


app = create_app()
