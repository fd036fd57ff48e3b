"""values_landed wakes a waiting ProjectMetaObject only for the values it waits for: real Temporal
dev server, real workflows, stub activities under the real names (stubs.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from recordings import ALL_WORKFLOWS, R1
from stubs import MetaScript, RootScript, Stubs
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from formats.contracts import ids
from formats.contracts import projection as c
from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow

WAITED_FOR = "cd" * 32  # the CID the stub reports missing for a pending execution
OTHER = "ab" * 32
# The back-off alone would wait ten minutes: a re-try within the test is a signal's doing.
LONG = c.PendingPolicy(initial_s=600.0, max_s=600.0, deadline_s=3600.0)

Body = Callable[[Client, str, Stubs, WorkflowHandle[Any, c.WorkflowOutcomes], str], Awaitable[Any]]


def _with_one_pending(temporal: Any, body: Body) -> Any:
    """Start a meta object whose one execution is pending after its first projection, then run
    ``body`` with the workflow waiting on its (ten-minute) back-off."""

    async def main() -> Any:
        client = await Client.connect(temporal.address)
        tq = f"landed-{uuid.uuid4().hex[:8]}"
        stubs = Stubs()
        key = f"{tq}/meta.bamlmeta.zst"
        stubs.metas[key] = MetaScript({R1: RootScript(pending_calls=1)})
        async with Worker(client, task_queue=tq, workflows=ALL_WORKFLOWS, activities=stubs.activities()):
            handle = await client.start_workflow(
                ProjectMetaObjectWorkflow.run,
                c.ProjectMetaWorkflowInput(key, 1, LONG),
                id=ids.project_meta_id(1, key),
                task_queue=tq,
            )
            while not stubs.meta_calls[key]:
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # the first projection has returned R1 pending
            return await body(client, tq, stubs, handle, key)

    return asyncio.run(main())


def test_a_pack_of_other_values_does_not_wake_it_and_its_own_pack_does(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, handle: Any, key: str) -> Any:
        # The pack workflow reports what it committed: what the bridge passes on.
        pack = await client.execute_workflow(
            IngestValuePackWorkflow.run,
            c.PackWorkflowInput(f"{tq}/p.bamlpack.zst"),
            id=f"pack-{tq}",
            task_queue=tq,
        )
        await handle.signal(ProjectMetaObjectWorkflow.values_landed, [OTHER])
        await asyncio.sleep(2.0)
        after_other = len(stubs.meta_calls[key])
        await handle.signal(ProjectMetaObjectWorkflow.values_landed, [OTHER, WAITED_FOR])
        result = await asyncio.wait_for(handle.result(), 30)
        return after_other, len(stubs.meta_calls[key]), result, pack

    after_other, calls, result, pack = _with_one_pending(temporal, body)
    assert pack.done and pack.landed_cids == (WAITED_FOR, "ef" * 32)
    assert after_other == 1  # a pack of other values: no re-try
    assert calls == 2 and result.done
    assert [(o.root_id, o.outcome) for o in result.outcomes] == [(R1, c.PROJECTED)]


def test_a_wake_without_cids_always_re_tries(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, handle: Any, key: str) -> Any:
        await handle.signal(ProjectMetaObjectWorkflow.values_landed)  # an operator's nudge
        return await asyncio.wait_for(handle.result(), 30)

    result = _with_one_pending(temporal, body)
    assert result.done and [o.outcome for o in result.outcomes] == [c.PROJECTED]
