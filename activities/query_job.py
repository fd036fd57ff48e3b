"""Background query job activities: run a query to its NDJSON result in the bucket, delete it later.

Contracts: formats/contracts/query_job.py. :class:`QueryJobActivities` receives its clients once:
the coordinator runtime (Boundary client, Lance store, budgets) and a boto3 S3 client. The result
is written to ``temporary/v1/<scope>/jobs/<job_id>/result.ndjson``
(formats.object_keys.job_result_key): the same rows and final ``queryOutcome`` as
``POST /v1/query``, under the same snapshot rules, with the job's (larger) candidate limit. The
activity heartbeats rows and bytes so far so the coordinator can report progress, and stops when
Temporal cancels it.
"""

from __future__ import annotations

import json
import tempfile
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from formats.contracts.query_job import (
    DELETE_QUERY_JOB_RESULT,
    ERR_QUERY_INVALID,
    RUN_QUERY_JOB,
    DeleteResultInput,
    QueryJobInput,
    QueryJobProgress,
    QueryJobResult,
)
from formats.query_errors import PlanError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class QueryJobActivities:
    def __init__(self, runtime: Any, s3: S3Client, bucket: str) -> None:
        self.runtime = runtime  # api.coordinator.runtime.CoordinatorRuntime
        self.s3 = s3
        self.bucket = bucket

    @activity.defn(name=RUN_QUERY_JOB)
    def run_query_job(self, inp: QueryJobInput) -> QueryJobResult:
        from formats.object_keys import Scope, job_result_key

        scope = Scope(inp.tenant_id, inp.project_id, inp.environment_id)
        budget = self.runtime.budget(
            wall_ms=inp.wall_ms, rows=inp.rows, bytes=inp.bytes, private_bytes=inp.private_bytes
        )
        try:
            prepared = self.runtime.start_query(inp.sql, scope, budget, interactive=False)
        except PlanError as exc:
            raise ApplicationError(
                exc.message, exc.code, type=ERR_QUERY_INVALID, non_retryable=True
            ) from None
        key = job_result_key(scope, inp.job_id)
        rows = size = 0
        _beat(0, 0.05)
        with tempfile.TemporaryFile() as out:
            for line in prepared.run.lines():
                out.write(line)
                rows += 1
                size += len(line)
                if rows % 1000 == 0:
                    _beat(rows, 0.5, size)
            rows -= 1  # the last line is the outcome
            outcome = prepared.run.outcome
            assert outcome is not None
            out.seek(0)
            self.s3.upload_fileobj(out, self.bucket, key, ExtraArgs={"ContentType": "application/x-ndjson"})
        _beat(rows, 1.0, size)
        return QueryJobResult(key, rows, json.loads(outcome.model_dump_json()), size)

    @activity.defn(name=DELETE_QUERY_JOB_RESULT)
    def delete_query_job_result(self, inp: DeleteResultInput) -> None:
        from formats.object_keys import Scope, job_result_key

        key = job_result_key(Scope(inp.tenant_id, inp.project_id, inp.environment_id), inp.job_id)
        self.s3.delete_object(Bucket=self.bucket, Key=key)


def _beat(rows: int, progress: float, size: int = 0) -> None:
    if activity.in_activity():
        activity.heartbeat(QueryJobProgress(rows, progress, size))
        if activity.is_cancelled():
            raise activity_cancelled()


def activity_cancelled() -> BaseException:
    import asyncio

    return asyncio.CancelledError()
