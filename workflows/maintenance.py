"""Scheduled and operator workflows: sweep, index/compaction, replay, rebuild (no I/O here).

* :class:`SweepWorkflow`: a Temporal Schedule per environment (every 5 min by default) closes
  executions of silent streams as abandoned.
* :class:`IndexAndCompactWorkflow`: a Schedule per environment builds indexes, compacts and
  cleans old Lance versions; it changes no execution state.
* :class:`ReplayWorkflow` (operator-named): lists the evidence of a scope page by page, finds
  meta objects with a RootEnded not in the generation's ledger and packs whose values are not
  in values_v1, and enqueues an S3-event-shaped message for each; progress via ``progress``.
* :class:`RebuildWorkflow` (operator-named): projects every meta object into generation N+1 as
  child workflows, ingests missing packs, then switches the active generation (an activity
  holding operator credentials) once every child is done.

Replay and Rebuild continue as new between pages once the history nears its bound
(``history_bound.history_full``), carrying the cursor and the totals in their input
(``cursor``, ``carried``): the ID stays, the result follows the chain, and ``progress`` reports the
chain's totals.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy

with workflow.unsafe.imports_passed_through():
    from activities.maintenance_activities import MaintenanceActivities as M
    from activities.projection_activities import ProjectionActivities as A
    from activities.runtime import GenerationSwitch
    from formats.contracts import ids
    from formats.contracts import projection as c
    from workflows.history_bound import bounded_history, history_full
    from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow

_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=60))
_Start = tuple[str, Any, Any]  # (child workflow id, its run method, its input)
_LONG = timedelta(minutes=30)


@workflow.defn(name=ids.SWEEP)
class SweepWorkflow:
    @workflow.run
    async def run(self, inp: c.SweepInput) -> c.SweepResult:
        return await workflow.execute_activity_method(
            M.sweep,
            inp,
            start_to_close_timeout=_LONG,
            heartbeat_timeout=timedelta(minutes=5),
            retry_policy=_RETRY,
        )


@workflow.defn(name=ids.INDEX_AND_COMPACT)
class IndexAndCompactWorkflow:
    @workflow.run
    async def run(self, inp: c.IndexInput) -> c.IndexResult:
        return await workflow.execute_activity_method(
            M.index_and_compact,
            inp,
            start_to_close_timeout=timedelta(hours=2),
            # The activity beats every few seconds even inside a long fold (activities.heartbeat.
            # beating), so an attempt on a worker that died is retried in two minutes.
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=_RETRY,
        )


async def _active_generation(environment_id: str) -> int:
    return await workflow.execute_activity_method(
        A.active_generation,
        c.ActiveGenerationInput(environment_id),
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=_RETRY,
    )


async def _scan(inp: c.ReplayScanInput) -> c.ReplayScanResult:
    return await workflow.execute_activity_method(
        M.replay_scan,
        inp,
        start_to_close_timeout=_LONG,
        retry_policy=_RETRY,
    )


@workflow.defn(name=ids.REPLAY)
class ReplayWorkflow:
    def __init__(self) -> None:
        self._progress = c.ReplayProgress(0, 0, 0, 0, False)

    @workflow.query(name="progress")
    def progress(self) -> c.ReplayProgress:
        return self._progress

    @workflow.run
    async def run(self, inp: c.ReplayInput) -> c.ReplayProgress:
        bounded = bounded_history()
        generation = inp.generation
        if generation is None:
            generation = await _active_generation(inp.scope.environment_id)
        # Totals of the earlier runs of this chain (continue-as-new): the query reports the sum.
        before = inp.carried or c.ReplayProgress(generation, 0, 0, 0, False)
        scanned, metas, packs = before.scanned, before.meta_enqueued, before.packs_enqueued
        self._progress = c.ReplayProgress(generation, scanned, metas, packs, False)
        cursor = inp.cursor
        while True:
            page = await _scan(c.ReplayScanInput(inp.scope, generation, cursor, inp.page_size))
            scanned += page.scanned
            # Packs first: their values are what pending executions wait for.
            keys = page.missing_pack_keys + page.missing_meta_keys
            if keys:
                await workflow.execute_activity_method(
                    M.enqueue_replay,
                    c.EnqueueInput(keys),
                    start_to_close_timeout=timedelta(minutes=5),
                    retry_policy=_RETRY,
                )
            metas += len(page.missing_meta_keys)
            packs += len(page.missing_pack_keys)
            self._progress = c.ReplayProgress(generation, scanned, metas, packs, False)
            if page.next_start_after is None:
                break
            cursor = page.next_start_after
            if bounded and history_full(inp.history_events):
                workflow.continue_as_new(
                    replace(inp, generation=generation, cursor=cursor, carried=self._progress)
                )
        self._progress = c.ReplayProgress(generation, scanned, metas, packs, True)
        return self._progress


@workflow.defn(name=ids.REBUILD)
class RebuildWorkflow:
    def __init__(self) -> None:
        self._progress = c.RebuildProgress(0, 0, 0, 0, 0, 0, False, False)

    @workflow.query(name="progress")
    def progress(self) -> c.RebuildProgress:
        return self._progress

    async def _children(self, starts: list[_Start], limit: int) -> list[c.WorkflowOutcomes]:
        results: list[c.WorkflowOutcomes] = []
        for i in range(0, len(starts), limit):
            handles: list[Any] = []
            for wid, run, arg in starts[i : i + limit]:
                handles.append(
                    await workflow.start_child_workflow(
                        run,
                        arg,
                        id=wid,
                        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                    )
                )
            for handle in handles:
                results.append(await handle)
        return results

    @workflow.run
    async def run(self, inp: c.RebuildInput) -> c.RebuildProgress:
        bounded = bounded_history()
        before = inp.carried
        if before is None:
            source = await _active_generation(inp.scope.environment_id)
            before = c.RebuildProgress(source, source + 1, 0, 0, 0, 0, False, False)
        # A successor run keeps the first run's generations: the switch must target what the
        # children projected into, even if someone switched meanwhile.
        source, target = before.from_generation, before.to_generation
        scanned, packs, metas, not_done = (
            before.scanned,
            before.packs_ingested,
            before.metas_projected,
            before.not_done,
        )
        self._progress = c.RebuildProgress(source, target, scanned, packs, metas, not_done, False, False)
        cursor = inp.cursor
        while True:
            page = await _scan(c.ReplayScanInput(inp.scope, target, cursor, inp.page_size))
            scanned += page.scanned
            pack_starts: list[_Start] = [
                (
                    ids.ingest_pack_id(k) + f"/rebuild-{target}",
                    IngestValuePackWorkflow.run,
                    c.PackWorkflowInput(k),
                )
                for k in page.missing_pack_keys
            ]
            for r in await self._children(pack_starts, inp.max_children):
                packs += 1
                not_done += 0 if r.done else 1
            meta_starts: list[_Start] = [
                (
                    ids.project_meta_id(target, k),
                    ProjectMetaObjectWorkflow.run,
                    c.ProjectMetaWorkflowInput(k, target, inp.pending),
                )
                for k in page.missing_meta_keys
            ]
            for r in await self._children(meta_starts, inp.max_children):
                metas += 1
                not_done += 0 if r.done else 1
            self._progress = c.RebuildProgress(source, target, scanned, packs, metas, not_done, False, False)
            if page.next_start_after is None:
                break
            cursor = page.next_start_after
            # Every child of the page has finished here: nothing is left running across the hand-over.
            if bounded and history_full(inp.history_events):
                workflow.continue_as_new(replace(inp, cursor=cursor, carried=self._progress))
        switched = False
        if inp.switch and not_done == 0:
            result = await workflow.execute_activity_method(
                GenerationSwitch.switch_generation,
                c.SwitchGenerationInput(inp.scope.environment_id, target),
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=_RETRY,
            )
            switched = result.switched
        self._progress = c.RebuildProgress(source, target, scanned, packs, metas, not_done, switched, True)
        return self._progress


# Every workflow the worker registers.
WORKFLOWS = [
    ProjectMetaObjectWorkflow,
    IngestValuePackWorkflow,
    SweepWorkflow,
    IndexAndCompactWorkflow,
    ReplayWorkflow,
    RebuildWorkflow,
]
