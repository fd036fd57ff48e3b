"""Temporal contracts: one module per workflow family, beside the other wire types.

Each module holds what crosses a process boundary for its family: the task queue, the workflow and
activity names, the inputs, outputs and status types. Workflows, activities and the starters in
``api/`` and ``worker/`` all import them from here, the ground floor, so a starter never imports a
workflow or an activity module. Plain frozen dataclasses of strings, ints and tuples: they travel
through Temporal's JSON payload converter.

Annotations are evaluated eagerly in these modules (no ``from __future__ import annotations``):
the workflow sandbox resolves them without the module's globals.
"""

from dataclasses import dataclass
from enum import StrEnum

# The base task queue name; a deployment may name another (the starters' and the worker's
# ``task_queue`` settings). Each workload class polls a queue derived from it (task_queue()).
DEFAULT_TASK_QUEUE = "baml-studio"


class Workload(StrEnum):
    """The workload classes, each on its own task queue with its own worker slots, so that a heavy
    background query, a rebuild or an erasure never delays projection freshness (docs/projection-runtime.md,
    "Task queues")."""

    PROJECTION = "projection"  # ProjectMetaObject, IngestValuePack: what the SQS bridge starts
    MAINTENANCE = "maintenance"  # Sweep, IndexAndCompact, Replay, Rebuild (and a rebuild's children)
    QUERY_JOBS = "query-jobs"  # QueryJob, started by the coordinator
    ERASURE = "erasure"  # Erasure, started by the gateway


def task_queue(base: str, workload: Workload) -> str:
    """The queue of ``workload`` in a deployment whose base queue is ``base``.

    Projection keeps the base name itself: it is the queue every earlier release used for all
    work, so the bridge's starts and the workflows already running there need no migration.
    """
    return base if workload is Workload.PROJECTION else f"{base}-{workload.value}"


@dataclass(frozen=True)
class ScopeRef:
    tenant_id: str
    project_id: str
    environment_id: str
