"""A worker killed right after each step's work (before it reports) is replaced, and the erasure
still completes with a clean receipt: every step is idempotent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from corpus import make_corpus, put_all, root_rows_in_clickhouse
from erasure_corpus import project_corpus
from temporalio.client import Client

from activities.erasure import CRASH_AFTER_ENV
from formats import object_keys
from formats.contracts import ScopeRef
from formats.contracts import erasure as e
from workflows.erasure import ErasureWorkflow

ROOT = Path(__file__).resolve().parents[2]
STEPS = [
    e.DELETE_STREAM_OBJECTS,
    e.ERASE_FACTS,
    e.ERASE_LANCE_ROWS,
    e.DELETE_UNREFERENCED,
    e.CLEANUP_LANCE_VERSIONS,
    e.VERIFY,
    e.DISCARD_PLAN,
]


def test_worker_crash_in_every_step_then_completion(eworld: Any, temporal: Any, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path, eworld.scope, executions=4, processes=1)
    put_all(eworld, corpus)
    project_corpus(eworld, corpus)
    (euid,) = corpus.euids
    b = eworld.boundary
    tq = f"tq-{uuid.uuid4().hex[:8]}"
    cfg = json.dumps(
        {
            "temporal": temporal.address,
            "task_queue": tq,
            "s3": eworld.moto.endpoint,
            "bucket": eworld.bucket,
            "workload_url": b.workload_url,
            "tls_dir": str(b.tls.ca_cert.parent),
            "deployment_id": b.deployment_id,
            "cell": b.cell,
        }
    )
    s = eworld.scope
    inp = e.ErasureInput(
        erasure_id=f"crash{uuid.uuid4().hex[:8]}",
        scope=ScopeRef(s.tenant_id, s.project_id, s.environment_id),
        selector=e.Selector(process_euids=(euid,)),
        timeouts=e.StepTimeouts(activity_s=120, heartbeat_s=3, retry_initial_s=0.2, retry_max_s=1),
    )

    async def main() -> e.ErasureStatus:
        client = await Client.connect(temporal.address)
        handle = await client.start_workflow(
            ErasureWorkflow.run, inp, id=e.erasure_workflow_id(inp.erasure_id), task_queue=tq
        )
        for step in [*STEPS, None]:
            env = {**os.environ}
            env.pop(CRASH_AFTER_ENV, None)
            if step is not None:
                env[CRASH_AFTER_ENV] = step
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("crash_worker.py")), cfg], cwd=ROOT, env=env
            )
            if step is None:
                try:
                    return await asyncio.wait_for(handle.result(), timeout=120)
                finally:
                    proc.terminate()
                    proc.wait(10)
            code = await asyncio.to_thread(proc.wait, 120)
            assert code == 75, f"worker did not crash after {step}"
        raise AssertionError("unreachable")

    result = asyncio.run(main())
    assert result.state == e.SUCCEEDED, result
    assert result.receipt is not None and result.receipt["verified"]
    assert root_rows_in_clickhouse(eworld, euid) == {}
    assert eworld.lance.count(eworld.scope, "calls_v1", f"starts_with(execution_id, '{euid}')") == 0
    # The stored plan (it lists the erased roots) is gone with them, every version.
    plan_key = object_keys.erasure_plan_key(eworld.scope, inp.erasure_id)
    listed = eworld.s3.list_object_versions(Bucket=eworld.bucket, Prefix=plan_key)
    assert not listed.get("Versions") and not listed.get("DeleteMarkers")
