"""The background query job workflow (ID: the job id, derived from the Idempotency-Key).

States: queued -> running -> succeeded | failed | cancelled. The record (this workflow, read with
the ``status`` query) and the result file stay until ``expires_at``; then the result is deleted and
the workflow ends, after which the coordinator answers 404. A cancel in a final state changes
nothing (the coordinator does not send it). No I/O here: the activities do it.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.query_job import QueryJobActivities
    from formats.contracts import query_job as qj


@workflow.defn(name=qj.QUERY_JOB_WORKFLOW)
class QueryJobWorkflow:
    def __init__(self) -> None:
        self._status: qj.QueryJobStatus | None = None

    @workflow.query(name=qj.STATUS_QUERY)
    def status(self) -> qj.QueryJobStatus | None:
        return self._status

    @workflow.run
    async def run(self, inp: qj.QueryJobInput) -> qj.QueryJobStatus:
        st = self._status = qj.QueryJobStatus(
            job_id=inp.job_id,
            tenant_id=inp.tenant_id,
            environment_id=inp.environment_id,
            request_digest=inp.request_digest,
            created_at_unix=workflow.now().timestamp(),
            expires_at_unix=inp.expires_at_unix,
        )
        st.state = qj.RUNNING
        try:
            result = await workflow.execute_activity_method(
                QueryJobActivities.run_query_job,
                inp,
                start_to_close_timeout=timedelta(hours=6),
                heartbeat_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(
                    maximum_attempts=3, non_retryable_error_types=[qj.ERR_QUERY_INVALID]
                ),
                cancellation_type=workflow.ActivityCancellationType.TRY_CANCEL,
            )
            st.rows, st.result_key, st.outcome = result.rows, result.result_key, result.outcome
            st.bytes = result.bytes
            err = result.outcome.get("error")
            if result.outcome.get("status") == "failed":
                st.state, st.error = qj.FAILED, err
            else:
                st.state = qj.SUCCEEDED
        except (asyncio.CancelledError, CancelledError):
            st.state = qj.CANCELLED
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                st.state = qj.CANCELLED
            else:
                cause = exc.cause
                code = (
                    "query_invalid"
                    if isinstance(cause, ApplicationError) and cause.type == qj.ERR_QUERY_INVALID
                    else "job_failed"
                )
                message = cause.message if isinstance(cause, ApplicationError) else "the job failed"
                st.state, st.error = qj.FAILED, {"code": code, "message": message, "remedy": None}
        remaining = inp.expires_at_unix - workflow.now().timestamp()
        if remaining > 0:
            # A final state is kept as it is until expiry, whatever arrives meanwhile.
            with contextlib.suppress(asyncio.CancelledError, CancelledError):
                await workflow.sleep(timedelta(seconds=remaining))
        if st.result_key is not None:
            await workflow.execute_activity_method(
                QueryJobActivities.delete_query_job_result,
                qj.DeleteResultInput(inp.tenant_id, inp.project_id, inp.environment_id, inp.job_id),
                start_to_close_timeout=timedelta(minutes=5),
            )
        st.state = qj.EXPIRED
        return st
