"""Boundary's two FastAPI apps: the control API (user/operator tokens, plain HTTP in the embedded
stack) and the workload API (mTLS + workload JWT), sharing one runtime."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from api.boundary.deps import BoundaryRuntime
from api.boundary.metastore import Metastore
from api.boundary.recording import RequestRecorder
from api.boundary.routers import (
    catalog_versions,
    deployments,
    environment_settings,
    environments,
    projection_batches,
    projection_erasures,
    projection_schemas,
    projects,
    query_snapshots,
    resident_queries,
    tenants,
    token_introspections,
    tokens,
    whoami,
    workload_environments,
    workload_tokens,
)
from api.boundary.settings import BoundarySettings
from api.common.errors import install_error_handlers
from api.common.request_id import REQUEST_ID_HEADER, RequestIdMiddleware
from api.common.workload_identity import CertificateVerifier, WorkloadJwtSigner, ensure_ca
from formats import boundary_wire as w

CONTROL_ROUTERS = (
    tenants,
    projects,
    environments,
    environment_settings,
    deployments,
    tokens,
    whoami,
    catalog_versions,
)
WORKLOAD_ROUTERS = (
    workload_tokens,
    projection_schemas,
    query_snapshots,
    token_introspections,
    workload_environments,
    projection_batches,
    resident_queries,
    projection_erasures,
)


def build_runtime(settings: BoundarySettings, *, with_workload_identity: bool = True) -> BoundaryRuntime:
    """Open the metastore (migrating it), register catalog versions, load the CA and JWT key."""
    metastore = Metastore(settings.resolved_metastore_url())
    metastore.register_catalog_versions()
    runtime = BoundaryRuntime(settings=settings, metastore=metastore)
    if with_workload_identity:
        ca_cert, _ = ensure_ca(settings.resolved_tls_dir())
        runtime.verifier = CertificateVerifier(ca_cert)
        runtime.signer = WorkloadJwtSigner(
            settings.resolved_jwt_key_path(), ttl_seconds=settings.workload_jwt_ttl_seconds
        )
    return runtime


def _request_id_param() -> dict[str, Any]:
    return {
        "name": REQUEST_ID_HEADER,
        "in": "header",
        "required": False,
        "description": "Caller-generated request id, echoed in the response; generated when missing.",
        "schema": {"type": "string", "maxLength": 128},
    }


def _openapi_factory(app: FastAPI, title: str, description: str) -> Any:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=title, version=w.API_VERSION, description=description, routes=app.routes, tags=None
        )
        schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = (
            w.Problem.model_json_schema()
        )
        for path_item in schema.get("paths", {}).values():
            for op in path_item.values():
                if isinstance(op, dict) and "operationId" in op:
                    params = op.setdefault("parameters", [])
                    if not any(p.get("name") == REQUEST_ID_HEADER for p in params):
                        params.append(_request_id_param())
        app.openapi_schema = schema
        return schema

    return openapi


def _base_app(runtime: BoundaryRuntime | None, title: str, description: str) -> FastAPI:
    app = FastAPI(title=title, version=w.API_VERSION, description=description)
    app.state.runtime = runtime
    app.add_middleware(RequestIdMiddleware)
    record_path = runtime.settings.record_requests_path if runtime is not None else None
    if record_path is not None:  # test-only (docs/operations.md): added last, so outermost
        app.add_middleware(RequestRecorder, path=record_path, app_name=title)
    install_error_handlers(app)
    app.openapi = _openapi_factory(app, title, description)  # type: ignore[method-assign]
    return app


CONTROL_DESCRIPTION = (
    "Boundary control API: tenants, projects, environments, deployments, tokens, catalog versions, "
    "the active projection generation and publisher config. Bearer user or operator tokens."
)
WORKLOAD_DESCRIPTION = (
    "Boundary workload API, called only by data-plane workloads over mTLS with a workload JWT from "
    "POST /workload-tokens. Only non-value fields cross this API."
)


def create_control_app(runtime: BoundaryRuntime | None) -> FastAPI:
    app = _base_app(runtime, "BAML Boundary control API", CONTROL_DESCRIPTION)

    @app.get("/healthz", operation_id="controlHealthz", response_model=w.Healthz, tags=["health"])
    def healthz() -> w.Healthz:
        return w.Healthz(status="ok", service="boundary-control")

    for module in CONTROL_ROUTERS:
        app.include_router(module.router)
    return app


def create_workload_app(runtime: BoundaryRuntime | None) -> FastAPI:
    app = _base_app(runtime, "BAML Boundary workload API", WORKLOAD_DESCRIPTION)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> w.Healthz:
        return w.Healthz(status="ok", service="boundary-workload")

    for module in WORKLOAD_ROUTERS:
        app.include_router(module.router)
    return app
