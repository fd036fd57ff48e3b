"""The background query job family's contract: task queue, names, inputs, outputs, status.

Shared by the coordinator's job endpoints (the starter), the workflow and the activities
(formats/contracts/__init__.py). States: queued -> running -> succeeded | failed | cancelled, then
expired once the result is deleted.
"""

from dataclasses import dataclass, field
from typing import Any

from formats.contracts import Workload

WORKLOAD = Workload.QUERY_JOBS  # its task queue: task_queue(base, WORKLOAD)
QUERY_JOB_WORKFLOW = "QueryJob"
STATUS_QUERY = "status"  # the workflow's query answering QueryJobStatus
RUN_QUERY_JOB = "run_query_job"
DELETE_QUERY_JOB_RESULT = "delete_query_job_result"

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, EXPIRED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "expired",
)
FINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED})
# ApplicationError type of a query the planner refused: not retried.
ERR_QUERY_INVALID = "QueryInvalid"


@dataclass(frozen=True)
class QueryJobInput:
    job_id: str
    tenant_id: str
    project_id: str
    environment_id: str
    sql: str
    request_digest: str
    expires_at_unix: float
    wall_ms: int | None = None
    rows: int | None = None
    bytes: int | None = None
    private_bytes: int | None = None


@dataclass(frozen=True)
class QueryJobResult:
    result_key: str
    rows: int
    outcome: dict[str, Any]
    bytes: int = 0  # size of the NDJSON result


@dataclass(frozen=True)
class DeleteResultInput:
    tenant_id: str
    project_id: str
    environment_id: str
    job_id: str


@dataclass(frozen=True)
class QueryJobProgress:
    """Heartbeat details of a running job (read by the coordinator through describe())."""

    rows_so_far: int
    progress: float
    bytes_so_far: int = 0  # NDJSON bytes of the result written so far


@dataclass
class QueryJobStatus:
    """What ``GET /v1/query-jobs/{id}`` reports (the workflow's ``status`` query, or its result)."""

    job_id: str
    state: str = QUEUED
    tenant_id: str = ""
    environment_id: str = ""
    request_digest: str = ""
    created_at_unix: float = 0.0
    expires_at_unix: float = 0.0
    rows: int = 0
    bytes: int = 0
    result_key: str | None = None
    outcome: dict[str, Any] | None = None
    error: dict[str, Any] | None = field(default=None)
