"""Control API: registered catalog versions (read-only; registered from formats.catalog at start)."""

from __future__ import annotations

from fastapi import APIRouter

from api.boundary import views
from api.boundary.deps import Caller, Runtime
from api.common.errors import problem_responses
from formats import boundary_wire as w

router = APIRouter(prefix="/v1/catalog-versions", tags=["catalog"], responses=problem_responses(401, 403))


@router.get("", operation_id="listCatalogVersions", response_model=w.CatalogVersionList)
def list_catalog_versions(caller: Caller, runtime: Runtime) -> w.CatalogVersionList:
    return w.CatalogVersionList(
        items=[views.catalog_version(c) for c in runtime.metastore.list_catalog_versions()]
    )


@router.get(
    "/{version}",
    operation_id="getCatalogVersion",
    response_model=w.CatalogVersion,
    responses=problem_responses(404),
)
def get_catalog_version(version: int, caller: Caller, runtime: Runtime) -> w.CatalogVersion:
    return views.catalog_version(runtime.metastore.get_catalog_version(version))
