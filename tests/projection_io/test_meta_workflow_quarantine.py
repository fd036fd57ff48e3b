"""ProjectMetaObject quarantines an object that fails verification on any projection, not only the
first: the Temporal dev server, the real workflow and activities on an in-process worker, moto S3
and Boundary. (The successor-run case, with stub activities, is in tests/workflows.)"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from corpus import make_corpus, put_all
from temporalio.client import Client

from formats import meta_segment as ms
from formats.contracts import ids
from formats.contracts import projection as c
from formats.zstd_frame import decompress_object
from worker.temporal_worker import build_worker
from workflows.projection import ProjectMetaObjectWorkflow


def _root_ended_count(key: str, body: bytes) -> int:
    seg = ms.decode_meta_segment(decompress_object(body, file=key), file=key)
    return sum(isinstance(r, ms.RootEnded) for r in seg.records)


def run_with_worker(temporal: Any, world: Any, body: Any) -> Any:
    async def main() -> Any:
        client = await Client.connect(temporal.address)
        tq = f"tq-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, tq, world.acts.activities()):
            return await body(client, tq)

    return asyncio.run(main())


def test_meta_object_corrupted_before_a_retry_is_quarantined_on_the_retry(
    temporal, world, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Verification that fails only on a pending re-try: the marker is written and the result
    says quarantined (done), as on a first attempt, instead of a failed workflow."""
    from test_projection_activities import _corrupt_trailer

    corpus = make_corpus(tmp_path, world.scope, executions=8)
    put_all(world, corpus, skip=set(corpus.up.pack_keys))  # no values yet: executions wait
    key = max(corpus.up.meta_keys, key=lambda k: _root_ended_count(k, corpus.up.bodies[k]))
    # A first re-try far off: the test corrupts the object, then wakes the workflow itself.
    slow = c.PendingPolicy(initial_s=600.0, max_s=600.0, deadline_s=3600.0)

    async def body(client: Client, tq: str) -> tuple[list[c.ExecutionOutcome], c.WorkflowOutcomes]:
        handle = await client.start_workflow(
            ProjectMetaObjectWorkflow.run,
            c.ProjectMetaWorkflowInput(key, 1, slow),
            id=ids.project_meta_id(1, key) + f"#{tq}",
            task_queue=tq,
        )
        deadline = time.monotonic() + 60
        first: list[c.ExecutionOutcome] = []
        while not first and time.monotonic() < deadline:
            first = await handle.query(ProjectMetaObjectWorkflow.outcomes)
            await asyncio.sleep(0.1)
        # The first projection read a sound object; only now does it stop verifying.
        world.s3.put_object(Bucket=world.bucket, Key=key, Body=_corrupt_trailer(corpus.up.bodies[key]))
        await handle.signal(ProjectMetaObjectWorkflow.values_landed)
        return first, await asyncio.wait_for(handle.result(), 60)

    first, result = run_with_worker(temporal, world, body)
    waiting = {o.root_id for o in first if o.outcome == c.PENDING}
    assert waiting, "the first projection must leave executions pending"
    assert result.done and result.quarantined == "checksum_mismatch"
    by_root = {o.root_id: o for o in result.outcomes}
    assert {r for r, o in by_root.items() if o.outcome == c.QUARANTINED} == waiting
    assert {by_root[r].reason for r in waiting} == {"checksum_mismatch"}
    marker = world.s3.get_object(Bucket=world.bucket, Key=f"quarantine/{key}.quarantine")
    assert json.loads(marker["Body"].read())["reason"] == "checksum_mismatch"
