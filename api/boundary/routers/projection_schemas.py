"""Workload API: the registered relation schemas of a catalog version."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.boundary.deps import Runtime, Workload
from api.common.errors import problem_responses
from formats import boundary_wire as w
from formats import catalog

router = APIRouter(
    prefix="/projection-schemas", tags=["projection"], responses=problem_responses(401, 403, 404)
)


@router.get(
    "/{catalog_version}", operation_id="getProjectionSchema", response_model=w.ProjectionSchemaDocument
)
def get_projection_schema(
    catalog_version: int, caller: Workload, runtime: Runtime, response: Response
) -> w.ProjectionSchemaDocument:
    runtime.metastore.get_catalog_version(catalog_version)  # 404 unless registered
    # A registered catalog version never changes: let callers cache it.
    response.headers["Cache-Control"] = "private, max-age=86400, immutable"
    return w.ProjectionSchemaDocument.model_validate(catalog.catalog_document(catalog_version))
