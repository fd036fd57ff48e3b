"""``python -m worker.temporal_worker``: the Temporal worker process.

It connects to Temporal and polls the task queue. It registers the ``HealthCheck`` workflow and
activity (used by ``baml-studio stack status`` to prove the worker answers) and, when a
deployment identity is configured (``BAML_STUDIO_PROJECTION_*``, else the running stack's
``stack.json``, both through the one resolver of formats/deployment_settings.py), the projection
workflows and activities (docs/projection-runtime.md), whose synchronous activities run on a
thread pool. At start it creates or updates, idempotently, one Sweep and one
IndexAndCompact Temporal Schedule per covered environment. While polling it rewrites the
heartbeat file (if configured) every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from activities.erasure import ErasureActivities
from activities.maintenance_activities import MaintenanceActivities
from activities.projection_activities import ProjectionActivities
from activities.runtime import GenerationSwitch, Identity, build_projection_activities
from activities.settings import ProjectionSettings, get_projection_settings
from api.common.process_gc import tune_gc
from api.common.process_memory import (
    memory_snapshot,
    python_heap_top,
    resident_mib,
    trim_malloc,
    tune_allocators,
)
from api.common.temporal_rpc import is_transient
from formats.contracts import Workload, ids, task_queue
from formats.contracts import projection as c
from formats.deployment_settings import ConfigurationError, reveal, stack_run_dir
from worker.settings import TemporalWorkerSettings, get_worker_settings
from worker.stack.health_workflow import HealthCheckWorkflow, health_check_activity
from workflows.erasure import ErasureWorkflow
from workflows.maintenance import WORKFLOWS, IndexAndCompactWorkflow, SweepWorkflow
from workflows.projection import IngestValuePackWorkflow, ProjectMetaObjectWorkflow
from workflows.query_job import QueryJobWorkflow

log = logging.getLogger("baml_studio.temporal_worker")


def write_heartbeat(path: Path, payload: dict[str, object]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "at": time.time(), **payload}))
    os.replace(tmp, path)


async def _heartbeat(path: Path, interval_s: float, task_queue: str) -> None:
    while True:
        write_heartbeat(path, {"task_queue": task_queue})
        await asyncio.sleep(interval_s)


async def _log_memory(interval_s: float, acts: ProjectionActivities) -> None:
    """Where the worker's memory is, every ``interval_s``: a process that runs for days shows in
    its own log whether its caches are filling (bounded: the Lance session, the indexes) or its
    allocators are holding freed memory (docs/projection-runtime.md, "Worker", "Memory")."""
    while True:
        await asyncio.sleep(interval_s)
        log.info("memory: %s", memory_line(acts))


def _trim_and_measure() -> tuple[float, float] | None:
    """One :func:`trim_malloc`: the MiB it took out of RSS and the milliseconds it took, or None
    where the C library has no ``malloc_trim``."""
    # RSS only: a whole snapshot would walk glibc's arenas twice more (mallinfo2) around the trim.
    before = resident_mib().get("RssAnon", 0.0)
    t0 = time.perf_counter()
    if not trim_malloc():
        return None
    took_ms = 1000 * (time.perf_counter() - t0)
    return max(before - resident_mib().get("RssAnon", 0.0), 0.0), took_ms


async def _trim_malloc(interval_s: float) -> None:
    """Return glibc's free memory to the system every ``interval_s``, off the event loop: the walk
    over the arenas holds their locks for a few milliseconds."""
    while True:
        await asyncio.sleep(interval_s)
        trimmed = await asyncio.to_thread(_trim_and_measure)
        if trimmed is not None:
            returned, took_ms = trimmed
            # At info when it returned something: how much glibc held, and that trimming pays.
            level = logging.INFO if returned >= 1 else logging.DEBUG
            log.log(level, "memory: malloc_trim returned %.0f MiB in %.1f ms", returned, took_ms)


def memory_line(acts: ProjectionActivities) -> str:
    """The process's memory, the worker's caches and (when traced) Python's heap: one line."""
    return f"{memory_snapshot().describe()}; {acts.caches_held()}{python_heap_top()}"


def resolve_identity(settings: ProjectionSettings) -> Identity | None:
    """The deployment identity the settings resolved (variables, else the running stack's
    stack.json, through the one resolver); None while any of it is missing."""
    if settings.missing_identity():
        return None
    assert settings.deployment_id and settings.cell and settings.tenant_id
    return Identity(
        settings.deployment_id,
        settings.cell,
        settings.tenant_id,
        settings.covered_environments(),
        settings.queue_url,
        settings.boundary_control_url,
        settings.operator_token if reveal(settings.operator_token).strip() else None,
    )


def missing_identity_message(settings: ProjectionSettings) -> str:
    """Names what is unset and where it was looked for (a configuration gap, not a network error)."""
    return (
        f"no deployment identity: {', '.join(settings.missing_identity())} unset and no running "
        f"embedded stack in {stack_run_dir(settings.stack_run_dir)} lends them: projection "
        "workflows not registered (only HealthCheck)"
    )


def _schedule(action: ScheduleActionStartWorkflow, every_s: float) -> Schedule:
    return Schedule(
        action=action,
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=every_s))]),
        # A tick that finds the previous run still going is skipped, never queued.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_schedule(client: Client, schedule_id: str, schedule: Schedule) -> None:
    """Create the schedule, or bring an existing one to this definition (idempotent)."""
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(replace)


async def ensure_schedules(
    client: Client, base_queue: str, identity: Identity, ps: ProjectionSettings
) -> list[str]:
    """One Sweep and one IndexAndCompact schedule per covered environment, on the maintenance queue
    of the deployment whose base queue is ``base_queue``."""
    created: list[str] = []
    queue = task_queue(base_queue, Workload.MAINTENANCE)
    for project_id, environment_id in identity.environments:
        scope = c.ScopeRef(identity.tenant_id, project_id, environment_id)
        sweep_id = ids.sweep_schedule_id(identity.tenant_id, project_id, environment_id)
        await ensure_schedule(
            client,
            sweep_id,
            _schedule(
                ScheduleActionStartWorkflow(
                    SweepWorkflow.run, c.SweepInput(scope), id=sweep_id, task_queue=queue
                ),
                ps.sweep_interval_s,
            ),
        )
        index_id = ids.index_schedule_id(identity.tenant_id, project_id, environment_id)
        await ensure_schedule(
            client,
            index_id,
            _schedule(
                ScheduleActionStartWorkflow(
                    IndexAndCompactWorkflow.run, c.IndexInput(scope), id=index_id, task_queue=queue
                ),
                ps.index_interval_s,
            ),
        )
        created += [sweep_id, index_id]
    return created


async def keep_ensuring_schedules(
    client: Client, base_queue: str, identity: Identity, ps: ProjectionSettings, *, max_wait_s: float = 60.0
) -> list[str]:
    """:func:`ensure_schedules` until it succeeds, with capped exponential backoff: Temporal timing
    out or unavailable is retried; anything else (a refused definition, a bug) ends the task
    loudly (:func:`_log_failure`)."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        wait=wait_exponential_jitter(initial=1.0, max=max_wait_s),
        before_sleep=lambda state: log.warning(
            "schedules not ensured yet (attempt %d): %s; retrying",
            state.attempt_number,
            type(state.outcome.exception()).__name__ if state.outcome else "?",
        ),
    ):
        with attempt:
            names = await ensure_schedules(client, base_queue, identity, ps)
    log.info("schedules ensured: %d", len(names))
    return names


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())


def query_job_activities() -> list[Any]:
    """Background query jobs run the coordinator's plan in this worker (docs/query.md)."""
    from activities.query_job import QueryJobActivities
    from api.coordinator.runtime import CoordinatorRuntime
    from api.coordinator.settings import CoordinatorSettings

    runtime = CoordinatorRuntime(CoordinatorSettings())
    acts = QueryJobActivities(runtime, runtime.s3, runtime.settings.bucket)
    return [acts.run_query_job, acts.delete_query_job_result]


@dataclass
class WorkloadRoom:
    """What one workload class's worker registers, and its own activity slots."""

    workflows: list[Any]
    activities: list[Any]
    threads: int


def workload_rooms(
    settings: TemporalWorkerSettings,
    ps: ProjectionSettings,
    acts: ProjectionActivities,
    switch: GenerationSwitch,
) -> dict[Workload, WorkloadRoom]:
    """The rooms of the workloads ``settings.workloads`` names, from the projection's clients."""
    chosen = set(settings.workloads)
    projection = acts.activities()
    rooms: dict[Workload, WorkloadRoom] = {}
    if Workload.PROJECTION in chosen:
        rooms[Workload.PROJECTION] = WorkloadRoom(
            [ProjectMetaObjectWorkflow, IngestValuePackWorkflow], list(projection), ps.activity_threads
        )
    if Workload.MAINTENANCE in chosen:
        # A rebuild's children (ProjectMetaObject, IngestValuePack) run on the rebuild's own queue,
        # so a rebuild of a whole environment never takes the live projection's slots.
        rooms[Workload.MAINTENANCE] = WorkloadRoom(
            list(WORKFLOWS),
            [*projection, *MaintenanceActivities(acts).activities(), switch.switch_generation],
            settings.maintenance_threads,
        )
    if Workload.ERASURE in chosen:
        # Erasures share the projection's clients (docs/erasure.md).
        erasure = ErasureActivities(
            s3=acts.s3,
            bucket=acts.bucket,
            boundary=acts.sink.client,  # type: ignore[attr-defined]
            lance=acts.lance,
        ).activities()
        rooms[Workload.ERASURE] = WorkloadRoom([ErasureWorkflow], erasure, settings.erasure_threads)
    if Workload.QUERY_JOBS in chosen:
        rooms[Workload.QUERY_JOBS] = WorkloadRoom(
            [QueryJobWorkflow], query_job_activities(), settings.query_job_threads
        )
    if Workload.PROJECTION in rooms:
        # Releases before the split ran every family on the base queue, which projection keeps:
        # its worker also takes the other families this process runs, so their runs started there
        # finish. Today's starters send them to their own queues.
        room = rooms[Workload.PROJECTION]
        for other in rooms.values():
            room.workflows += [w for w in other.workflows if w not in room.workflows]
            room.activities += [a for a in other.activities if a not in room.activities]
    return rooms


def build_worker(
    client: Client,
    task_queue: str,
    projection_activities: list[Any],
    *,
    max_threads: int = 8,
    workflows: list[Any] | None = None,
    sandboxed: bool = False,
) -> Worker:
    """A worker on ``task_queue`` with HealthCheck plus the given activities and ``workflows``
    (by default every workflow but the health check: the tests' one-queue worker).

    Workflows run outside Temporal's sandbox unless ``sandboxed``: the sandbox imports a
    workflow's module again for every run, which doubled the worker's CPU per ProjectMetaObject
    run (bench/workflow_runner.py). Its checks (no I/O, clock or randomness in workflow code) stay
    in the tests: every workflow's recorded histories replay in the sandbox
    (tests/workflows/test_history_replay.py), and the workflow tests' own workers use it.
    """
    registered: list[Any] = [HealthCheckWorkflow]
    activities: list[Any] = [health_check_activity]
    executor = None
    if projection_activities:
        registered += workflows if workflows is not None else [*WORKFLOWS, ErasureWorkflow, QueryJobWorkflow]
        activities += projection_activities
        executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix=f"activity-{task_queue}")
    return Worker(
        client,
        task_queue=task_queue,
        workflows=registered,
        activities=activities,
        activity_executor=executor,
        max_concurrent_activities=max_threads if executor else None,
        workflow_runner=SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner(),
    )


async def run_worker(settings: TemporalWorkerSettings, ps: ProjectionSettings | None = None) -> None:
    ps = ps or get_projection_settings()
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    identity = resolve_identity(ps)
    built = build_projection_activities(settings, ps, identity) if identity is not None else None
    if identity is None:
        log.warning("%s", missing_identity_message(ps))
    workers: list[Worker] = []
    background: list[asyncio.Task[Any]] = []
    if built is not None and identity is not None:
        acts, switch = built
        for workload, room in workload_rooms(settings, ps, acts, switch).items():
            queue = task_queue(settings.task_queue, workload)
            workers.append(
                build_worker(
                    client,
                    queue,
                    room.activities,
                    max_threads=room.threads,
                    workflows=room.workflows,
                    sandboxed=settings.workflow_sandbox,
                )
            )
            log.info("polling task queue %s (%s, %d slots)", queue, workload.value, room.threads)
        if Workload.MAINTENANCE in settings.workloads:
            # Beside the polling, not before it: a restart under load whose schedule update times
            # out must still poll (the schedules of the previous start keep ticking meanwhile).
            ensuring = asyncio.create_task(keep_ensuring_schedules(client, settings.task_queue, identity, ps))
            ensuring.add_done_callback(_log_failure)
            background.append(ensuring)
        if settings.memory_log_interval_s > 0:
            memory = asyncio.create_task(_log_memory(settings.memory_log_interval_s, acts))
            memory.add_done_callback(_log_failure)
            background.append(memory)
    else:
        # Only the health check: it proves the worker answers before the deployment exists.
        workers.append(build_worker(client, settings.task_queue, [], sandboxed=settings.workflow_sandbox))
    if settings.malloc_trim_interval_s > 0:
        trimming = asyncio.create_task(_trim_malloc(settings.malloc_trim_interval_s))
        trimming.add_done_callback(_log_failure)
        background.append(trimming)
    tune_gc()
    log.info("worker on %s: %d task queues", settings.temporal_address, len(workers))
    async with contextlib.AsyncExitStack() as running:
        for w in workers:
            await running.enter_async_context(w)
        beat = (
            asyncio.create_task(
                _heartbeat(settings.heartbeat_file, settings.heartbeat_interval_s, settings.task_queue)
            )
            if settings.heartbeat_file
            else None
        )
        await stop.wait()
        for task in [*background, *([beat] if beat else [])]:
            task.cancel()
    log.info("stopped")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = get_worker_settings()
    except ConfigurationError as exc:  # placeholder credentials outside the stack, and the like
        log.error("configuration error: %s", exc)
        sys.exit(2)
    # Before any thread allocates: glibc's cap applies to arenas created after it.
    tune_allocators(settings.malloc_arena_max, settings.arrow_memory_pool)
    if settings.trace_python_heap:
        tracemalloc.start()
    asyncio.run(run_worker(settings))


if __name__ == "__main__":
    main()
