"""Workload API: projection batches, one relation's public rows for one root.

``PUT /projection-batches/{batch_id}`` carries one batch: an Arrow IPC stream whose schema is
exactly the relation's public schema, its identity in ``X-Baml-*`` headers
(:class:`formats.boundary_wire.ProjectionBatchHeaders`). ``POST /projection-batch-sets`` carries
many, each answered on its own with the PUT's outcome, and ClickHouse sees one insert per
relation per request instead of two inserts per batch. Two encodings of the set: binary
(``formats.batch_set_body``: one Arrow IPC stream per relation and schema, what the worker
sends; the schema and the scope are checked once per group, ``facts.group_check``), and JSON
(each batch's identity fields and its body in base64, checked batch by batch like the PUT).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.boundary import models as m
from api.boundary.deps import BoundaryRuntime, Runtime, Workload, WorkloadCaller
from api.boundary.facts import access
from api.boundary.facts.batch_check import (
    BatchRejected,
    check_digest,
    check_schema,
    check_scope,
    read_ipc,
    relation_of,
)
from api.boundary.facts.group_check import check_group
from api.boundary.facts.store import BatchIdentity, BatchState, Item, RowSlice
from api.common.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    problem_body,
    problem_responses,
)
from api.common.request_id import request_id_of
from formats import boundary_wire as w
from formats.batch_set_body import END_OF_STREAM, DecodedGroup, decode_batch_set
from formats.errors import FormatError

router = APIRouter(tags=["projection"], responses=problem_responses(400, 401, 403, 404, 409, 413))

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


def _too_large(limit: int, what: str = "batch body") -> PayloadTooLarge:
    return PayloadTooLarge(
        f"{what} exceeds {limit} bytes", code="batch_too_large", remedy="Split the batch into partitions."
    )


def _headers_invalid(exc: ValidationError) -> BadRequest:
    names_of = w.ProjectionBatchHeaders.header_names()
    fields = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")})
    names = ", ".join(names_of.get(f, f) for f in fields)
    return BadRequest(f"invalid batch headers: {names or 'headers'}", code="batch_headers_invalid")


Checked = Item


def check_batch(
    runtime: BoundaryRuntime,
    caller: WorkloadCaller,
    batch_id: str,
    ident: w.ProjectionBatchHeaders,
    body: bytes,
    envs: dict[str, m.Environment] | None = None,
) -> Checked:
    """Every check of one batch before the store (the PUT and the set share it), in the documented
    order: environment, generation, size, digest, relation, schema, row count, scope. Raises
    :class:`ApiError`."""
    env = envs.get(ident.environment_id) if envs is not None else None
    if env is None:
        env = access.own_environment(runtime, caller, ident.environment_id)
        if envs is not None:
            envs[ident.environment_id] = env
    access.writable_generation(env, ident.generation)
    limit = runtime.settings.projection_batch_max_bytes
    if len(body) > limit:
        raise _too_large(limit)
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
    except BatchRejected as exc:
        raise rejected(exc) from None
    return (
        BatchIdentity(batch_id, rel.name, ident.catalog_version, ident.root_id, ident.content_digest),
        scope,
        table,
    )


def _state(state: BatchState) -> w.ProjectionBatchState:
    return w.ProjectionBatchState(
        batch_id=state.batch_id,
        rows=state.rows,
        generation=state.generation,
        relation=state.relation,
        content_digest=state.content_digest,
    )


@router.put(
    "/projection-batches/{batch_id}",
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
        raise _headers_invalid(exc) from None
    limit = runtime.settings.projection_batch_max_bytes
    declared = request.headers.get("content-length")
    # The environment and generation are checked before the body is read.
    env = access.own_environment(runtime, caller, ident.environment_id)
    access.writable_generation(env, ident.generation)
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = await request.body()
    checked = check_batch(runtime, caller, batch_id, ident, body, {env.id: env})
    store = await run_in_threadpool(runtime.fact_store)
    result = (await run_in_threadpool(store.ingest_many, [checked]))[0]
    if isinstance(result, BatchRejected):
        raise rejected(result)
    return _state(result)


def _inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its ``$defs`` inlined (the route parses the body itself, so
    FastAPI would not register the item schema as a component)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)  # type: ignore[no-any-return]


class _SetEnvelope(BaseModel):
    """The set's outer shape, items unparsed: each item is validated on its own so one malformed
    batch is answered ``batch_headers_invalid`` without refusing its neighbours."""

    model_config = ConfigDict(extra="forbid")
    batches: list[dict[str, Any]] = Field(min_length=1, max_length=w.PROJECTION_BATCH_SET_MAX)


def _outcome_problem(batch_id: str, err: ApiError, request_id: str | None) -> w.ProjectionBatchSetOutcome:
    problem = problem_body(
        status=err.status,
        code=err.error_code,
        title=err.title,
        detail=err.detail,
        request_id=request_id,
        retryable=err.retryable,
        remedy=err.remedy,
    )
    return w.ProjectionBatchSetOutcome(
        batch_id=batch_id, status=err.status, problem=w.Problem.model_validate(problem)
    )


def ingest_set(
    runtime: BoundaryRuntime, caller: WorkloadCaller, raw: list[dict[str, Any]], request_id: str | None
) -> w.ProjectionBatchSetResult:
    """Check every batch like the PUT, then one store call for those that passed (pure of HTTP)."""
    outcomes: list[w.ProjectionBatchSetOutcome | None] = [None] * len(raw)
    checked: list[Checked] = []
    at: list[int] = []
    envs: dict[str, m.Environment] = {}
    for i, item in enumerate(raw):
        bid = item.get("batch_id")
        name = bid if isinstance(bid, str) and len(bid) <= 128 else ""
        try:
            try:
                parsed = w.ProjectionBatchSetItem.model_validate(item)
            except ValidationError as exc:
                raise _headers_invalid(exc) from None
            headers = w.ProjectionBatchHeaders.model_validate(parsed.model_dump(exclude={"batch_id", "body"}))
            checked.append(check_batch(runtime, caller, parsed.batch_id, headers, parsed.body, envs))
            at.append(i)
        except ApiError as err:
            outcomes[i] = _outcome_problem(name, err, request_id)
    if checked:
        for i, result in zip(at, runtime.fact_store().ingest_many(checked), strict=True):
            if isinstance(result, BatchRejected):
                outcomes[i] = _outcome_problem(raw[i]["batch_id"], rejected(result), request_id)
            else:
                outcomes[i] = w.ProjectionBatchSetOutcome(
                    batch_id=result.batch_id, status=200, state=_state(result)
                )
    done = [o for o in outcomes if o is not None]
    visible = sum(1 for o in done if o.status == 200)
    return w.ProjectionBatchSetResult(results=done, visible=visible, rejected=len(done) - visible)


_SET_EXAMPLE = w.example(w.ProjectionBatchSet)


@router.post(
    "/projection-batch-sets",
    operation_id="postProjectionBatchSet",
    response_model=w.ProjectionBatchSetResult,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": (
                "Many projection batches; each answered on its own, in order. Binary"
                f" ({w.BATCH_SET_MEDIA_TYPE}, what the worker sends): magic BAMLBST1, u16 version 1,"
                " u32 manifest length, the ProjectionBatchSetManifest JSON, then one Arrow IPC stream"
                " per group (formats/batch_set_body.py); answers in manifest order. JSON"
                " (application/json): ProjectionBatchSet, bodies in base64; answers in request order."
            ),
            "content": {
                w.BATCH_SET_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
                "application/json": {
                    "schema": _inline_schema(w.ProjectionBatchSet),
                    "example": _SET_EXAMPLE,
                },
            },
        }
    },
)
async def post_projection_batch_set(request: Request, caller: Workload, runtime: Runtime) -> Response:
    # The whole request is capped by the per-batch limit: the client splits larger sets.
    limit = runtime.settings.projection_batch_max_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, "batch set")
    raw = await request.body()
    if len(raw) > limit:
        raise _too_large(limit, "batch set")
    binary = request.headers.get("content-type", "").split(";")[0].strip() == w.BATCH_SET_MEDIA_TYPE
    parse = _parse_and_ingest_binary if binary else _parse_and_ingest
    result = await run_in_threadpool(parse, runtime, caller, raw, request_id_of(request))
    # Built from checked values: serialised once, not validated again against the response model.
    return Response(result.model_dump_json(), media_type="application/json")


def _parse_and_ingest(
    runtime: BoundaryRuntime, caller: WorkloadCaller, raw: bytes, request_id: str | None
) -> w.ProjectionBatchSetResult:
    # Parsing a set of a few MiB takes milliseconds: off the event loop, like the checks.
    try:
        envelope = _SetEnvelope.model_validate_json(raw)
    except ValidationError:
        raise BadRequest(
            f"the body must be a JSON object {{batches: [1..{w.PROJECTION_BATCH_SET_MAX} batches]}}",
            code="batch_set_invalid",
            remedy="Send ProjectionBatchSet JSON.",
        ) from None
    return ingest_set(runtime, caller, envelope.batches, request_id)


def _parse_and_ingest_binary(
    runtime: BoundaryRuntime, caller: WorkloadCaller, raw: bytes, request_id: str | None
) -> w.ProjectionBatchSetResult:
    try:
        _, groups = decode_batch_set(raw)
    except FormatError as exc:
        raise BadRequest(
            f"binary batch set: {exc.reason} at offset {exc.offset}: {exc.message}",
            code="batch_set_invalid",
            remedy=f"Send {w.BATCH_SET_MEDIA_TYPE} as formats.batch_set_body.encode_batch_set writes it.",
        ) from None
    return ingest_groups(runtime, caller, groups, request_id)


def _visible(state: BatchState) -> dict[str, Any]:
    # A dict, validated once with the whole answer: pydantic validates nested dicts in Rust,
    # faster than building (or model_construct-ing) a model per batch.
    return {
        "batch_id": state.batch_id,
        "status": 200,
        "state": {
            "batch_id": state.batch_id,
            "rows": state.rows,
            "generation": state.generation,
            "relation": state.relation,
            "content_digest": state.content_digest,
        },
    }


def ingest_groups(
    runtime: BoundaryRuntime, caller: WorkloadCaller, groups: list[DecodedGroup], request_id: str | None
) -> w.ProjectionBatchSetResult:
    """A binary set: each group checked once where the rule allows (``group_check``), each batch
    answered with the PUT's outcome, in manifest order; one store call for all that passed."""
    total = sum(len(d.group.batches) for d in groups)
    outcomes: list[w.ProjectionBatchSetOutcome | dict[str, Any] | None] = [None] * total
    checked: list[Checked] = []
    at: list[int] = []
    envs: dict[str, m.Environment] = {}
    limit = runtime.settings.projection_batch_max_bytes
    base = 0
    for d in groups:
        g = d.group
        first, base = base, base + len(g.batches)
        try:
            env = envs.get(g.environment_id)
            if env is None:
                env = envs[g.environment_id] = access.own_environment(runtime, caller, g.environment_id)
            access.writable_generation(env, g.generation)
        except ApiError as err:
            for k, entry in enumerate(g.batches):
                outcomes[first + k] = _outcome_problem(entry.batch_id, err, request_id)
            continue
        scope = access.scope_of(env, g.generation)
        candidates = []
        for k, entry in enumerate(g.batches):
            if g.schema_length + entry.length + len(END_OF_STREAM) > limit:
                outcomes[first + k] = _outcome_problem(entry.batch_id, _too_large(limit), request_id)
            else:
                candidates.append(k)
        result = check_group(d, candidates, scope)
        for k, exc in result.rejected.items():
            outcomes[first + k] = _outcome_problem(g.batches[k].batch_id, rejected(exc), request_id)
        if result.table is None:
            continue
        for c in result.checked:
            entry = g.batches[c.k]
            ident = BatchIdentity(
                entry.batch_id, g.relation, g.catalog_version, entry.root_id, entry.content_digest
            )
            checked.append((ident, scope, RowSlice(result.table, c.offset, c.rows)))
            at.append(first + c.k)
    if checked:
        states = runtime.fact_store().ingest_many(checked)
        for i, (ident, _, _), state in zip(at, checked, states, strict=True):
            if isinstance(state, BatchRejected):
                outcomes[i] = _outcome_problem(ident.batch_id, rejected(state), request_id)
            else:
                outcomes[i] = _visible(state)
    done = [o for o in outcomes if o is not None]
    visible = sum(1 for o in done if isinstance(o, dict))
    return w.ProjectionBatchSetResult.model_validate(
        {"results": done, "visible": visible, "rejected": len(done) - visible}
    )
