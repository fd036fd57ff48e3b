"""ProjectMetaObject keeps a values_landed signal that arrives while its projection activity runs.

Real Temporal dev server and the real workflow; the activity is a stand-in registered under the
real name, so the case is exact: the signal lands during the first run, which still reports the
execution pending. A lost signal would leave the workflow on its (here 10-minute) timer.
"""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from formats.contracts import ids
from formats.contracts import projection as c
from workflows.projection import ProjectMetaObjectWorkflow

ROOT_ID = "ab" * 16


def test_signal_during_the_activity_wakes_the_pending_retry(temporal) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        client = await Client.connect(temporal.address)
        tq = f"nudge-{uuid.uuid4().hex[:8]}"
        key = f"nudge/{uuid.uuid4().hex}.bamlmeta.zst"
        wid = ids.project_meta_id(1, key)
        calls: list[tuple[str, ...]] = []
        loop = asyncio.get_running_loop()

        @activity.defn(name="project_meta_object")
        def project(inp: c.ProjectMetaInput) -> c.ProjectMetaResult:
            calls.append(inp.only_roots)
            if len(calls) == 1:
                # The pack lands while this run is under way: the bridge signals now.
                signal = client.get_workflow_handle(wid).signal("values_landed")
                asyncio.run_coroutine_threadsafe(signal, loop).result(10)
                waiting = c.ExecutionOutcome(ROOT_ID, c.PENDING, ("00" * 32,))
                return c.ProjectMetaResult(inp.key, 1, (waiting,))
            return c.ProjectMetaResult(inp.key, 1, (c.ExecutionOutcome(ROOT_ID, c.PROJECTED),))

        with ThreadPoolExecutor(2) as pool:
            async with Worker(
                client,
                task_queue=tq,
                workflows=[ProjectMetaObjectWorkflow],
                activities=[project],
                activity_executor=pool,
            ):
                handle = await client.start_workflow(
                    ids.PROJECT_META,
                    c.ProjectMetaWorkflowInput(key, 1, c.PendingPolicy(600.0, 600.0, 3600.0)),
                    id=wid,
                    task_queue=tq,
                    result_type=c.WorkflowOutcomes,
                )
                result = await asyncio.wait_for(handle.result(), 60)
        assert result.done and [o.outcome for o in result.outcomes] == [c.PROJECTED]
        assert calls == [(), (ROOT_ID,)]

    asyncio.run(main())
