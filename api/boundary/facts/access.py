"""Scope and generation rules shared by the fact routes (reads the metastore)."""

from __future__ import annotations

from api.boundary import models as m
from api.boundary.deps import BoundaryRuntime, WorkloadCaller
from api.boundary.facts.batch_check import BatchScope
from api.common.errors import BadRequest, Conflict, NotFound


def own_environment(runtime: BoundaryRuntime, caller: WorkloadCaller, environment_id: str) -> m.Environment:
    """The environment, if it belongs to the calling deployment's tenant (else it does not exist)."""
    try:
        env = runtime.metastore.get_environment(environment_id)
    except NotFound:
        env = None
    if env is None or env.tenant_id != caller.tenant_id:
        raise NotFound(f"environment {environment_id} not found", code="environment_not_found")
    return env


def writable_generation(env: m.Environment, generation: int) -> None:
    """Writes go to the active generation or the next one (a rebuild in progress)."""
    if generation not in (env.active_generation, env.active_generation + 1):
        raise Conflict(
            f"generation {generation} is neither the active generation ({env.active_generation})"
            " nor the next one",
            code="generation_not_writable",
            remedy="Project into the active generation (or the next one during a rebuild).",
        )


def scope_of(env: m.Environment, generation: int) -> BatchScope:
    return BatchScope(env.tenant_id, env.project_id, env.id, generation)


def readable_generation(env: m.Environment, generation: int) -> None:
    if generation not in (env.active_generation, env.active_generation + 1, env.active_generation - 1):
        raise BadRequest(
            f"generation {generation} is not readable (active is {env.active_generation})",
            code="generation_not_readable",
            remedy="Bind the query to a snapshot from POST /query-snapshots.",
        )
