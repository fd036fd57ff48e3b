"""Projection workflows: deterministic orchestration of the projection activities (no I/O here).

Read alongside the spec's upload sequence (steps 8-12):

* :class:`ProjectMetaObjectWorkflow` (``project/<generation>/<key>``): project every RootEnded
  of one meta object; executions still waiting for values are re-tried with a durable,
  backing-off timer until they land (the pack's own workflow ingests them; the re-try, or a
  ``values_landed`` signal, picks them up). Done when every execution is projected,
  index_corrupt, abandoned or quarantined, or when ``pending.deadline_s`` of workflow time has
  passed since the first start. The loop continues as new before the history grows past
  ``history_events`` (same workflow ID; the outcomes, the back-off and the start time travel in
  ``ProjectMetaWorkflowInput.carried``), so the chain returns what one long run would.
* :class:`IngestValuePackWorkflow` (``pack/<key>``): merge one pack into values_v1.
* A meta object or pack that fails verification gets its quarantine marker written here and the
  result says ``quarantined``: the bridge dead-letters the message instead of deleting it. For a
  meta object that holds on every projection, the first and each pending re-try (the executions
  still pending are then reported quarantined).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.projection_activities import ProjectionActivities as A
    from formats.contracts import ids
    from formats.contracts import projection as c
    from workflows.history_bound import bounded_history, history_full

_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    non_retryable_error_types=[c.ERR_QUARANTINED, c.ERR_STALE_GENERATION],
)
_SHORT = timedelta(seconds=30)


def _quarantine_reason(err: ActivityError) -> str | None:
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == c.ERR_QUARANTINED:
        return str(cause.details[0]) if cause.details else "verification_failed"
    return None


# Runs whose re-try already failed verification before this patch failed the workflow there: a
# replay of such a history (a query on it) must fail the same way, so the re-try's quarantine is
# behind a marker. Remove (workflow.deprecate_patch) once no such closed run can be queried.
QUARANTINE_ON_RETRY_PATCH = "quarantine-on-retry-v1"


async def _quarantine(key: str, reason: str) -> None:
    await workflow.execute_activity_method(
        A.quarantine_object,
        c.QuarantineInput(key, reason),
        start_to_close_timeout=_SHORT,
        retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
    )


@workflow.defn(name=ids.PROJECT_META)
class ProjectMetaObjectWorkflow:
    def __init__(self) -> None:
        self._outcomes: dict[str, c.ExecutionOutcome] = {}
        self._nudged = False

    @workflow.signal(name="values_landed")
    def values_landed(self, cids: list[str] | None = None) -> None:
        """Wake the pending back-off early (e.g. after a pack ingest).

        With ``cids`` (what a pack ingest committed), only when one of them is a value a pending
        execution waits for: a stream's pack woke every waiting meta object of the stream, and
        each woken one re-ran its projection, so a long stream with many meta objects waiting
        spent most of its work on re-tries that could not succeed (bench/soak.py). Without
        ``cids`` (an operator, an older bridge), always."""
        if cids is None or self._waits_for(set(cids)):
            self._nudged = True

    def _waits_for(self, landed: set[str]) -> bool:
        pending = [o for o in self._outcomes.values() if o.outcome == c.PENDING]
        # A pending execution that names no missing value (or none known yet, before the first
        # projection returned) may wait for anything.
        return not pending or any(not o.missing_cids or landed.intersection(o.missing_cids) for o in pending)

    @workflow.query(name="outcomes")
    def outcomes(self) -> list[c.ExecutionOutcome]:
        return list(self._outcomes.values())

    async def _project(self, inp: c.ProjectMetaWorkflowInput, only: tuple[str, ...]) -> c.ProjectMetaResult:
        return await workflow.execute_activity_method(
            A.project_meta_object,
            c.ProjectMetaInput(inp.key, inp.generation, only),
            start_to_close_timeout=timedelta(seconds=inp.activity_timeout_s),
            heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout_s),
            retry_policy=_RETRY,
        )

    def _done(self, inp: c.ProjectMetaWorkflowInput, quarantined: str | None = None) -> c.WorkflowOutcomes:
        outcomes = tuple(self._outcomes[k] for k in sorted(self._outcomes))
        done = all(o.outcome in c.DONE_OUTCOMES for o in outcomes)
        return c.WorkflowOutcomes(inp.key, done, outcomes, quarantined)

    @workflow.run
    async def run(self, inp: c.ProjectMetaWorkflowInput) -> c.WorkflowOutcomes:
        carried = inp.carried
        bounded = bounded_history()
        if carried is None:
            started_at = workflow.now().timestamp()
            try:
                # A values_landed that arrives while an activity runs must not be lost: the flag is
                # cleared before each projection, not before the wait.
                self._nudged = False
                first = await self._project(inp, ())
            except ActivityError as err:
                reason = _quarantine_reason(err)
                if reason is None:
                    raise
                await _quarantine(inp.key, reason)
                return self._done(inp, quarantined=reason)
            self._outcomes.update({o.root_id: o for o in first.outcomes})
            delay = inp.pending.initial_s
            projected_here = True
        else:
            # A successor run: the first projection is done; only the pending loop goes on. A
            # signal the previous run had not consumed yet, or one that reached this run before
            # its first task, both count.
            started_at = carried.started_at_unix
            self._outcomes = {o.root_id: o for o in carried.outcomes}
            self._nudged = self._nudged or carried.nudged
            delay = carried.next_delay_s
            projected_here = False

        deadline_at = started_at + inp.pending.deadline_s
        waited = 0.0  # the old rule (runs without the patch marker): the deadline is the delays' sum
        while True:
            pending = tuple(sorted(k for k, o in self._outcomes.items() if o.outcome == c.PENDING))
            if bounded:
                remaining = deadline_at - workflow.now().timestamp()
            else:
                remaining = inp.pending.deadline_s - waited
            if not pending or remaining <= 0:
                break
            # A run hands over only after a projection of its own: every run makes progress, so
            # a bound below a run's own overhead cannot make the chain spin.
            if bounded and projected_here and history_full(inp.history_events):
                workflow.continue_as_new(
                    replace(
                        inp,
                        carried=c.PendingCarry(
                            started_at_unix=started_at,
                            outcomes=tuple(self._outcomes[k] for k in sorted(self._outcomes)),
                            next_delay_s=delay,
                            nudged=self._nudged,
                            runs=(carried.runs if carried else 1) + 1,
                        ),
                    )
                )
            # The last wait ends at the deadline, so the final re-try happens at it, not past it.
            wait = min(delay, remaining) if bounded else delay
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._nudged, timeout=timedelta(seconds=wait))
            waited += delay
            delay = min(delay * 2, inp.pending.max_s)
            self._nudged = False
            try:
                again = await self._project(inp, pending)
            except ActivityError as err:
                # The object can fail verification on a re-try too (re-read, or in a successor
                # run, whose first projection is this one): the same marker and result as the
                # first attempt, not a failed workflow the bridge would redeliver.
                reason = _quarantine_reason(err)
                if reason is None or not workflow.patched(QUARANTINE_ON_RETRY_PATCH):
                    raise
                await _quarantine(inp.key, reason)
                # The executions still waiting can no longer be projected from this object.
                for root in pending:
                    self._outcomes[root] = c.ExecutionOutcome(root, c.QUARANTINED, reason=reason)
                return self._done(inp, quarantined=reason)
            projected_here = True
            self._outcomes.update({o.root_id: o for o in again.outcomes})
        return self._done(inp)


@workflow.defn(name=ids.INGEST_PACK)
class IngestValuePackWorkflow:
    @workflow.run
    async def run(self, inp: c.PackWorkflowInput) -> c.WorkflowOutcomes:
        try:
            ingested = await workflow.execute_activity_method(
                A.ingest_pack,
                c.IngestPackInput(inp.key),
                start_to_close_timeout=timedelta(seconds=inp.activity_timeout_s),
                heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout_s),
                retry_policy=_RETRY,
            )
        except ActivityError as err:
            reason = _quarantine_reason(err)
            if reason is None:
                raise
            await _quarantine(inp.key, reason)
            return c.WorkflowOutcomes(inp.key, True, (), reason)
        return c.WorkflowOutcomes(inp.key, True, landed_cids=ingested.cids)
