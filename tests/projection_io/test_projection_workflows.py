"""The projection workflows on the Temporal dev server, with the activities on an in-process worker
(and, for the crash test, in a worker process that is killed mid-activity)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from corpus import make_corpus, put_all, root_rows_in_clickhouse
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, ScheduleActionStartWorkflow, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from activities.runtime import Identity
from activities.settings import ProjectionSettings
from formats import meta_segment as ms
from formats.contracts import Workload, ids
from formats.contracts import projection as c
from formats.contracts import task_queue as queue_of
from formats.zstd_frame import decompress_object
from worker.temporal_worker import build_worker, ensure_schedules
from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow

FAST = c.PendingPolicy(initial_s=0.5, max_s=1.0, deadline_s=60.0)

ROOT = Path(__file__).resolve().parents[2]  # the repository root: the worker runs from it


async def start_meta(
    client: Client, tq: str, key: str, generation: int = 1, **kw: Any
) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        ProjectMetaObjectWorkflow.run,
        c.ProjectMetaWorkflowInput(key, generation, FAST, **kw),
        id=ids.project_meta_id(generation, key) + f"#{tq}",
        task_queue=tq,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
    )


async def start_pack(client: Client, tq: str, key: str) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        IngestValuePackWorkflow.run,
        c.PackWorkflowInput(key),
        id=ids.ingest_pack_id(key) + f"#{tq}",
        task_queue=tq,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
    )


def run_with_worker(temporal: Any, world: Any, body: Any) -> Any:
    async def main() -> Any:
        client = await Client.connect(temporal.address)
        tq = f"tq-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, tq, [*world.acts.activities(), *world.maintenance.activities()]):
            return await body(client, tq)

    return asyncio.run(main())


def test_meta_workflow_projects_once_and_duplicate_start_is_refused(temporal, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=15)
    put_all(world, corpus)

    async def body(client: Client, tq: str) -> list[c.WorkflowOutcomes]:
        for k in corpus.up.pack_keys:
            assert (await (await start_pack(client, tq, k)).result()).done
        results = []
        for k in corpus.up.meta_keys:
            first, second = await asyncio.gather(start_meta(client, tq, k), start_meta(client, tq, k))
            assert first.result_run_id == second.result_run_id  # concurrent starts attach to one run
            results.append(await first.result())
            try:
                await start_meta(client, tq, k)
                raise AssertionError("a completed ID must not run again")
            except WorkflowAlreadyStartedError:
                pass
        return results

    results = run_with_worker(temporal, world, body)
    assert all(r.done and r.quarantined is None for r in results)
    projected = {o.root_id for r in results for o in r.outcomes if o.outcome == c.PROJECTED}
    assert projected == corpus.ended_ids
    rows = root_rows_in_clickhouse(world, corpus.euids[0])
    assert set(rows) == corpus.ended_ids and set(rows.values()) == {1}


def test_pending_execution_is_projected_when_its_pack_lands(temporal, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=8)
    put_all(world, corpus, skip=set(corpus.up.pack_keys))

    async def body(client: Client, tq: str) -> list[c.WorkflowOutcomes]:
        handles = [await start_meta(client, tq, k) for k in corpus.up.meta_keys]
        await asyncio.sleep(1.5)
        waiting = [o for h in handles for o in await h.query(ProjectMetaObjectWorkflow.outcomes)]
        assert any(o.outcome == c.PENDING for o in waiting)
        put_all(world, corpus)  # the packs land; the bridge would start these from their events
        for k in corpus.up.pack_keys:
            await (await start_pack(client, tq, k)).result()
        return [await h.result() for h in handles]

    results = run_with_worker(temporal, world, body)
    assert all(r.done for r in results)
    assert {o.root_id for r in results for o in r.outcomes} == corpus.ended_ids
    assert {o.outcome for r in results for o in r.outcomes} == {c.PROJECTED}


def test_corrupt_meta_object_workflow_writes_marker_and_reports_quarantine(
    temporal, world, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from test_projection_activities import _corrupt_trailer

    corpus = make_corpus(tmp_path, world.scope, executions=3)
    put_all(world, corpus)
    bad = corpus.up.meta_keys[0]
    world.s3.put_object(Bucket=world.bucket, Key=bad, Body=_corrupt_trailer(corpus.up.bodies[bad]))

    async def body(client: Client, tq: str) -> c.WorkflowOutcomes:
        return await (await start_meta(client, tq, bad)).result()

    result = run_with_worker(temporal, world, body)
    assert result.done and result.quarantined == "checksum_mismatch"
    assert world.s3.head_object(Bucket=world.bucket, Key=f"quarantine/{bad}.quarantine")


def test_schedules_are_created_idempotently(temporal, world) -> None:  # type: ignore[no-untyped-def]
    env = f"env-{uuid.uuid4().hex[:6]}"
    identity = Identity("dep", "cell", "t1", (("p1", env),), None, None, None)

    async def main() -> list[str]:
        client = await Client.connect(temporal.address)
        first = await ensure_schedules(client, "tq", identity, ProjectionSettings(sweep_interval_s=120))
        second = await ensure_schedules(client, "tq", identity, ProjectionSettings(sweep_interval_s=60))
        assert first == second
        desc = await client.get_schedule_handle(ids.sweep_schedule_id("t1", "p1", env)).describe()
        every = desc.schedule.spec.intervals[0].every.total_seconds()
        for sid in first:
            await client.get_schedule_handle(sid).delete()
        assert every == 60
        return first

    names = asyncio.run(main())
    assert names == [f"sweep/t1/p1/{env}", f"index/t1/p1/{env}"]


class _TimesOutOnce:
    """The real Temporal client, except that its first ``create_schedule`` times out the way a
    loaded frontend answers (RPCError DEADLINE_EXCEEDED, "Timeout expired")."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self.failed = 0

    async def create_schedule(self, *args: Any, **kwargs: Any) -> Any:
        from temporalio.service import RPCError, RPCStatusCode

        if not self.failed:
            self.failed += 1
            raise RPCError("Timeout expired", RPCStatusCode.DEADLINE_EXCEEDED, b"")
        return await self._client.create_schedule(*args, **kwargs)

    def get_schedule_handle(self, schedule_id: str) -> Any:
        return self._client.get_schedule_handle(schedule_id)


def test_schedules_are_ensured_again_after_a_timeout(temporal, world) -> None:  # type: ignore[no-untyped-def]
    """A worker restarted under load must not exit when its schedule update times out."""
    from worker.temporal_worker import keep_ensuring_schedules

    env = f"env-{uuid.uuid4().hex[:6]}"
    identity = Identity("dep", "cell", "t1", (("p1", env),), None, None, None)

    async def main() -> tuple[list[str], int, str]:
        real = await Client.connect(temporal.address)
        flaky = _TimesOutOnce(real)
        names = await keep_ensuring_schedules(flaky, "tq", identity, ProjectionSettings(), max_wait_s=0.2)  # type: ignore[arg-type]
        desc = await real.get_schedule_handle(names[0]).describe()
        for sid in names:
            await real.get_schedule_handle(sid).delete()
        action = desc.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        return names, flaky.failed, action.task_queue

    names, failed, queue = asyncio.run(main())
    assert failed == 1 and names == [f"sweep/t1/p1/{env}", f"index/t1/p1/{env}"]
    assert queue == queue_of("tq", Workload.MAINTENANCE)  # the schedules start maintenance work


def _root_ended_count(key: str, body: bytes) -> int:
    seg = ms.decode_meta_segment(decompress_object(body, file=key), file=key)
    return sum(isinstance(r, ms.RootEnded) for r in seg.records)


def _worker_process(
    temporal: Any, world: Any, tq: str, log: Path, extra: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    b = world.boundary
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAML_STUDIO_")}
    env |= {
        "BAML_STUDIO_WORKER_TEMPORAL_ADDRESS": temporal.address,
        "BAML_STUDIO_WORKER_TASK_QUEUE": tq,
        "BAML_STUDIO_WORKER_S3_ENDPOINT_URL": world.moto.endpoint,
        "BAML_STUDIO_WORKER_BUCKET": world.bucket,
        "BAML_STUDIO_WORKER_BOUNDARY_WORKLOAD_URL": b.workload_url,
        "BAML_STUDIO_WORKER_TLS_DIR": str(b.tls.ca_cert.parent),
        "BAML_STUDIO_PROJECTION_DEPLOYMENT_ID": b.deployment_id,
        "BAML_STUDIO_PROJECTION_CELL": b.cell,
        "BAML_STUDIO_PROJECTION_TENANT_ID": b.scope.tenant_id,
        "BAML_STUDIO_STACK_RUN_DIR": str(log.parent / "no-stack"),
        "BAML_STUDIO_EMBEDDED_STACK": "1",  # moto's placeholder keys, as in the embedded stack
        **(extra or {}),
    }
    out = open(log, "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "worker.temporal_worker"], cwd=ROOT, env=env, stdout=out, stderr=out
    )


def test_worker_killed_mid_activity_is_completed_by_redelivery(temporal, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = make_corpus(tmp_path, world.scope, executions=120, publish_interval_ns=10_000_000_000)
    put_all(world, corpus)
    for k in corpus.up.pack_keys:
        world.acts.ingest_pack(c.IngestPackInput(k))
    # The meta object with the most RootEnded records (the largest one holds the RootStarted
    # records and no RootEnded: projecting it legitimately returns no outcomes).
    key = max(corpus.up.meta_keys, key=lambda k: _root_ended_count(k, corpus.up.bodies[k]))
    assert _root_ended_count(key, corpus.up.bodies[key]) > 0
    tq = f"tq-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"

    async def main() -> c.WorkflowOutcomes:
        client = await Client.connect(temporal.address)
        proc = _worker_process(temporal, world, tq, log)
        try:
            handle = await start_meta(client, tq, key, heartbeat_timeout_s=3.0)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # wait until the activity runs in the worker
                desc = await handle.describe()
                pending = desc.raw_description.pending_activities
                if pending and pending[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        proc = _worker_process(temporal, world, tq, log)
        try:
            result: c.WorkflowOutcomes = await asyncio.wait_for(handle.result(), 120)
        finally:
            proc.terminate()
            proc.wait(15)
        # The first attempt died with its worker: after the heartbeat timeout a later attempt
        # (the redelivery) produced the result; Temporal records the attempt on the started event.
        events = [e async for e in handle.fetch_history_events()]
        assert (
            max(
                e.activity_task_started_event_attributes.attempt
                for e in events
                if e.HasField("activity_task_started_event_attributes")
            )
            >= 2
        )
        return result

    result = asyncio.run(main())
    assert result.done
    ended_here = {o.root_id for o in result.outcomes}
    assert ended_here and {o.outcome for o in result.outcomes} == {c.PROJECTED}
    rows = root_rows_in_clickhouse(world, corpus.euids[0])
    assert ended_here <= set(rows) and {rows[r] for r in ended_here} == {1}
    ledger = world.lance.read(world.scope, "projected_executions")
    assert ledger.num_rows == len(set(ledger["row_id"].to_pylist()))
    leaves = world.lance.read(world.scope, "value_leaves_v1", columns=["row_id"])
    assert leaves.num_rows == len(set(leaves["row_id"].to_pylist()))


async def _workflow_pollers(client: Client, queue: str) -> int:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    resp = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(resp.pollers)


def test_worker_process_polls_one_queue_per_workload(temporal, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each workload class has its own queue (and so its own slots); a process may run a subset."""
    corpus = make_corpus(tmp_path, world.scope, executions=4)
    put_all(world, corpus)
    every, only = f"tq-{uuid.uuid4().hex[:8]}", f"tq-{uuid.uuid4().hex[:8]}"
    queues = {w: queue_of(every, w) for w in Workload}
    assert len(set(queues.values())) == 4 and queues[Workload.PROJECTION] == every

    async def main() -> tuple[dict[Workload, int], dict[Workload, int], c.WorkflowOutcomes]:
        client = await Client.connect(temporal.address)
        log = tmp_path / "worker.log"
        procs = [
            _worker_process(temporal, world, every, log),
            _worker_process(temporal, world, only, log, {"BAML_STUDIO_WORKER_WORKLOADS": '["maintenance"]'}),
        ]
        try:
            deadline = time.monotonic() + 60
            polled: dict[Workload, int] = {}
            while time.monotonic() < deadline:
                polled = {w: await _workflow_pollers(client, q) for w, q in queues.items()}
                if all(polled.values()) and await _workflow_pollers(
                    client, queue_of(only, Workload.MAINTENANCE)
                ):
                    break
                await asyncio.sleep(0.3)
            # The bridge's start (the base queue) projects; a sweep runs on the maintenance queue.
            for k in corpus.up.pack_keys:
                assert (await (await start_pack(client, every, k)).result()).done
            projected = await (await start_meta(client, every, corpus.up.meta_keys[-1])).result()
            scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
            swept = await client.execute_workflow(
                ids.SWEEP,
                c.SweepInput(scope),
                id=f"sweep-{only}",
                task_queue=queue_of(only, Workload.MAINTENANCE),
                result_type=c.SweepResult,
            )
            assert swept.streams_checked >= 1
            subset = {w: await _workflow_pollers(client, queue_of(only, w)) for w in Workload}
            return polled, subset, projected
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(15)

    polled, subset, projected = asyncio.run(main())
    assert all(polled.values()), polled
    assert subset == {
        Workload.PROJECTION: 0,
        Workload.MAINTENANCE: 1,
        Workload.QUERY_JOBS: 0,
        Workload.ERASURE: 0,
    }
    assert projected.done
