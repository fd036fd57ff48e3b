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

# Every family runs on one task queue by default; a deployment may name another (the starters'
# and the worker's ``task_queue`` settings).
DEFAULT_TASK_QUEUE = "baml-studio"


@dataclass(frozen=True)
class ScopeRef:
    tenant_id: str
    project_id: str
    environment_id: str
