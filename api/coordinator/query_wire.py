"""Request bodies of the coordinator's endpoints (the responses are NDJSON, formats.query_output)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from formats import query_output as qo


class BudgetRequest(BaseModel):
    """Limits for one query; an absent field takes the coordinator's default (docs/query.md)."""

    model_config = ConfigDict(extra="forbid")
    wall_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    rows: int | None = Field(default=None, ge=1, le=100_000_000)
    bytes: int | None = Field(default=None, ge=1, le=1 << 36)
    private_bytes: int | None = Field(default=None, ge=1, le=1 << 40)


class QueryRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "sql": "SELECT call_id FROM calls_v1 WHERE function_name = 'ExtractInvoice'"
                    " AND args['invoice']['id'] = 'INV-1042'",
                    "budget": {"wall_ms": 10000, "rows": 1000},
                }
            ]
        },
    )
    sql: str = Field(min_length=1, max_length=100_000)
    budget: BudgetRequest = Field(default_factory=BudgetRequest)


class JobRequest(QueryRequest):
    mode: Literal["background"] = "background"


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class QueryJob(BaseModel):
    job_id: str
    state: JobState
    progress: float = 0.0
    rows_so_far: int = 0
    bytes_so_far: int = 0  # NDJSON bytes of the result so far (its size once succeeded)
    snapshot: qo.SnapshotRef | None = None
    created_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    result_url: str | None = None
    error: qo.OutcomeError | None = None
