"""An erasure that fails or is cancelled after resolve still removes its stored plan (it lists the
erased root ids), every version of it: the Temporal dev server, the erasure workflow and the real
activities on an in-process worker, moto (versioned bucket), Boundary and Lance.

Failures are provoked at one step, under its real activity name:

* the stored plan is overwritten (a second version, as a concurrent resolve would leave) right
  before the real ``erase_lance_rows``, which then refuses it with its non-retryable
  ``PlanChanged``: a failure midway, after the stream's objects and facts are gone;
* ``erase_facts`` stalls (heartbeating) until the workflow is cancelled.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from corpus import make_corpus, put_all
from erasure_corpus import project_corpus
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.erasure import ErasureActivities
from formats import object_keys
from formats.contracts import ScopeRef
from formats.contracts import erasure as e
from workflows.erasure import ErasureWorkflow

TEMPORARY = object_keys.TEMPORARY_ROOT + "/"


def temporary_versions(world: Any) -> list[str]:
    """Every object version and delete marker under ``temporary/`` (the plan lives there)."""
    page = world.s3.list_object_versions(Bucket=world.bucket, Prefix=TEMPORARY)
    return [v["Key"] for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]


def erasure_input(world: Any, euid: str) -> e.ErasureInput:
    s = world.scope
    return e.ErasureInput(
        erasure_id=f"fail{uuid.uuid4().hex[:8]}",
        scope=ScopeRef(s.tenant_id, s.project_id, s.environment_id),
        selector=e.Selector(process_euids=(euid,)),
        timeouts=e.StepTimeouts(activity_s=120, heartbeat_s=3, retry_initial_s=0.2, retry_max_s=1),
    )


def projected_stream(world: Any, tmp_path: Path) -> str:
    corpus = make_corpus(tmp_path, world.scope, executions=4, processes=1)
    put_all(world, corpus)
    project_corpus(world, corpus)
    (euid,) = corpus.euids
    return euid


def run_erasure(temporal: Any, activities: list[Any], inp: e.ErasureInput, during: Any = None) -> Any:
    async def main() -> Any:
        client = await Client.connect(temporal.address)
        tq = f"tq-{uuid.uuid4().hex[:8]}"
        with ThreadPoolExecutor(max_workers=4) as pool:
            async with Worker(
                client,
                task_queue=tq,
                workflows=[ErasureWorkflow],
                activities=activities,
                activity_executor=pool,
            ):
                handle = await client.start_workflow(
                    ErasureWorkflow.run, inp, id=e.erasure_workflow_id(inp.erasure_id), task_queue=tq
                )
                if during is not None:
                    await during(handle)
                return await asyncio.wait_for(handle.result(), 120)

    return asyncio.run(main())


def test_an_erasure_failing_midway_removes_every_version_of_its_plan(
    eworld: Any, temporal: Any, tmp_path: Path
) -> None:
    euid = projected_stream(eworld, tmp_path)
    er = eworld.erasure
    # A cold plan cache: this step reads the stored plan as a fresh worker would.
    fresh = ErasureActivities(s3=eworld.s3, bucket=eworld.bucket, boundary=eworld.client, lance=eworld.lance)
    plan_versions: list[int] = []

    @activity.defn(name=e.ERASE_LANCE_ROWS)
    def erase_lance_rows_after_overwrite(inp: e.PlanInput) -> e.EraseLanceResult:
        eworld.s3.put_object(Bucket=eworld.bucket, Key=inp.plan.key, Body=b'{"overwritten": true}')
        plan_versions.append(len(temporary_versions(eworld)))
        return fresh.erase_lance_rows(inp)

    acts = [a for a in er.activities() if a != er.erase_lance_rows] + [erase_lance_rows_after_overwrite]
    inp = erasure_input(eworld, euid)
    result = run_erasure(temporal, acts, inp)

    assert result.state == e.FAILED and result.error["code"] == "PlanChanged", result
    assert result.error["message"] == f"step {e.ERASE_LANCE_ROWS} failed"  # the original error stays
    assert result.streams_deleted == 1  # it failed midway: the stream's objects were already gone
    assert plan_versions == [2]  # the plan had two versions when the step failed
    assert temporary_versions(eworld) == []


def test_a_cancelled_erasure_removes_its_plan(eworld: Any, temporal: Any, tmp_path: Path) -> None:
    euid = projected_stream(eworld, tmp_path)
    er = eworld.erasure
    reached = threading.Event()

    @activity.defn(name=e.ERASE_FACTS)
    def erase_facts_stalled(inp: e.PlanInput) -> e.EraseFactsResult:
        reached.set()
        deadline = time.monotonic() + 60
        while not activity.is_cancelled() and time.monotonic() < deadline:
            activity.heartbeat()  # how a cancellation reaches a thread-pool activity
            time.sleep(0.1)
        raise RuntimeError("erase_facts stalled and was not cancelled")

    async def cancel_when_stalled(handle: Any) -> None:
        await asyncio.to_thread(reached.wait, 60)
        assert temporary_versions(eworld), "the plan is stored before the step runs"
        await handle.cancel()

    acts = [a for a in er.activities() if a != er.erase_facts] + [erase_facts_stalled]
    result = run_erasure(temporal, acts, erasure_input(eworld, euid), cancel_when_stalled)

    assert temporary_versions(eworld) == []
    assert result.state == e.FAILED and result.error["code"] == "cancelled", result
