"""Workflow IDs from business keys (DESIGN.md section 7) and the task-queue-independent names.

Starters (SQS bridge, CLI, schedules) build IDs here, never by hand, and start with
``id_conflict_policy=USE_EXISTING`` (a running one is attached) and
``id_reuse_policy=REJECT_DUPLICATE`` (a completed one is not repeated).
"""

from __future__ import annotations

PROJECT_META = "ProjectMetaObject"
INGEST_PACK = "IngestValuePack"
SWEEP = "Sweep"
INDEX_AND_COMPACT = "IndexAndCompact"
REPLAY = "Replay"
REBUILD = "Rebuild"


def project_meta_id(generation: int, key: str) -> str:
    return f"project/{generation}/{key}"


def ingest_pack_id(key: str) -> str:
    return f"pack/{key}"


def _scope_path(tenant_id: str, project_id: str, environment_id: str) -> str:
    return f"{tenant_id}/{project_id}/{environment_id}"


def sweep_schedule_id(tenant_id: str, project_id: str, environment_id: str) -> str:
    # Temporal names each scheduled run "<this>-<RFC3339 tick>": one ID per environment and tick.
    return f"sweep/{_scope_path(tenant_id, project_id, environment_id)}"


def index_schedule_id(tenant_id: str, project_id: str, environment_id: str) -> str:
    return f"index/{_scope_path(tenant_id, project_id, environment_id)}"


def replay_id(name: str) -> str:
    return f"replay/{name}"


def rebuild_id(name: str) -> str:
    return f"rebuild/{name}"
