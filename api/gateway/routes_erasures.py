"""``POST /v1/erasures`` and ``GET /v1/erasures/{erasure_id}`` (contract "Erasure").

The erasure workflow is the record: the erasure id is derived from the caller's scope and the
``Idempotency-Key``, the workflow ID from the erasure id, and the request digest and scope travel
in the workflow's memo, so the gateway keeps no state. The same key and body return the same
erasure; the same key with another body is a 409. Another environment's (or tenant's) erasure
answers 404 as if it did not exist.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.common.errors import BadRequest, IdempotencyConflict, NotFound, ServiceUnavailable, problem_responses
from api.common.idempotency import request_digest, validate_key
from api.gateway.deps import EraseCaller, ErasureCaller, Runtime, Temporal
from formats.contracts import ScopeRef, task_queue
from formats.contracts import erasure as e

_log = logging.getLogger(__name__)

router = APIRouter(tags=["erasure"], responses=problem_responses(400, 401, 403, 429, 503))

MAX_SELECTED = 10_000
Euid = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
ExecutionId = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ErasureId = Annotated[str, Path(pattern=r"^ers_[0-9a-f]{32}$")]


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: dt.datetime = Field(alias="from", description="Inclusive start (RFC 3339 with offset).")
    to: dt.datetime = Field(description="Exclusive end (RFC 3339 with offset).")

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.from_.tzinfo is None or self.to.tzinfo is None:
            raise ValueError("from and to need a UTC offset")
        if self.to <= self.from_:
            raise ValueError("to must be after from")
        return self


class ErasureRequest(BaseModel):
    """Exactly one selector. A selected execution erases the whole stream that holds it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"process_euids": ["0123456789abcdef0123456789abcdef"]}]},
    )
    process_euids: list[Euid] | None = Field(default=None, min_length=1, max_length=MAX_SELECTED)
    execution_ids: list[ExecutionId] | None = Field(default=None, min_length=1, max_length=MAX_SELECTED)
    time_range: TimeRange | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ErasureRequest:
        given = [n for n in ("process_euids", "execution_ids", "time_range") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one selector: process_euids, execution_ids or time_range")
        return self

    def selector(self) -> e.Selector:
        if self.process_euids:
            return e.Selector(process_euids=tuple(sorted(set(self.process_euids))))
        if self.execution_ids:
            return e.Selector(execution_ids=tuple(sorted(set(self.execution_ids))))
        assert self.time_range is not None
        to_ns = _ns(self.time_range.to)
        return e.Selector(time_from_ns=_ns(self.time_range.from_), time_to_ns=to_ns)


def _ns(value: dt.datetime) -> int:
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


class Erasure(BaseModel):
    erasure_id: str
    state: Literal["queued", "running", "succeeded", "failed"]
    selector: str | None = None
    streams_matched: int | None = None
    streams_deleted: int | None = None
    executions_matched: int | None = None
    step: str | None = None
    created_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    receipt: dict[str, Any] | None = Field(
        default=None, description="Per-store counts; present once succeeded."
    )
    error: dict[str, Any] | None = None


def erasure_id_for(caller: ErasureCaller, key: str) -> str:
    scope = caller.scope
    digest = hashlib.sha256(f"{scope.path}\n{key}".encode()).hexdigest()
    return "ers_" + digest[:32]


def _from_status(st: e.ErasureStatus | dict[str, Any]) -> Erasure:
    d = st if isinstance(st, dict) else st.__dict__
    ts = d.get("created_at_unix") or None
    fin = d.get("finished_at_unix")
    state: Any = d.get("state") or e.QUEUED
    return Erasure(
        erasure_id=d["erasure_id"],
        state=state,
        selector=d.get("selector_kind") or None,
        streams_matched=d.get("streams_matched"),
        streams_deleted=d.get("streams_deleted"),
        executions_matched=d.get("roots_matched"),
        step=d.get("step"),
        created_at=dt.datetime.fromtimestamp(ts, dt.UTC) if ts else None,
        finished_at=dt.datetime.fromtimestamp(fin, dt.UTC) if fin else None,
        receipt=d.get("receipt") if state == e.SUCCEEDED else None,
        error=d.get("error"),
    )


def _not_found(erasure_id: str) -> NotFound:
    return NotFound(f"erasure {erasure_id} not found", code="erasure_not_found")


async def _memo(handle: WorkflowHandle[Any, Any]) -> tuple[dict[str, Any], WorkflowExecutionStatus | None]:
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise _not_found(handle.id.removeprefix("erasure/")) from None
        raise
    return dict(await desc.memo()), desc.status


async def _read(
    handle: WorkflowHandle[Any, Any], erasure_id: str, memo: dict[str, Any], status: Any
) -> Erasure:
    if status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        return _from_status(result)
    if status == WorkflowExecutionStatus.RUNNING:
        try:
            st = await asyncio.wait_for(handle.query(e.STATUS_QUERY, result_type=e.ErasureStatus), timeout=5)
        except (TimeoutError, RPCError):
            st = None  # no worker has picked it up yet
        if st is not None:
            return _from_status(st)
        return Erasure(erasure_id=erasure_id, state="queued", selector=memo.get("selector"))
    return Erasure(
        erasure_id=erasure_id,
        state="failed",
        selector=memo.get("selector"),
        error={
            "code": "workflow_" + str(getattr(status, "name", "unknown")).lower(),
            "message": "the erasure stopped",
        },
    )


def _check_owner(memo: dict[str, Any], caller: ErasureCaller, erasure_id: str) -> None:
    if memo.get("scope") != caller.scope.path:
        raise _not_found(erasure_id)


@router.post(
    "/v1/erasures",
    operation_id="createErasure",
    status_code=202,
    response_model=Erasure,
    summary="Erase whole streams selected by process euid, execution id or time range",
    responses=problem_responses(404, 409),
)
async def create_erasure(
    body: ErasureRequest,
    caller: EraseCaller,
    runtime: Runtime,
    temporal: Temporal,
    response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Erasure:
    key = validate_key(idempotency_key)
    if key is None:
        raise BadRequest(
            "POST /v1/erasures needs an Idempotency-Key header",
            code="idempotency_key_missing",
            remedy="Send a new ULID or UUID as the Idempotency-Key; repeat it to retry.",
        )
    erasure_id = erasure_id_for(caller, key)
    digest = request_digest("POST", "/v1/erasures", body)
    scope = caller.scope
    inp = e.ErasureInput(
        erasure_id=erasure_id,
        scope=ScopeRef(scope.tenant_id, scope.project_id, scope.environment_id),
        selector=body.selector(),
        request_digest=digest,
        requested_by=caller.token_id,
    )
    memo = {"scope": scope.path, "request_digest": digest, "selector": inp.selector.kind}
    wf_id = e.erasure_workflow_id(erasure_id)
    try:
        handle = await temporal.start_workflow(
            e.ERASURE_WORKFLOW,
            inp,
            result_type=e.ErasureStatus,
            id=wf_id,
            task_queue=task_queue(runtime.settings.task_queue, e.WORKLOAD),
            memo=memo,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        handle = temporal.get_workflow_handle(wf_id, result_type=e.ErasureStatus)
    except RPCError as exc:
        _log.warning("erasure start failed code=%s", exc.status)
        raise ServiceUnavailable("the workflow engine refused the erasure", remedy="Retry later.") from None
    existing, status = await _memo(handle)
    _check_owner(existing, caller, erasure_id)
    if existing.get("request_digest") != digest:
        raise IdempotencyConflict(
            "Idempotency-Key was used with a different erasure request",
            remedy="Use a new Idempotency-Key for a different selection.",
        )
    _log.info("erasure accepted erasure_id=%s selector=%s", erasure_id, inp.selector.kind)
    response.headers["Location"] = f"/v1/erasures/{erasure_id}"
    return await _read(handle, erasure_id, existing, status)


@router.get(
    "/v1/erasures/{erasure_id}",
    operation_id="getErasure",
    response_model=Erasure,
    summary="State, streams matched and deleted, and the receipt once succeeded",
    responses=problem_responses(404),
)
async def get_erasure(erasure_id: ErasureId, caller: EraseCaller, temporal: Temporal) -> Erasure:
    handle = temporal.get_workflow_handle(e.erasure_workflow_id(erasure_id), result_type=e.ErasureStatus)
    memo, status = await _memo(handle)
    _check_owner(memo, caller, erasure_id)
    return await _read(handle, erasure_id, memo, status)
