"""Background query jobs against the Temporal dev server, a worker running the real workflow and
activities, moto S3 (result files) and the corpus behind Boundary and Lance."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest
from broken_job_workflows import BROKEN_STATUS_JOB, NOT_A_STATUS, BrokenStatusJob
from coordinator_world import BoundaryServer
from fastapi.testclient import TestClient
from moto.server import ThreadedMotoServer
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.query_job import QueryJobActivities
from api.coordinator.app import create_app
from api.coordinator.runtime import CoordinatorRuntime
from api.dataplane.boundary_client import BoundaryClient
from formats import query_output as qo
from formats.contracts import Workload
from formats.contracts import task_queue as queue_of
from workflows.query_job import QueryJobWorkflow

BUCKET = "coord-jobs"
SQL_PUBLIC = "SELECT function_name, count() AS n FROM calls_v1 GROUP BY function_name ORDER BY function_name"
SQL_PRIVATE = (
    "SELECT call_id, output['score'] AS score FROM calls_v1 WHERE is_llm ORDER BY score DESC LIMIT 5"
)


@dataclass
class Jobs:
    api: TestClient
    s3: object
    task_queue: str
    broken_queue: str  # BrokenStatusJob's
    temporal: Client
    loop: asyncio.AbstractEventLoop  # the dev server's client and workers run on it

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def jobs(runtime: CoordinatorRuntime, boundary: BoundaryServer) -> Iterator[Jobs]:
    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    s3.create_bucket(Bucket=BUCKET)
    task_queue = f"coord-jobs-{uuid.uuid4().hex[:8]}"
    broken_queue = f"{task_queue}-broken"
    temporal_port = _free_port()
    settings = runtime.settings.model_copy(
        update={
            "bucket": BUCKET,
            "s3_endpoint_url": endpoint,
            "task_queue": task_queue,
            "temporal_address": f"127.0.0.1:{temporal_port}",
            "job_ttl_seconds": 8,
        }
    )
    # Its own Boundary client: the app closes its runtime's client when it stops.
    own = BoundaryClient(boundary.workload_url, boundary.pki, boundary.boot.deployment_id, boundary.boot.cell)
    job_runtime = CoordinatorRuntime(settings, boundary=own, lance=runtime.lance, s3=s3)
    ready = threading.Event()
    stop: asyncio.Event | None = None
    loop_box: dict[str, asyncio.AbstractEventLoop] = {}
    client_box: dict[str, Client] = {}

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        loop_box["loop"] = asyncio.get_running_loop()
        temporal = os.path.join(os.path.dirname(sys.executable), "temporal")
        async with await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal, port=temporal_port
        ) as env:
            acts = QueryJobActivities(job_runtime, s3, BUCKET)
            client_box["client"] = env.client
            async with (
                Worker(
                    env.client,
                    # The coordinator starts jobs on the query-jobs queue derived from its base queue.
                    task_queue=queue_of(task_queue, Workload.QUERY_JOBS),
                    workflows=[QueryJobWorkflow],
                    activities=[acts.run_query_job, acts.delete_query_job_result],
                    activity_executor=ThreadPoolExecutor(4),
                ),
                Worker(env.client, task_queue=broken_queue, workflows=[BrokenStatusJob]),
            ):
                ready.set()
                await stop.wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(60), "temporal did not start"
    app = create_app(settings, job_runtime)
    try:
        with TestClient(app) as client:
            yield Jobs(client, s3, task_queue, broken_queue, client_box["client"], loop_box["loop"])
    finally:
        loop = loop_box["loop"]
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        moto.stop()


def _wait(
    api: TestClient, headers: dict[str, str], job_id: str, states: set[str], timeout: float = 60
) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = api.get(f"/v1/query-jobs/{job_id}", headers=headers).json()
        if body.get("state") in states:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


def test_job_lifecycle_result_and_expiry(jobs: Jobs, user_headers: dict[str, str]) -> None:
    key = {"Idempotency-Key": uuid.uuid4().hex}
    resp = jobs.api.post("/v1/query-jobs", json={"sql": SQL_PRIVATE}, headers={**user_headers, **key})
    assert resp.status_code == 202, resp.text
    job = resp.json()
    assert job["state"] in ("queued", "running") and job["expires_at"]
    again = jobs.api.post("/v1/query-jobs", json={"sql": SQL_PRIVATE}, headers={**user_headers, **key})
    assert again.status_code == 202 and again.json()["job_id"] == job["job_id"]
    other = jobs.api.post("/v1/query-jobs", json={"sql": SQL_PUBLIC}, headers={**user_headers, **key})
    assert other.status_code == 409

    done = _wait(jobs.api, user_headers, job["job_id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done
    assert done["result_url"].endswith(f"/v1/query-jobs/{job['job_id']}/result")
    assert done["snapshot"]["snapshot_id"] and done["rows_so_far"] == 5 and done["progress"] == 1.0
    result = jobs.api.get(f"/v1/query-jobs/{job['job_id']}/result", headers=user_headers)
    assert result.status_code == 200
    assert done["bytes_so_far"] == len(result.content)  # the result file's size, rows and outcome
    parsed = qo.read_query_bytes(result.content)
    interactive = qo.read_query_bytes(
        jobs.api.post("/v1/query", json={"sql": SQL_PRIVATE}, headers=user_headers).content
    )
    assert len(parsed.rows) == 5 and parsed.outcome.status in ("complete", "partial")
    scores = [r["score"] for r in parsed.rows]
    assert scores == sorted(scores, reverse=True)
    # The same SQL is too costly for an interactive query: a typed error pointing at jobs.
    assert interactive.rows == [] and interactive.outcome.error is not None
    assert interactive.outcome.error.code == "query_too_expensive"
    assert "/v1/query-jobs" in (interactive.outcome.error.remedy or "")

    # At expires_at the record and the result file are removed.
    time.sleep(max(0.0, _expires_in(done)) + 1.0)
    deadline = time.monotonic() + 20
    while jobs.api.get(f"/v1/query-jobs/{job['job_id']}", headers=user_headers).status_code != 404:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    listed = jobs.s3.list_objects_v2(Bucket=BUCKET, Prefix="temporary/v1/")  # type: ignore[attr-defined]
    deadline = time.monotonic() + 20
    while listed.get("KeyCount", 0):
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)
        listed = jobs.s3.list_objects_v2(Bucket=BUCKET, Prefix="temporary/v1/")  # type: ignore[attr-defined]


def _expires_in(job: dict) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(job["expires_at"]).timestamp() - time.time()


def test_result_is_409_before_success_and_cancel_by_delete(jobs: Jobs, user_headers: dict[str, str]) -> None:
    # A query whose wall budget is spent in a long public scan would be racy; instead cancel a job
    # while it is still queued: no worker polls this job's first task before the DELETE lands.
    key = {"Idempotency-Key": uuid.uuid4().hex}
    resp = jobs.api.post("/v1/query-jobs", json={"sql": SQL_PUBLIC}, headers={**user_headers, **key})
    job_id = resp.json()["job_id"]
    first = jobs.api.get(f"/v1/query-jobs/{job_id}/result", headers=user_headers)
    if first.status_code == 409:
        assert first.headers["content-type"].startswith("application/problem+json")
        assert first.json()["code"] == "job_not_succeeded"
    cancelled = jobs.api.delete(f"/v1/query-jobs/{job_id}", headers=user_headers).json()
    assert cancelled["state"] in ("cancelled", "succeeded")
    # A job in a final state is returned unchanged by another DELETE.
    assert (
        jobs.api.delete(f"/v1/query-jobs/{job_id}", headers=user_headers).json()["state"]
        == cancelled["state"]
    )
    if cancelled["state"] == "cancelled":
        assert jobs.api.get(f"/v1/query-jobs/{job_id}/result", headers=user_headers).status_code == 409


def test_jobs_need_an_idempotency_key_and_valid_sql(jobs: Jobs, user_headers: dict[str, str]) -> None:
    assert jobs.api.post("/v1/query-jobs", json={"sql": SQL_PUBLIC}, headers=user_headers).status_code == 400
    bad = jobs.api.post(
        "/v1/query-jobs",
        json={"sql": "DROP TABLE calls_v1"},
        headers={**user_headers, "Idempotency-Key": "k1"},
    )
    assert bad.status_code == 400 and bad.json()["code"] == "statement_not_allowed"
    assert jobs.api.get("/v1/query-jobs/qj_unknown", headers=user_headers).status_code == 404


def test_an_unknown_job_is_404(jobs: Jobs, user_headers: dict[str, str]) -> None:
    # Temporal's NOT_FOUND is the one "no such job" the engine gives.
    resp = jobs.api.get(f"/v1/query-jobs/qj_{uuid.uuid4().hex}", headers=user_headers)
    assert resp.status_code == 404 and resp.json()["code"] == "job_not_found"


def _start_broken(jobs: Jobs, finish_at_once: bool) -> str:
    job_id = f"qj_broken_{uuid.uuid4().hex}"
    handle = jobs.run(
        jobs.temporal.start_workflow(
            BROKEN_STATUS_JOB,
            finish_at_once,
            id=job_id,
            task_queue=jobs.broken_queue,
            # Bounds the wait of a route that waited for the running job's result (the old code did).
            execution_timeout=timedelta(seconds=20),
        )
    )
    if finish_at_once:
        assert jobs.run(handle.result()) == NOT_A_STATUS
    return job_id


def _assert_unreadable(resp: Any) -> None:
    assert resp.status_code == 500, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == "job_status_unreadable"


def test_a_failing_status_query_on_a_running_job_is_a_5xx_at_once(
    jobs: Jobs, user_headers: dict[str, str]
) -> None:
    job_id = _start_broken(jobs, finish_at_once=False)
    started = time.monotonic()
    resp = jobs.api.get(f"/v1/query-jobs/{job_id}", headers=user_headers)
    assert time.monotonic() - started < 10, "the route waited for the running job to end"
    _assert_unreadable(resp)
    jobs.run(jobs.temporal.get_workflow_handle(job_id).signal("finish"))


@pytest.mark.parametrize("method,suffix", [("GET", ""), ("DELETE", ""), ("GET", "/result")])
def test_a_closed_job_without_a_readable_status_is_a_5xx_not_404(
    jobs: Jobs, user_headers: dict[str, str], method: str, suffix: str
) -> None:
    # The query fails and the workflow's result is no job status: the job exists, its record is
    # unreadable; "no such job" would hide the bug.
    job_id = _start_broken(jobs, finish_at_once=True)
    _assert_unreadable(jobs.api.request(method, f"/v1/query-jobs/{job_id}{suffix}", headers=user_headers))
