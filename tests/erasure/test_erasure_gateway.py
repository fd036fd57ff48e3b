"""``POST/GET /v1/erasures`` end to end: the gateway app (in process) starts the erasure workflow on
the Temporal dev server; an in-process worker runs the activities against moto, Boundary and Lance."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from corpus import make_corpus, put_all, root_rows_in_clickhouse
from erasure_corpus import project_corpus
from fastapi.testclient import TestClient
from temporalio.client import Client
from temporalio.worker import Worker

from api.gateway.app import create_app
from api.gateway.runtime import GatewayRuntime
from api.gateway.settings import GatewaySettings
from formats import object_keys
from formats.contracts import Workload
from formats.contracts import projection as c
from formats.contracts import task_queue as queue_of
from workflows.erasure import ErasureWorkflow


def issue_user(boundary: Any, permissions: list[str], *, tenant: str | None = None, scope: Any = None) -> str:
    s = scope or boundary.scope
    body = {
        "kind": "user",
        "name": f"u-{uuid.uuid4().hex[:8]}",
        "tenant_id": tenant or s.tenant_id,
        "project_id": s.project_id,
        "environment_id": s.environment_id,
        "permissions": permissions,
    }
    r = httpx.post(
        f"{boundary.control_url}/v1/tokens",
        json=body,
        headers={"Authorization": f"Bearer {boundary.operator_token}"},
        timeout=10,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["secret"])


def other_tenant_token(boundary: Any) -> str:
    h = {"Authorization": f"Bearer {boundary.operator_token}"}
    t = httpx.post(f"{boundary.control_url}/v1/tenants", json={"name": f"t{uuid.uuid4().hex[:6]}"}, headers=h)
    tid = t.json()["tenant_id"]
    p = httpx.post(f"{boundary.control_url}/v1/tenants/{tid}/projects", json={"name": "p"}, headers=h).json()
    pid = p["project_id"]
    env = httpx.post(f"{boundary.control_url}/v1/projects/{pid}/environments", json={"name": "e"}, headers=h)
    eid = env.json()["environment_id"]
    r = httpx.post(
        f"{boundary.control_url}/v1/tokens",
        json={
            "kind": "user",
            "name": "x",
            "tenant_id": tid,
            "project_id": pid,
            "environment_id": eid,
            "permissions": ["query", "erasure"],
        },
        headers=h,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["secret"])


@pytest.fixture
def gw(eworld: Any, temporal: Any) -> Iterator[tuple[TestClient, str]]:
    tq = f"tq-{uuid.uuid4().hex[:8]}"
    b = eworld.boundary
    settings = GatewaySettings(
        s3_endpoint_url=eworld.moto.endpoint,
        bucket=eworld.bucket,
        boundary_workload_url=b.workload_url,
        tls_dir=b.tls.ca_cert.parent,
        deployment_id=b.deployment_id,
        cell=b.cell,
        temporal_address=temporal.address,
        task_queue=tq,
        rate_limit_per_second=1000,
        rate_limit_burst=1000,
    )
    with TestClient(create_app(settings, GatewayRuntime(settings))) as client:
        yield client, tq


def run_worker(temporal: Any, eworld: Any, tq: str, body: Any) -> Any:
    async def main() -> Any:
        client = await Client.connect(temporal.address)
        with ThreadPoolExecutor(max_workers=8) as pool:
            async with Worker(
                client,
                # The gateway starts erasures on the erasure queue derived from its base queue.
                task_queue=queue_of(tq, Workload.ERASURE),
                workflows=[ErasureWorkflow],
                activities=eworld.erasure.activities(),
                activity_executor=pool,
            ):
                return await body()

    return asyncio.run(main())


def wait_done(client: TestClient, token: str, erasure_id: str, timeout: float = 90) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.get(f"/v1/erasures/{erasure_id}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        if r.json()["state"] in ("succeeded", "failed"):
            return dict(r.json())
        time.sleep(0.3)
    raise AssertionError("erasure did not finish")


def post(client: TestClient, token: str | None, body: Any, key: str | None = "k1") -> httpx.Response:
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if key:
        headers["Idempotency-Key"] = key
    return client.post("/v1/erasures", json=body, headers=headers)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"process_euids": ["0" * 32], "execution_ids": ["0" * 64]},
        {"process_euids": []},
        {"process_euids": ["XYZ"]},
        {"time_range": {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}},
        {"process_euids": ["0" * 32], "tenant_id": "other"},
    ],
)
def test_post_erasures_bad_selector_is_400(gw: Any, eworld: Any, body: Any) -> None:
    client, _ = gw
    token = issue_user(eworld.boundary, ["erasure"])
    r = post(client, token, body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "malformed_request"


def test_post_erasures_needs_idempotency_key_and_erasure_permission(gw: Any, eworld: Any) -> None:
    client, _ = gw
    body = {"process_euids": ["0" * 32]}
    assert post(client, issue_user(eworld.boundary, ["erasure"]), body, key=None).json()["code"] == (
        "idempotency_key_missing"
    )
    r = post(client, issue_user(eworld.boundary, ["query"]), body)
    assert r.status_code == 403 and r.json()["code"] == "token_not_for_erasure"
    assert post(client, None, body).status_code == 401
    r = post(client, other_tenant_token(eworld.boundary), body)
    assert r.status_code == 401  # another tenant's token is unknown to this deployment
    r = client.get(
        "/v1/erasures/ers_" + "0" * 32,
        headers={"Authorization": f"Bearer {issue_user(eworld.boundary, ['query'])}"},
    )
    assert r.status_code == 403


def test_erasure_by_execution_id_through_the_gateway(
    gw: Any, eworld: Any, temporal: Any, tmp_path: Path
) -> None:
    client, tq = gw
    corpus = make_corpus(tmp_path, eworld.scope, executions=6, processes=2)
    put_all(eworld, corpus)
    project_corpus(eworld, corpus)
    gone, kept = corpus.euids
    victim = next(
        x.execution_id
        for x in corpus.truth.executions
        if x.execution_id.startswith(gone) and x.status != "abandoned"
    )
    token = issue_user(eworld.boundary, ["query", "erasure"])
    other = other_tenant_token(eworld.boundary)
    key = f"k-{uuid.uuid4().hex[:8]}"

    async def body() -> dict[str, Any]:
        r1 = await asyncio.to_thread(post, client, token, {"execution_ids": [victim]}, key)
        r2 = await asyncio.to_thread(post, client, token, {"execution_ids": [victim]}, key)
        assert r1.status_code == r2.status_code == 202, r1.text
        assert r1.json()["erasure_id"] == r2.json()["erasure_id"]  # one erasure
        r3 = await asyncio.to_thread(post, client, token, {"process_euids": [kept]}, key)
        assert r3.status_code == 409 and r3.json()["code"] == "idempotency_key_reused"
        eid = r1.json()["erasure_id"]
        done = await asyncio.to_thread(wait_done, client, token, eid)
        hidden = await asyncio.to_thread(
            client.get, f"/v1/erasures/{eid}", headers={"Authorization": f"Bearer {other}"}
        )
        assert hidden.status_code == 401
        # A token of the same tenant but another environment cannot see it either.
        return done

    done = run_worker(temporal, eworld, tq, body)
    assert done["state"] == "succeeded", done
    assert done["streams_matched"] == 1 and done["streams_deleted"] == 1
    receipt = done["receipt"]
    assert receipt["verified"] and receipt["streams"] == [gone]
    # The receipt's counts agree with direct listings of each store.
    s3_left = eworld.s3.list_object_versions(
        Bucket=eworld.bucket, Prefix=object_keys.stream_prefix(eworld.scope, gone)
    )
    assert receipt["s3"]["remaining_object_versions"] == len(s3_left.get("Versions", [])) == 0
    assert root_rows_in_clickhouse(eworld, gone) == {}
    assert receipt["boundary"]["remaining_total"] == 0
    assert sum(receipt["boundary"]["fact_rows_deleted"].values()) > 0
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{gone}')") == 0
    assert receipt["lance"]["remaining_rows_current"]["calls_v1"] == 0
    assert receipt["lance"]["rows_deleted"]["calls_v1"] > 0
    # Neighbours stay queryable.
    assert root_rows_in_clickhouse(eworld, kept)
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{kept}')") > 0
    # Replay after the erasure: the erased stream's meta keys project nothing.
    for key in corpus.up.meta_keys:
        if gone in key:
            res = eworld.acts.project_meta_object(c.ProjectMetaInput(key, 1))
            assert res.outcomes == ()
    assert root_rows_in_clickhouse(eworld, gone) == {}
