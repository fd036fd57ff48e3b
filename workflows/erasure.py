"""The erasure workflow (ID ``erasure/<erasure_id>``, the erasure id derived from the Idempotency-Key).

States: queued -> running -> succeeded | failed (contract "State machines"). The workflow is the
erasure's system of record: the gateway reads it with the ``status`` query (or the result, once
closed). Steps, in the contract's order, each an idempotent activity: resolve the selector to
streams and roots; (1) delete every version of the streams' objects; (2) erase Boundary's facts;
(3) commit Lance versions without the rows; then delete shared values and tables no remaining
root references, remove old Lance versions, and verify every store for the receipt. A round
whose verification finds anything left is repeated (a concurrent write raced it), at most
``max_rounds`` times. No I/O here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.erasure import ErasureActivities as A
    from formats.contracts import erasure as e

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

# A run of the older code that failed (or was cancelled) after resolve ended without discarding
# its plan; replaying such a history (a status query on it) must issue the commands it recorded,
# so the discard on those paths is behind this marker. Remove (workflow.deprecate_patch) once no
# such run can still be queried (the namespace's retention).
DISCARD_ON_FAILURE_PATCH = "erasure-discard-plan-on-failure-v1"


def receipt(
    inp: e.ErasureInput,
    plan: e.PlanRef,
    deleted: e.DeleteObjectsResult,
    facts: e.EraseFactsResult,
    lance: e.EraseLanceResult,
    shared: e.DeleteUnreferencedResult,
    cleanup: e.CleanupResult,
    check: e.VerifyResult,
) -> dict[str, Any]:
    """One round's receipt (pure), in the shape docs/erasure.md describes."""
    return {
        "erasure_id": inp.erasure_id,
        "selector": inp.selector.kind,
        "streams": list(plan.euids),
        "root_ids": plan.root_count,
        "s3": {
            "object_versions_deleted": deleted.versions_deleted,
            "delete_markers_deleted": deleted.delete_markers_deleted,
            "shared_objects_deleted": shared.objects_deleted,
            "shared_cids_kept": shared.objects_kept,
            "remaining_object_versions": check.s3_object_versions,
            "remaining_by_stream": check.s3_objects_by_stream,
        },
        "boundary": {
            "generations_from": facts.generation_from,
            "fact_rows_deleted": facts.deleted,
            "remaining_fact_rows": check.boundary_fact_rows,
            "remaining_total": check.boundary_fact_total,
        },
        "lance": {
            "rows_deleted": {**lance.rows_deleted, "values_v1": shared.values_rows_deleted},
            "rewritten_datasets": list(lance.compacted),
            "remaining_rows_current": check.lance_rows_current,
            "remaining_rows_all_versions": check.lance_rows_retained_versions,
            "versions_retained": check.lance_versions_retained,
            "old_versions_removed": cleanup.versions_removed,
            "tagged_versions_kept": cleanup.tagged_versions_kept,
            "old_versions_removed_at_ns": cleanup.cleaned_at_ns,
            "noncurrent_objects_removed": cleanup.noncurrent_objects_removed,
            "remaining_noncurrent_objects": check.lance_noncurrent_object_versions,
            "fragments_with_deletion_masks": check.lance_fragments_with_deletions,
        },
        # Program-keyed rows are shared by every stream of one build (content-hashed program id):
        # those of a program a remaining stream still uses stay, and the receipt says so.
        "programs": {
            "erased": list(lance.programs_erased),
            "kept_in_use": {p: {"streams": n} for p, n in lance.programs_kept.items()},
            "lance_rows_kept": lance.program_rows_kept,
            "fact_rows_kept": lance.program_fact_rows_kept,
            "in_use_at_verification": check.programs_in_use,
        },
        "verified": check.clean,
        "verified_at_ns": check.verified_at_ns,
    }


@workflow.defn(name=e.ERASURE_WORKFLOW)
class ErasureWorkflow:
    def __init__(self) -> None:
        self._status: e.ErasureStatus | None = None

    @workflow.query(name=e.STATUS_QUERY)
    def status(self) -> e.ErasureStatus | None:
        return self._status

    async def _step(self, name: str, method: Callable[[Any, I], R], arg: I, t: e.StepTimeouts) -> R:
        """Run one step (``name``: what the status reports while it runs) with the family's retries."""
        assert self._status is not None
        self._status.step = name
        return await workflow.execute_activity_method(
            method,
            arg,
            start_to_close_timeout=timedelta(seconds=t.activity_s),
            heartbeat_timeout=timedelta(seconds=t.heartbeat_s),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=t.retry_initial_s),
                maximum_interval=timedelta(seconds=t.retry_max_s),
                maximum_attempts=20,
                non_retryable_error_types=["BadSelector"],
            ),
        )

    async def _discard_after_failure(self, inp: e.ErasureInput, plan: e.PlanRef | None) -> None:
        """A failed or cancelled erasure removes its stored plan too: it lists the erased roots.

        Nothing to do before resolve returned a plan, or when the discard itself was the step that
        failed (it had its retries). A discard that fails here is reported in the error's message
        and leaves the original error in place."""
        assert self._status is not None
        st = self._status
        if plan is None or st.step == e.DISCARD_PLAN or not workflow.patched(DISCARD_ON_FAILURE_PATCH):
            return
        try:
            await self._step(e.DISCARD_PLAN, A.discard_plan, e.PlanInput(inp.erasure_id, plan), inp.timeouts)
        except ActivityError:
            if st.error is not None:
                st.error["message"] += "; its stored plan could not be removed"

    @workflow.run
    async def run(self, inp: e.ErasureInput) -> e.ErasureStatus:
        st = self._status = e.ErasureStatus(
            erasure_id=inp.erasure_id,
            tenant_id=inp.scope.tenant_id,
            project_id=inp.scope.project_id,
            environment_id=inp.scope.environment_id,
            selector_kind=inp.selector.kind,
            request_digest=inp.request_digest,
            created_at_unix=workflow.now().timestamp(),
        )
        st.state = e.RUNNING
        t = inp.timeouts
        plan: e.PlanRef | None = None
        try:
            plan = await self._step(
                e.RESOLVE, A.resolve, e.ResolveInput(inp.erasure_id, inp.scope, inp.selector), t
            )
            st.streams_matched, st.roots_matched, st.streams_deleted = len(plan.euids), plan.root_count, 0
            verified = False
            for rnd in range(1, max(1, inp.max_rounds) + 1):
                st.round = rnd
                step = e.PlanInput(inp.erasure_id, plan, rnd)
                deleted = await self._step(e.DELETE_STREAM_OBJECTS, A.delete_stream_objects, step, t)
                st.streams_deleted = deleted.streams_deleted
                facts = await self._step(e.ERASE_FACTS, A.erase_facts, step, t)
                lance = await self._step(e.ERASE_LANCE_ROWS, A.erase_lance_rows, step, t)
                shared = await self._step(e.DELETE_UNREFERENCED, A.delete_unreferenced, step, t)
                cleanup = await self._step(
                    e.CLEANUP_LANCE_VERSIONS,
                    A.cleanup_lance_versions,
                    e.CleanupInput(inp.erasure_id, inp.scope),
                    t,
                )
                check = await self._step(e.VERIFY, A.verify, step, t)
                st.receipt = receipt(inp, plan, deleted, facts, lance, shared, cleanup, check)
                if check.clean:
                    verified = True
                    break
            # The plan lists the erased roots: it goes with them (on failure too, below).
            await self._step(e.DISCARD_PLAN, A.discard_plan, e.PlanInput(inp.erasure_id, plan), t)
            if verified:
                st.state = e.SUCCEEDED
            else:
                st.state = e.FAILED
                st.error = {
                    "code": "erasure_not_verified",
                    "message": f"data of the erased streams remained after {inp.max_rounds} rounds",
                    "remedy": "Stop the publishers of these streams, then start a new erasure.",
                }
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, CancelledError):
                code = "cancelled"  # the workflow was cancelled while this step ran
            elif isinstance(cause, ApplicationError) and cause.type:
                code = cause.type
            else:
                code = "step_failed"
            st.state = e.FAILED
            st.error = {
                "code": code,
                "message": f"step {st.step} failed",
                "remedy": "Fix the cause, then retry with a new Idempotency-Key (every step is idempotent).",
            }
            await self._discard_after_failure(inp, plan)
        except asyncio.CancelledError:
            # Cancelled between steps: the plan goes all the same, then the run ends cancelled.
            st.state = e.FAILED
            st.error = {
                "code": "cancelled",
                "message": f"cancelled at step {st.step}",
                "remedy": "Start a new erasure with a new Idempotency-Key (every step is idempotent).",
            }
            await self._discard_after_failure(inp, plan)
            raise
        st.step = None
        st.finished_at_unix = workflow.now().timestamp()
        return st


def status_dict(status: e.ErasureStatus) -> dict[str, Any]:
    return asdict(status)
