"""Background query jobs: ``POST /v1/query-jobs`` (202, queued), ``GET|DELETE /v1/query-jobs/{job_id}``
and ``GET /v1/query-jobs/{job_id}/result`` (409 until the job succeeded).

A job is a Temporal workflow (workflows/query_job.py) whose ID is the job id, derived from the
caller's scope and ``Idempotency-Key``: the same key starts one job, ever, and a repeat returns it
(409 if the body differs). The SQL is planned here first, so a query that cannot be planned is a
400 at once. State comes from the workflow's ``status`` query, progress from the running
activity's heartbeat; a job of another scope, or one past ``expires_at``, is 404. Only that, and
Temporal's NOT_FOUND, is 404: an engine that cannot be reached is 503 ``jobs_unavailable``, a
record that cannot be read (a failing ``status`` query on a running job, a closed workflow
without a status) is 500 ``job_status_unreadable``, anything else Temporal refuses 500
``jobs_engine_error``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Header, Request, Response
from fastapi.responses import StreamingResponse
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.common.errors import (
    ApiError,
    BadRequest,
    Conflict,
    IdempotencyConflict,
    NotFound,
    ServiceUnavailable,
)
from api.common.temporal_rpc import is_transient
from api.coordinator.planner import PlanError, plan_query
from api.coordinator.query_wire import JobRequest, QueryJob
from api.coordinator.routes_query import plan_error
from api.coordinator.user_auth import Caller, QueryCaller, Runtime
from formats import query_output as qo
from formats.contracts import query_job as qj
from formats.contracts import task_queue

router = APIRouter(tags=["query-jobs"])


class TemporalUnavailable(ServiceUnavailable):
    code = "jobs_unavailable"
    title = "Background jobs unavailable"


class JobNotReady(Conflict):
    code = "job_not_succeeded"
    title = "The job has no result yet"


class JobStatusUnreadable(ApiError):
    code = "job_status_unreadable"
    title = "The job's status cannot be read"


class JobsEngineError(ApiError):
    code = "jobs_engine_error"
    title = "The workflow engine refused the request"


def _job_not_found() -> NotFound:
    return NotFound("no such query job", code="job_not_found")


def _engine_error(exc: RPCError) -> ApiError:
    """The problem for a Temporal RPC failure. NOT_FOUND is the one "no such job"; the RPC's message
    is not passed on (it may name the workflow's input), only its status code."""
    if exc.status == RPCStatusCode.NOT_FOUND:
        return _job_not_found()
    if is_transient(exc):
        return TemporalUnavailable(
            f"the workflow engine did not answer ({exc.status.name})", remedy="Retry later."
        )
    return JobsEngineError(
        f"the workflow engine answered {exc.status.name}", remedy="Retry; report the request_id."
    )


async def temporal_client(request: Request) -> Client:
    app = request.app
    client: Client | None = getattr(app.state, "temporal", None)
    if client is None:
        s = app.state.runtime.settings
        try:
            client = await Client.connect(s.temporal_address, namespace=s.temporal_namespace)
        except (RuntimeError, OSError) as exc:
            raise TemporalUnavailable(
                f"the workflow engine cannot be reached ({type(exc).__name__})", remedy="Retry later."
            ) from None
        app.state.temporal = client
    return client


async def close_temporal(app: FastAPI) -> None:
    app.state.temporal = None  # the SDK's client holds no resources needing an explicit close


def job_id_for(caller: QueryCaller, key: str) -> str:
    scope = caller.scope
    digest = hashlib.sha256(f"{scope.path}\x1f{key}".encode()).hexdigest()
    return "qj_" + digest[:32]


def request_digest(body: JobRequest) -> str:
    return hashlib.sha256(json.dumps(body.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


async def _status(handle: WorkflowHandle[Any, Any]) -> qj.QueryJobStatus | None:
    """The job's record; None only when Temporal has no such workflow."""
    try:
        return await handle.query(qj.STATUS_QUERY, result_type=qj.QueryJobStatus)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise _engine_error(exc) from None
    except (WorkflowQueryFailedError, WorkflowQueryRejectedError) as exc:
        failure = type(exc).__name__
    # The worker could not answer the query (e.g. its replay of a closed workflow failed). A job
    # that completed returned its record as its result; any other state has none to offer, and a
    # running job must not be waited for here (result() would block until it ends).
    try:
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.COMPLETED:
            state = desc.status.name if desc.status is not None else "UNKNOWN"
            raise JobStatusUnreadable(f"the job's status query failed ({failure}) while it is {state}")
        done = await handle.result(follow_runs=False)
    except RPCError as exc:
        raise _engine_error(exc) from None
    try:
        return qj.QueryJobStatus(**done)
    except TypeError:  # not a dict, or not this contract's fields
        raise JobStatusUnreadable(
            f"the job's status query failed ({failure}) and its result is not a job status"
        ) from None


async def _progress(handle: WorkflowHandle[Any, Any]) -> qj.QueryJobProgress | None:
    try:
        desc = await handle.describe()
    except RPCError as exc:
        raise _engine_error(exc) from None
    converter = DataConverter.default
    for pending in desc.raw_description.pending_activities:
        if (
            pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            and pending.heartbeat_details.payloads
        ):
            values = await converter.decode(pending.heartbeat_details.payloads, [qj.QueryJobProgress])
            if values:
                value = values[0]
                assert isinstance(value, qj.QueryJobProgress)
                return value
    return None


def _visible(st: qj.QueryJobStatus | None, caller: QueryCaller) -> qj.QueryJobStatus:
    if (
        st is None
        or st.tenant_id != caller.scope.tenant_id
        or st.environment_id != caller.scope.environment_id
        or st.state == qj.EXPIRED
        or st.expires_at_unix <= time.time()
    ):
        raise _job_not_found()
    return st


def _view(st: qj.QueryJobStatus, progress: qj.QueryJobProgress | None, request: Request) -> QueryJob:
    outcome = qo.QueryOutcome.model_validate(st.outcome) if st.outcome else None
    final = st.state in qj.FINAL_STATES
    rows = st.rows if final else (progress.rows_so_far if progress else 0)
    size = st.bytes if final else (progress.bytes_so_far if progress else 0)
    error = st.error if st.state == qj.FAILED else None
    return QueryJob(
        job_id=st.job_id,
        state=st.state,  # type: ignore[arg-type]
        progress=1.0 if final else (progress.progress if progress else 0.0),
        rows_so_far=rows,
        bytes_so_far=size,
        snapshot=outcome.snapshot if outcome else None,
        created_at=dt.datetime.fromtimestamp(st.created_at_unix, dt.UTC) if st.created_at_unix else None,
        expires_at=dt.datetime.fromtimestamp(st.expires_at_unix, dt.UTC),
        result_url=(
            str(request.url_for("get_query_job_result", job_id=st.job_id))
            if st.state == qj.SUCCEEDED
            else None
        ),
        error=qo.OutcomeError.model_validate(error) if error else None,
    )


@router.post("/v1/query-jobs", operation_id="create_query_job", status_code=202, response_model=QueryJob)
async def create_query_job(
    body: JobRequest,
    request: Request,
    response: Response,
    runtime: Runtime,
    caller: Caller,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
) -> QueryJob:
    if not idempotency_key:
        raise BadRequest(
            "POST /v1/query-jobs needs an Idempotency-Key header",
            code="idempotency_key_missing",
            remedy="Send a unique Idempotency-Key per job; repeat it to retry safely.",
        )
    try:
        plan_query(body.sql, candidate_cap=runtime.settings.job_candidates)
    except PlanError as exc:
        raise plan_error(exc) from None
    client = await temporal_client(request)
    job_id = job_id_for(caller, idempotency_key)
    digest = request_digest(body)
    s = caller.scope
    inp = qj.QueryJobInput(
        job_id=job_id,
        tenant_id=s.tenant_id,
        project_id=s.project_id,
        environment_id=s.environment_id,
        sql=body.sql,
        request_digest=digest,
        expires_at_unix=time.time() + runtime.settings.job_ttl_seconds,
        wall_ms=body.budget.wall_ms or runtime.settings.max_wall_ms,
        rows=body.budget.rows or 100_000_000,
        bytes=body.budget.bytes or (1 << 36),
        private_bytes=body.budget.private_bytes,
    )
    try:
        handle = await client.start_workflow(
            qj.QUERY_JOB_WORKFLOW,
            inp,
            id=job_id,
            task_queue=task_queue(runtime.settings.task_queue, qj.WORKLOAD),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        handle = client.get_workflow_handle(job_id)
    except RPCError as exc:
        raise _engine_error(exc) from None
    st = await _status(handle)
    if st is None:
        st = qj.QueryJobStatus(job_id=job_id, tenant_id=s.tenant_id, environment_id=s.environment_id,
                            request_digest=digest, expires_at_unix=inp.expires_at_unix)  # fmt: skip
    if st.request_digest != digest:
        raise IdempotencyConflict(
            "this Idempotency-Key was used for another query", remedy="Use a new Idempotency-Key."
        )
    st = _visible(st, caller)
    response.headers["Location"] = str(request.url_for("get_query_job", job_id=job_id))
    return _view(st, None, request)


@router.get("/v1/query-jobs/{job_id}", operation_id="get_query_job", response_model=QueryJob)
async def get_query_job(job_id: str, request: Request, caller: Caller) -> QueryJob:
    handle = (await temporal_client(request)).get_workflow_handle(job_id)
    st = _visible(await _status(handle), caller)
    progress = await _progress(handle) if st.state == qj.RUNNING else None
    return _view(st, progress, request)


@router.delete("/v1/query-jobs/{job_id}", operation_id="cancel_query_job", response_model=QueryJob)
async def cancel_query_job(job_id: str, request: Request, caller: Caller) -> QueryJob:
    handle = (await temporal_client(request)).get_workflow_handle(job_id)
    st = _visible(await _status(handle), caller)
    if st.state not in qj.FINAL_STATES:
        try:
            await handle.cancel()
        except RPCError as exc:
            raise _engine_error(exc) from None
        for _ in range(50):  # the cancel lands within a workflow task; report the new state
            newer = await _status(handle)
            if newer is not None and newer.state in qj.FINAL_STATES:
                st = newer
                break
            await _sleep(0.1)
    return _view(st, None, request)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


@router.get(
    "/v1/query-jobs/{job_id}/result",
    operation_id="get_query_job_result",
    responses={200: {"content": {qo.NDJSON_MEDIA_TYPE: {}}}, 409: {"description": "Not succeeded (yet)."}},
)
async def get_query_job_result(
    job_id: str, request: Request, runtime: Runtime, caller: Caller
) -> StreamingResponse:
    handle = (await temporal_client(request)).get_workflow_handle(job_id)
    st = _visible(await _status(handle), caller)
    if st.state != qj.SUCCEEDED or st.result_key is None:
        raise JobNotReady(
            f"the job is {st.state}; its result exists once it succeeded",
            remedy="Poll GET /v1/query-jobs/{job_id} until state is succeeded.",
        )
    obj = runtime.s3.get_object(Bucket=runtime.settings.bucket, Key=st.result_key)
    return StreamingResponse(
        obj["Body"].iter_chunks(chunk_size=1 << 16),
        media_type=qo.NDJSON_MEDIA_TYPE,
        headers={"Cache-Control": "no-store"},
    )
