"""Workload API: ``POST /projection-erasures`` (delete a root's facts) and
``POST /projection-fact-counts`` (what the erasure receipt uses to prove absence)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from api.boundary.deps import IdemKey, Runtime, Workload
from api.boundary.facts import access
from api.common.errors import BadRequest, IdempotencyConflict, problem_responses
from api.common.idempotency import request_digest
from formats import boundary_wire as w

router = APIRouter(tags=["erasure"], responses=problem_responses(400, 401, 403, 404, 409, 422))


@router.post(
    "/projection-erasures", operation_id="createProjectionErasure", response_model=w.ProjectionErasure
)
async def create_projection_erasure(
    body: w.ProjectionErasureRequest, caller: Workload, runtime: Runtime, key: IdemKey
) -> w.ProjectionErasure:
    if key is None:
        raise BadRequest(
            "POST /projection-erasures needs an Idempotency-Key", code="idempotency_key_missing",
            remedy="Send the erasure's id as the Idempotency-Key.",
        )  # fmt: skip
    env = access.own_environment(runtime, caller, body.environment_id)
    store = await run_in_threadpool(runtime.fact_store)
    digest = request_digest("POST", "/projection-erasures", body)
    prior = await run_in_threadpool(store.erasure_record, caller.tenant_id, key)
    if prior is not None:
        if prior[0] != digest:
            raise IdempotencyConflict(
                "Idempotency-Key was used with a different projection erasure",
                remedy="Use a new Idempotency-Key for a different request.",
            )
        return w.ProjectionErasure.model_validate(prior[1])
    roots = sorted(set(body.root_ids))
    outcome = await run_in_threadpool(store.erase, access.scope_of(env, body.generation), roots)
    result = w.ProjectionErasure(
        environment_id=env.id,
        generation=body.generation,
        roots=len(roots),
        deleted=outcome.deleted,
        remaining=outcome.remaining,
        remaining_total=outcome.remaining_total,
        state="complete" if outcome.remaining_total == 0 else "incomplete",
    )
    if result.state == "complete":  # an incomplete answer is not replayed: a retry erases again
        await run_in_threadpool(
            store.record_erasure, caller.tenant_id, key, digest, result.model_dump(mode="json")
        )
    return result


@router.post(
    "/projection-fact-counts", operation_id="countProjectionFacts", response_model=w.ProjectionFactCounts
)
async def count_projection_facts(
    body: w.ProjectionFactCountsRequest, caller: Workload, runtime: Runtime
) -> w.ProjectionFactCounts:
    env = access.own_environment(runtime, caller, body.environment_id)
    store = await run_in_threadpool(runtime.fact_store)
    scope = access.scope_of(env, body.generation or 0)
    counts = await run_in_threadpool(
        lambda: store.fact_counts(scope, sorted(set(body.root_ids)), all_generations=body.generation is None)
    )
    return w.ProjectionFactCounts(
        environment_id=env.id, generation=body.generation, counts=counts, total=sum(counts.values())
    )
