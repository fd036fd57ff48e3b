"""Workload API: ``PUT /projection-batches/{batch_id}``: one relation's public rows for one root.

The body is an Arrow IPC stream whose schema is exactly the relation's public schema; the
identity travels in ``X-Baml-*`` headers (:class:`formats.boundary_wire.ProjectionBatchHeaders`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from api.boundary.deps import Runtime, Workload
from api.boundary.facts import access
from api.boundary.facts.batch_check import (
    BatchRejected,
    check_digest,
    check_schema,
    check_scope,
    read_ipc,
    relation_of,
)
from api.boundary.facts.store import BatchIdentity
from api.common.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    problem_responses,
)
from formats import boundary_wire as w

router = APIRouter(
    prefix="/projection-batches",
    tags=["projection"],
    responses=problem_responses(400, 401, 403, 404, 409, 413),
)

_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": "Arrow IPC stream; schema = the relation's public schema for the catalog version.",
        "content": {w.ARROW_STREAM_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


def rejected(exc: BatchRejected) -> ApiError:
    cls: type[ApiError] = {403: Forbidden, 404: NotFound, 409: Conflict}.get(exc.status, BadRequest)
    return cls(exc.detail, code=exc.code, remedy="Build the batch from the catalog's public schema.")


@router.put(
    "/{batch_id}",
    operation_id="putProjectionBatch",
    response_model=w.ProjectionBatchState,
    openapi_extra=_BODY_DOC,
)
async def put_projection_batch(
    request: Request,
    caller: Workload,
    runtime: Runtime,
    batch_id: Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")],
    generation: Annotated[str, Header(alias=w.HEADER_GENERATION, description="Target generation.")],
    catalog_version: Annotated[str, Header(alias=w.HEADER_CATALOG_VERSION, description="Catalog version.")],
    relation: Annotated[str, Header(alias=w.HEADER_RELATION, description="Public relation, e.g. calls_v1.")],
    root_id: Annotated[
        str,
        Header(alias=w.HEADER_ROOT_ID, description="Execution id (program id for function_definitions_v1)."),
    ],
    content_digest: Annotated[
        str, Header(alias=w.HEADER_CONTENT_DIGEST, description="sha256:<hex> of the body.")
    ],
    environment_id: Annotated[
        str, Header(alias=w.HEADER_ENVIRONMENT_ID, description="Environment the rows belong to.")
    ],
    partition: Annotated[
        str | None, Header(alias=w.HEADER_PARTITION, description="Partition of the root's rows.")
    ] = None,
    row_count: Annotated[
        str | None, Header(alias=w.HEADER_ROW_COUNT, description="Rows in the body; checked.")
    ] = None,
) -> w.ProjectionBatchState:
    try:
        ident = w.ProjectionBatchHeaders(
            generation=generation,  # type: ignore[arg-type]
            catalog_version=catalog_version,  # type: ignore[arg-type]
            relation=relation,
            root_id=root_id,
            content_digest=content_digest,
            environment_id=environment_id,
            partition=partition,  # type: ignore[arg-type]
            row_count=row_count,  # type: ignore[arg-type]
        )
    except ValidationError as exc:
        fields = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
        names = ", ".join(
            w.ProjectionBatchHeaders.header_names()[f]
            for f in fields
            if f in w.ProjectionBatchHeaders.header_names()
        )
        raise BadRequest(
            f"invalid batch headers: {names or 'headers'}", code="batch_headers_invalid"
        ) from None
    env = access.own_environment(runtime, caller, ident.environment_id)
    access.writable_generation(env, ident.generation)
    limit = runtime.settings.projection_batch_max_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"batch body exceeds {limit} bytes",
            code="batch_too_large",
            remedy="Split the batch into partitions.",
        )
    body = await request.body()
    if len(body) > limit:
        raise PayloadTooLarge(
            f"batch body exceeds {limit} bytes",
            code="batch_too_large",
            remedy="Split the batch into partitions.",
        )
    scope = access.scope_of(env, ident.generation)
    try:
        check_digest(body, ident.content_digest)
        rel = relation_of(ident.relation, ident.catalog_version)
        table = check_schema(read_ipc(body), rel, ident.catalog_version)
        if ident.row_count is not None and ident.row_count != table.num_rows:
            raise BatchRejected(
                "row_count_mismatch", f"{w.HEADER_ROW_COUNT} differs from the rows in the body"
            )
        check_scope(table, scope, rel, ident.root_id)
        store = await run_in_threadpool(runtime.fact_store)
        identity = BatchIdentity(
            batch_id, rel.name, ident.catalog_version, ident.root_id, ident.content_digest
        )
        state = await run_in_threadpool(store.ingest, identity, scope, table)
    except BatchRejected as exc:
        raise rejected(exc) from None
    return w.ProjectionBatchState(
        batch_id=state.batch_id,
        rows=state.rows,
        generation=state.generation,
        relation=state.relation,
        content_digest=state.content_digest,
    )
