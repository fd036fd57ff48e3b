"""The long-running workflows hand over to new runs and lose nothing: real Temporal dev server, real
workflows, stub activities under the real names (stubs.py).

* ProjectMetaObject: a chain returns what one long run returns; values_landed reaches a successor
  run; the pending deadline counts in workflow time from the first start, across runs.
* Replay and Rebuild: the cursor and the totals travel; ``progress`` reports totals across runs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from parent_workflow import ParentOfAChain
from recordings import (
    ALL_WORKFLOWS,
    QUICK,
    R1,
    R2,
    R3,
    pending_chain_script,
    project_meta_quarantined_on_retry,
    project_meta_signal_after_continue_as_new,
    rebuild_continue_as_new,
    rebuild_pages,
    replay_pages,
    runs_of,
)
from stubs import ACTIVE_GENERATION, MetaScript, RootScript, Stubs
from temporalio.client import Client
from temporalio.worker import Worker

from formats.contracts import ids
from formats.contracts import projection as c
from workflows.maintenance import ReplayWorkflow
from workflows.projection import ProjectMetaObjectWorkflow


def _live(temporal: Any, body: Callable[[Client, str, Stubs, str], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        client = await Client.connect(temporal.address)
        tq = f"can-{uuid.uuid4().hex[:8]}"
        stubs = Stubs()
        async with Worker(client, task_queue=tq, workflows=ALL_WORKFLOWS, activities=stubs.activities()):
            return await body(client, tq, stubs, f"{tq}/")

    return asyncio.run(main())


async def _project(
    client: Client, tq: str, key: str, inp: c.ProjectMetaWorkflowInput
) -> tuple[c.WorkflowOutcomes, int]:
    handle = await client.start_workflow(
        ProjectMetaObjectWorkflow.run, inp, id=ids.project_meta_id(1, key), task_queue=tq
    )
    result = await asyncio.wait_for(handle.result(), 60)
    return result, len(await runs_of(client, handle))


def test_a_continue_as_new_chain_returns_what_one_long_run_returns(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        one, chain = f"{ns}one.bamlmeta.zst", f"{ns}chain.bamlmeta.zst"
        stubs.metas[one] = stubs.metas[chain] = pending_chain_script()
        long_run = await _project(client, tq, one, c.ProjectMetaWorkflowInput(one, 1, QUICK))
        # history_events=1: a hand-over after every projection.
        chained = await _project(
            client, tq, chain, c.ProjectMetaWorkflowInput(chain, 1, QUICK, history_events=1)
        )
        return long_run, chained, stubs.meta_calls[one], stubs.meta_calls[chain]

    (one, one_runs), (chain, chain_runs), one_calls, chain_calls = _live(temporal, body)
    assert one_runs == 1 and chain_runs == 4  # the first projection, then one run per re-try
    assert (chain.done, chain.outcomes, chain.quarantined) == (one.done, one.outcomes, one.quarantined)
    assert chain.done and [(o.root_id, o.outcome) for o in chain.outcomes] == [
        (R1, c.PROJECTED),
        (R2, c.PROJECTED),
        (R3, c.INDEX_CORRUPT),
    ]
    # Each re-try asked for exactly the roots still pending: nothing was forgotten or repeated.
    assert chain_calls == one_calls == [(), (R2, R3), (R2, R3), (R3,)]


def test_values_landed_reaches_the_run_after_continue_as_new(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        started = time.monotonic()
        handle = await project_meta_signal_after_continue_as_new(client, tq, stubs, ns)
        return (
            await handle.result(),
            len(await runs_of(client, handle)),
            time.monotonic() - started,
            handle.id,
        )

    result, runs, elapsed, wid = _live(temporal, body)
    assert runs == 2 and wid.startswith("project/1/")  # the successor kept the deterministic ID
    assert result.done and [o.outcome for o in result.outcomes] == [c.PROJECTED]
    assert elapsed < 60  # woken by the signal, not by the successor's 10-minute timer


def test_the_pending_deadline_counts_from_the_first_start_across_runs(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        key = f"{ns}never.bamlmeta.zst"
        # Each projection takes 0.5 s of workflow time too.
        stubs.metas[key] = MetaScript({R1: RootScript(10**6)}, delay_s=0.5)
        policy = c.PendingPolicy(initial_s=0.25, max_s=0.25, deadline_s=2.0)
        started = time.monotonic()
        out = await _project(client, tq, key, c.ProjectMetaWorkflowInput(key, 1, policy, history_events=1))
        return out, len(stubs.meta_calls[key]), time.monotonic() - started

    (result, runs), calls, elapsed = _live(temporal, body)
    assert not result.done and [(o.root_id, o.outcome) for o in result.outcomes] == [(R1, c.PENDING)]
    # Summing the delays would allow 8 re-tries (2.0 / 0.25); workflow time, which also counts
    # the projections, allows at most 2.0 / 0.75 + 1. A run restarting the clock would never stop.
    assert 2 <= calls <= 4 and runs == calls and elapsed < 30


def test_a_retry_in_a_successor_run_that_fails_verification_quarantines(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        handle = await project_meta_quarantined_on_retry(client, tq, stubs, ns)
        (key,) = stubs.metas
        return await handle.result(), len(await runs_of(client, handle)), stubs.quarantined, key

    result, runs, quarantined, key = _live(temporal, body)
    # Run 1 projected R2 and left R1 pending; run 2's re-try of R1 failed verification.
    assert runs == 2
    assert result.done and result.quarantined == "checksum_mismatch"
    assert [(o.root_id, o.outcome, o.reason) for o in result.outcomes] == [
        (R1, c.QUARANTINED, "checksum_mismatch"),
        (R2, c.PROJECTED, None),
    ]
    assert quarantined == [(key, "checksum_mismatch")]  # the marker, written once


def test_replay_carries_its_cursor_and_progress_reports_totals_across_runs(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        scope = c.ScopeRef("t1", "p1", f"{ns}env")
        stubs.pages[scope.environment_id] = replay_pages()
        gate = stubs.gates[scope.environment_id, 2] = asyncio.Event()
        handle = await client.start_workflow(
            ReplayWorkflow.run,
            c.ReplayInput(scope, page_size=10, history_events=1),
            id=ids.replay_id(f"{ns}r"),
            task_queue=tq,
        )
        await asyncio.wait_for(stubs.reached[scope.environment_id, 2].wait(), 30)
        # The third run is scanning page 3: its query holds the first two pages' totals.
        mid = await handle.query("progress", result_type=c.ReplayProgress)
        gate.set()
        done = await asyncio.wait_for(handle.result(), 30)
        return mid, done, len(await runs_of(client, handle)), stubs

    mid, done, runs, stubs = _live(temporal, body)
    assert runs == 3
    assert mid == c.ReplayProgress(ACTIVE_GENERATION, 20, 2, 1, False)
    assert done == c.ReplayProgress(ACTIVE_GENERATION, 27, 3, 3, True)
    # The active generation is read once; each page is listed once, in order.
    assert stubs.active_generation_calls == 1
    assert [(g, cur) for _, g, cur in stubs.scans] == [
        (ACTIVE_GENERATION, c) for c in ("", "page-1", "page-2")
    ]
    assert stubs.enqueued == [("p/1", "m/1", "m/2"), ("p/2", "p/3", "m/3")]


def test_rebuild_carries_its_generations_and_totals_and_switches_once(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        handle = await rebuild_continue_as_new(client, tq, stubs, ns)
        after = await handle.query("progress", result_type=c.RebuildProgress)
        return await handle.result(), after, len(await runs_of(client, handle)), stubs, ns

    done, after, runs, stubs, ns = _live(temporal, body)
    target = ACTIVE_GENERATION + 1
    assert runs == 2
    assert done == c.RebuildProgress(ACTIVE_GENERATION, target, 10, 1, 3, 0, True, True)
    assert after == done  # the closed chain's query answers with the totals, not the last run's share
    assert stubs.active_generation_calls == 1
    assert stubs.switched == [(f"{ns}env-1", target)]
    pages = rebuild_pages(ns)
    assert sorted(stubs.meta_calls) == sorted(k for p in pages for k in p.meta_keys)
    assert stubs.meta_calls[f"{ns}m/2"] == [(), (R1,)]  # the child's own pending re-try


def test_a_parent_gets_the_result_at_the_end_of_its_childs_chain(temporal) -> None:  # type: ignore[no-untyped-def]
    async def body(client: Client, tq: str, stubs: Stubs, ns: str) -> Any:
        key = f"{ns}child.bamlmeta.zst"
        stubs.metas[key] = pending_chain_script()
        async with Worker(client, task_queue=f"{tq}-parent", workflows=[ParentOfAChain]):
            result = await client.execute_workflow(
                ParentOfAChain.run,
                args=[c.ProjectMetaWorkflowInput(key, 1, QUICK, history_events=1), tq],
                id=f"{ns}parent",
                task_queue=f"{tq}-parent",
            )
        child = client.get_workflow_handle(ids.project_meta_id(1, key))
        return result, len(await runs_of(client, child))

    result, child_runs = _live(temporal, body)
    assert child_runs == 4 and result.done
    assert [o.outcome for o in result.outcomes] == [c.PROJECTED, c.PROJECTED, c.INDEX_CORRUPT]
